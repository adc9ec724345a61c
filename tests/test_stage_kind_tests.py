"""Renderers and checkers ask an operation's declarations, not a stage's ``kind`` string.

Counted here: every test of a stage's kind outside ``symformer/ops/`` -- a comparison
(``stage.kind == "layer_norm"``, ``s.kind in NORM_KINDS``) or a lookup keyed by it
(``GROUPS.get(stage.kind)``, ``GROUPS[stage.kind]``), on a stage (a name ``stage``,
``s``, ``added``, ``near``; ``X.stage``; ``g[name]``, ``self.g[name]``).  A new one
fails; the allowlist is empty (every renderer and checker asks declarations) and stays so: a
module that tests fewer than it lists fails too, until its entry is lowered (or removed
at 0).  A new kind of step declares what the rest asks of it on its operation
(``docs/architecture.md``).
"""

from __future__ import annotations

import ast
import functools
from collections import Counter
from pathlib import Path

import symformer

#: Today's stage-kind tests by module (relative to ``symformer/``): lower an entry when
#: a test moves onto a declaration; never raise one, never add one.
ALLOWED: dict[str, int] = {}

#: Names a stage goes by.
_STAGE_NAMES = {"stage", "s", "added", "near"}


def _is_stage_kind(node: ast.AST) -> bool:
    """Is ``node`` a stage's ``.kind`` (not a token's, a box's or a loss's)?"""
    if not (isinstance(node, ast.Attribute) and node.attr == "kind"):
        return False
    owner = node.value
    graph = owner.value if isinstance(owner, ast.Subscript) else None  # g[name]
    return (isinstance(owner, ast.Name) and owner.id in _STAGE_NAMES
            or isinstance(owner, ast.Attribute) and owner.attr == "stage"
            or isinstance(graph, ast.Name) and graph.id in ("g", "graph")
            or isinstance(graph, ast.Attribute) and graph.attr == "g")


def kind_tests(tree: ast.AST) -> int:
    """The stage-kind tests in a module's tree: comparisons and lookups keyed by it."""
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            count += any(_is_stage_kind(n) for n in (node.left, *node.comparators))
        elif isinstance(node, ast.Subscript):
            count += _is_stage_kind(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and node.args:
            count += _is_stage_kind(node.args[0])
    return count


@functools.cache
def counts() -> Counter:
    """The stage-kind tests of every module outside ``ops/`` (parsed once)."""
    root = Path(symformer.__file__).parent
    found: Counter = Counter()
    for path in sorted(root.rglob("*.py")):
        if path.is_relative_to(root / "ops"):
            continue
        n = kind_tests(ast.parse(path.read_text(encoding="utf-8")))
        if n:
            found[path.relative_to(root).as_posix()] = n
    return found


def test_no_new_stage_kind_test_outside_ops():
    found = counts()
    more = {m: n for m, n in found.items() if n > ALLOWED.get(m, 0)}
    assert not more, (f"new tests of stage.kind (ask the operation's declarations "
                      f"instead): {more}")


def test_the_allowlist_only_shrinks():
    found = counts()
    fewer = {m: (found.get(m, 0), n) for m, n in ALLOWED.items() if found.get(m, 0) < n}
    assert not fewer, f"fewer stage.kind tests than allowed (lower the entries): {fewer}"


def test_the_counter_counts_what_it_says():
    tree = ast.parse("a = stage.kind == 'Q'\nb = GROUPS.get(s.kind)\nc = G[g[n].kind]\n"
                     "d = token.kind == 'x'\ne = x.stage.kind in K\nf = print(stage.kind)")
    assert kind_tests(tree) == 4


def test_the_stages_are_told_by_their_declarations():
    """``op.of_weight``, ``op.of_stage``, ``op.per_position_of``, ``op.is_loss`` (what the
    notes, tables, trace and slides ask) mark exactly the stages the backward pass adds
    as weights' gradients (a tied table's two parts included), stages' gradients (dL/dL
    too), per-position losses and the loss; the forward declarations the notes, figures
    and checks ask mark exactly the stages of the kinds they replace."""
    from importlib import resources

    from symformer import derive, parse_example
    from symformer.blocks.backward import with_gradients
    from symformer.blocks.requested_stages import add_per_position_loss

    text = (resources.files("symformer.examples") / "gpt2_style.toml").read_text()
    example = parse_example(text + '\n[loss]\nkind = "cross_entropy"\n'
                            'targets = ["cat", "sat", "on"]\n', "tied.toml")
    g = with_gradients(derive(example))
    add_per_position_loss(g, "loss", force=True)
    for declared, kinds in (("of_weight", ("weight_gradient",)), ("of_stage", ("gradient",)),
                            ("per_position_of", ("position_losses",)), ("is_loss", ("loss",)),
                            ("encodes_positions", ("positional_encoding",)),
                            ("residual", ("residual",)), ("picks_token", ("next_token",)),
                            ("norm_statistic", ("mean", "variance", "std")),
                            ("shows_mask", ("scores", "weights")),
                            ("sublayer_of", ("attention_output", "ffn_output"))):
        marked = {s.name for s in g if getattr(s.op, declared)}
        assert marked == {s.name for s in g if s.kind in kinds}, declared
    assert {"grad.embedding_table", "grad.embedding_table.head", "grad.layer1.W_1",
            "grad.layer1.norm1.gamma"} <= {s.name for s in g if s.op.of_weight}
    assert {"grad.loss", "grad.layer1.ffn.hidden"} <= {s.name for s in g if s.op.of_stage}
    # a projection's declared role: what the notes' matrix form and the figures ask
    for role, kind in (("queries", "Q"), ("keys", "K"), ("values", "V"),
                       ("heads", "attention_output"), ("ffn_output", "ffn_output")):
        marked = {s.name for s in g if s.op.matrix_form == "affine" and s.op.role == role}
        assert marked == {s.name for s in g if s.kind == kind}, role


def test_a_training_runs_weights_and_optimizer_states_are_told_by_their_declarations():
    """``op.is_weight`` and ``op.optimizer_state`` (what the notation's words for an
    entry and a claim's step ask) mark exactly a training run's weights and Adam's
    moments; ``op.weight_rows`` adds the weights' gradients."""
    import sympy
    from test_backward import ONE_TOKEN

    from symformer import derive, parse_example
    from symformer.blocks.train import train

    g = train(derive(parse_example(ONE_TOKEN)), sympy.Rational(1, 10), 1, "adam").graph
    for declared, kinds in (("is_weight", ("parameter",)),
                            ("optimizer_state", ("optimizer_state",)),
                            ("weight_rows", ("parameter", "optimizer_state",
                                             "weight_gradient"))):
        marked = {s.name for s in g if getattr(s.op, declared)}
        assert marked and marked == {s.name for s in g if s.kind in kinds}, declared
