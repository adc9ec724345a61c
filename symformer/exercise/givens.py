"""What a sheet gives besides the input tables: the weights and constants the asked steps'
equations read, each under the symbol its equation prints, and what a sheet refuses.

Every array an asked step's general equation reads that is not a stage is given on the
sheet: a parameter (``W_1``, ``b_Q``, ``gamma``) under the symbol the equation prints
(:func:`symformer.notation.parameter`: ``W_{Q}^{(1,1)}``), and a constant applied entry by
entry to an input (a dropout mask ``D``, a loss's targets ``T``: a constant array of an
input's shape) with the equation's scalars beside it (dropout's rate ``p``).  A constant
of another shape is a decision's index (a routing margin's ranked experts ``a``, ``b``):
the student decides it, so it is not given.

:func:`check_givens` refuses, in one line naming the stages, what no careful author hands
out: one symbol with two meanings and a decision (a step whose equation reads no stage
and no weight: the experts chosen, ``chi = K``, its rule in the remark) asked with no
asked step it is decided from.  :func:`with_decisions` asks a decision the sheet asks
about (made from an asked step, read by one) rather than give its table away.
"""

from __future__ import annotations

from dataclasses import dataclass

from symformer.engine import Derivation, Stage
from symformer.equations.stage import forward
from symformer.errors import InputError
from symformer.lazy import sympy


@dataclass(frozen=True)
class Given:
    """One given array: the stage whose equation reads it, its printed symbol, its exact
    matrix, the scalars printed beside it (``p = 1/3``) and who owns it (for the
    one-symbol-one-meaning check: the stage's block and the array's name)."""

    stage: Stage
    symbol: str
    matrix: sympy.Matrix
    scalars: tuple[tuple[str, object], ...]
    owner: tuple[str, str]


def _block(stage: Stage) -> str:
    """The block a stage belongs to (``layer1.moe.expert2.ffn``): its name less its step."""
    return stage.name.rpartition(".")[0]


def givens(g: Derivation, asked: list[str]) -> list[Given]:
    """The parameters and elementwise constants the asked steps read, each once, in asked
    order (the embedding table is never given: the input rows are)."""
    from symformer.notation import parameter

    out: list[Given] = []
    seen: set[tuple[str, str]] = set()
    for name in asked:
        stage = g[name]
        bound = forward(stage)
        if bound is None:
            continue
        inputs = {g[i].shape for i in stage.inputs}
        for array, source in bound.sources.items():
            if "parameter" in source:
                pname = source["parameter"]
                if pname == "embedding_table":
                    continue
                owner = (_block(stage), pname)
                symbol = parameter(stage, pname).latex
                scalars: tuple = ()
            elif "constant" in source and bound.matrices[array].shape in inputs \
                    and not decision(stage):  # a decision's table is the answer
                owner = (stage.name, array)
                symbol = bound.eq.symbols.get(array, (array,))[0]
                scalars = tuple((bound.eq.symbols.get(k, (k,))[0], v)
                                for k, v in bound.eq.scalars.items())
            else:
                continue
            if owner not in seen:
                seen.add(owner)
                out.append(Given(stage, symbol, bound.matrices[array], scalars, owner))
    return out


def decision(stage: Stage) -> bool:
    """Whether ``stage``'s equation reads no stage and no weight: a decision the
    derivation holds (the experts chosen, ``chi = K``), its rule in the remark."""
    bound = forward(stage)
    return bound is not None and not any(
        "stage" in s and s["stage"] != stage.name or "parameter" in s
        for s in bound.sources.values())


def with_decisions(g: Derivation, asked: list[str]) -> list[str]:
    """``asked`` and every decision the sheet asks about, in derivation order: a
    decision made from an asked step (one of its ancestors asked) and read by an
    asked step is asked too -- the student decides it from their own numbers (its
    rule on the sheet), never handed it as a given table."""
    chosen = set(asked)
    for stage in g:
        if stage.name in chosen or not decision(stage):
            continue
        reads = any(stage.name in g[name].inputs for name in asked)
        if reads and g.ancestors(stage.name) & chosen:
            chosen.add(stage.name)
    return [s.name for s in g if s.name in chosen]


def check_givens(g: Derivation, asked: list[str], source: str) -> None:
    """Refuse (one line, naming the stages) a step with nothing to compute -- a decision
    asked although no asked step leads to it -- and a sheet that would print one symbol
    for two different arrays."""
    for name in asked:
        if decision(g[name]) and not g.ancestors(name) & set(asked):
            raise InputError(
                f"{source}: --ask {name}: the step (operation {g[name].op.name!r}) reads no "
                f"table and no weight: its entries are a decision the derivation holds, "
                f"nothing a student computes from the sheet; ask it with the steps it is "
                f"decided from")
    by_symbol: dict[str, Given] = {}
    for given in givens(g, asked):
        first = by_symbol.setdefault(given.symbol, given)
        if first.owner != given.owner:
            raise InputError(
                f"{source}: --ask: {first.stage.name} and {given.stage.name} read different "
                f"arrays printed alike (${given.symbol}$): a sheet would give one symbol two "
                f"meanings; ask one of them per sheet")
