"""``symformer check``'s judging step as one call: a claims file (or tagged notes)
judged on a prepared derivation, numbers and equations together.

A notebook gets exactly what the command prints::

    from symformer import Request, prepare
    from symformer.documents import check_text
    from symformer.verify.judging import judge

    p = prepare(example, Request(command="check"))
    judged = judge(p, "claims.toml")
    print(check_text(judged.claims, judged.numbers, judged.equations, judged.unchecked))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from symformer.blocks.backward import is_backward_stage
from symformer.blocks.train import is_training_stage, step_of
from symformer.engine.graph import Stage
from symformer.errors import InputError
from symformer.pipeline import Prepared, check_work
from symformer.verify.check import Checker, ClaimCheck, summary
from symformer.verify.claims import (
    Claim,
    decoding_rule,
    load_claims,
    training_run,
    unmapped_arrays,
)
from symformer.verify.equation_claims import EquationCheck, Judge, load_equations


@dataclass
class Judged:
    """The claims read, each claimed number's verdicts, each equation's."""

    claims: list[Claim]
    numbers: list[ClaimCheck]
    equations: list[EquationCheck]
    #: a document's printed arrays no ``--name`` maps: ``NAME (line N)``, not compared
    unchecked: list[str] = field(default_factory=list)

    @property
    def unreadable(self) -> list[str]:
        """One line for each equation that cannot be read (the others were judged)."""
        return [e.unreadable for e in self.equations if e.unreadable]

    @property
    def status(self) -> int:
        """``check``'s exit status: 2 when an equation cannot be read, 0 when every
        number and equation holds, else 1."""
        if self.unreadable:
            return 2
        right, total = summary(self.numbers)
        return 0 if right == total and all(e.ok for e in self.equations) else 1


def judge(p: Prepared, claims_file: str | Path, names: Sequence[str] = (),
          max_work: int | None = None,
          progress: Callable[[int, int, str], None] | None = None) -> Judged:
    """Judge ``claims_file`` (a claims TOML file, an example with claims about itself,
    or tagged notes; ``names``: a document's ``NAME=STAGE`` mappings) on ``p`` (from
    :func:`symformer.prepare` with ``command="check"``).

    Every piece of work is refused before it starts when over ``max_work``, as the
    command line's: the claims and the equations' random examples counted once they
    are read, a backward pass or a training run when a claim first names one of their
    stages.  ``progress(k, total, name)``: each claim as it starts."""
    g, example = p.derivation, p.given
    # the run claims on a step's stages mean: the claims file's [train], else the example's
    run = training_run(claims_file) or training_run(example.source)
    # a generation run's rule (claims on step2.kept): the claims file's [decoding] first
    rule = decoding_rule(claims_file)
    checker = Checker(g.example if rule is None else replace(g.example, decoding=rule),
                      max_work, causal=p.request.causal, run=run)
    equations = load_equations(claims_file)
    generated: dict[str, int] = {}  # the generation run's steps, once a claim asks for it
    claims = load_claims(claims_file, g, list(names),
                         _bounded(example, checker, max_work, generated))
    if not equations and not any(c.check for c in claims):
        # a verdict only over what was compared: no number, no "all right"
        raise InputError(f"{claims_file}: nothing to check: every claim has check = false "
                         f"(only an input of other claims), so no number is compared")
    check_work(example, "check", max_work, claims=len(claims),
               numbers=sum(len(row) for c in claims for row in c.values),
               equations=len(equations),
               random_examples=max((e.examples for e in equations), default=0),
               equation_chars=sum(len(e.latex) for e in equations), **generated)
    numbers = checker.check_all(claims, progress)
    judged = Judge(g.example, checker.derivation, checker.causal, checker.run, max_work)
    return Judged(claims, numbers, judged.check_each(equations),
                  unmapped_arrays(claims_file, list(names)))


def _bounded(example: Any, checker: Checker, max_work: int | None,
             generated: dict[str, Any]) -> Callable[[str], Stage]:
    """The checker's stage lookup, refusing first (before any work) a backward pass, a
    training run or a generation run that the work limit does not allow: a claim on a
    gradient costs a backward pass under the example's conventions and each alternative
    one, a claim on a training step the run twice (the check and reader rounding), a
    claim on a generation step (``step2.kept``) the run's steps generated under its
    rule (``generated`` keeps them for the estimate of the whole check):
    :func:`symformer.blocks.cost.check_work`."""
    def stage(name: str) -> Stage:
        rule = checker.example.decoding
        if is_training_stage(name) and checker.run is None and rule is not None:
            steps = rule.steps or max(step_of(name), generated.get("generated_steps", 0))
            # generation_run's steps: [decoding] steps, else the latest claimed step
            generated.update(generated_steps=steps, decoding=rule)
            check_work(example, "check", max_work, **generated)
        elif is_training_stage(name) and checker.run is not None:
            check_work(example, "check", max_work, train_steps=checker.run.steps)
        elif is_backward_stage(name):
            check_work(example, "check", max_work, gradients=True)
        return checker.stage(name)
    return stage
