"""The identities lecture notes state, proved on the example's stage-local formulas.

Each fact gets a status: ``proved`` (symbolically, on the local formulas: short
expressions over the names of the stage before, so this stays fast), ``certified``
(by ball arithmetic, with the enclosure), ``false`` (with a counterexample) or
``vacuous`` (nothing to prove, e.g. no token occurs twice).

The facts about one step come from its operation (``stage.op.facts(stage)``:
softmax rows sum to 1 and masked weights are 0, LayerNorm rows have mean 0 and
variance sigma^2/(sigma^2+eps), positional encodings lie in [-1, 1]); this module
iterates over the stages, gathers them, and states the facts about a whole
composition: the last token is unchanged by the causal mask, repeated tokens
differ after positional encoding and, with a decoder, the decoder never looks
ahead (:func:`no_look_ahead`: changing a future target token changes nothing
before it).

With a ``[loss]``, :func:`backward_facts` adds the backward pass's: each gradient
stage asks the operations whose rules it sums (``Operation.backward_facts``: the
softmax-gradient rows sum to 0, LayerNorm's input-gradient rows sum to 0, masked
scores and clipped ReLU units get 0, a bias gradient is the column sums), and
:func:`causal_gradient` proves that under the causal mask a position's own loss has
gradient 0 at every later position.
"""

from __future__ import annotations

from collections.abc import Callable

from symformer.blocks import derive
from symformer.blocks.backward import backward
from symformer.engine import Derivation, Stage
from symformer.example import Example
from symformer.lazy import sympy
from symformer.ops import PositionSquaredError
from symformer.ops.facts import CERTIFIED, FALSE, PROVED, VACUOUS, Fact, Tally

__all__ = ["CERTIFIED", "FALSE", "PROVED", "VACUOUS", "Fact", "backward_facts",
           "causal_gradient",
           "last_token_unchanged",
           "masked_zero", "no_look_ahead", "prove_all", "repeated_tokens_differ",
           "stage_facts"]


def prove_all(example: Example, max_work: int | None = None,
              progress: Callable[[str], None] | None = None) -> list[Fact]:
    """Every identity on ``example`` (unmasked and causally masked derivations).

    Reported in this order: softmax rows (unmasked, then masked), the causal mask's
    facts, the decoder's, the other facts of single stages in stage order, the facts
    shared by several stages, and the repeated tokens; with a ``[loss]``, then the
    backward rules' facts (the gradient stages', unmasked then masked: see each
    operation's ``backward_facts``) and :func:`causal_gradient`.  ``progress(what)`` is
    called before each stage's facts are proved.
    """
    plain = derive(example, causal=False, max_work=max_work)
    masked = derive(example, causal=True, max_work=max_work)
    for g in (plain, masked):  # an undefined value (eps = 0, a constant row) is an error
        g.evaluate(128)
    ours = stage_facts(plain, progress=progress)
    # The causal mask concerns the encoder: a decoder's local formulas are the same
    # in both derivations, so its facts are proved once, unmasked.
    theirs = stage_facts(masked, side="encoder", progress=progress)
    facts = _row_sums(ours) + _row_sums(theirs) + [
        masked_zero(theirs, "encoder"), last_token_unchanged(plain, masked)]
    if any(s.side == "decoder" for s in plain):
        facts += [masked_zero(ours, "decoder"), no_look_ahead(plain)]
    rest = [(s, f) for s, f in ours
            if not isinstance(f, Tally) and not f.name.startswith(f"{s.name}.row_sums")]
    facts += [f for s, f in rest if f.name.startswith(f"{s.name}.")]
    facts += _merged([f for s, f in rest if not f.name.startswith(f"{s.name}.")])
    facts.append(repeated_tokens_differ(plain))
    if example.loss is not None:
        facts += backward_facts(example, max_work, progress)
    return facts


def backward_facts(example: Example, max_work: int | None = None,
                   progress: Callable[[str], None] | None = None) -> list[Fact]:
    """The backward pass's facts: the gradient stages' (each stated by the operation whose
    rule it is), unmasked then causally masked, and :func:`causal_gradient`."""
    facts = []
    for causal in (False, True):
        g = backward(derive(example, causal=causal, max_work=max_work))
        g.evaluate(128)
        facts += [f for s, f in stage_facts(g, progress=progress,
                                                  which=lambda s: s.op.is_gradient)]
    if progress:
        progress("the causal mask's gradient")
    return [*facts, causal_gradient(example, max_work)]


def stage_facts(g: Derivation, side: str | None = None,
                progress: Callable[[str], None] | None = None,
                which: Callable[[Stage], bool] | None = None) -> list[tuple[Stage, Fact]]:
    """Every stage's facts, as its operation states them (``side``: only that side's;
    ``which``: only the stages it is true of); ``progress(what)`` before each stage's."""
    out = []
    for s in g:
        if (side is None or s.side == side) and (which is None or which(s)):
            if progress:
                progress(s.name + (" (causal)" if g.causal else ""))
            out += [(s, f) for f in s.op.facts(s)]
    return out


def _row_sums(pairs: list[tuple[Stage, Fact]]) -> list[Fact]:
    return [f for s, f in pairs if f.name.startswith(f"{s.name}.row_sums")]


def _merged(facts: list[Fact]) -> list[Fact]:
    """Facts of the same name (one per stage) as one: the first false one, or the first."""
    merged: dict[str, Fact] = {}
    for f in facts:
        if f.name not in merged or not f.holds and merged[f.name].holds:
            merged[f.name] = f
    return list(merged.values())


def masked_zero(pairs: list[tuple[Stage, Fact]], side: str = "encoder") -> Fact:
    """Every causally masked weight (key after query) of ``side``'s attention is exactly 0.

    Adds up the softmax operations' tallies of their masked weights (cross-attention
    has none); the first false one is the counterexample.
    """
    name = "masked_weights_zero" if side == "encoder" else "decoder.masked_weights_zero"
    statement = ("masked weights (key after query) are exactly 0" if side == "encoder" else
                 "the decoder's masked self-attention weights above the diagonal (a later "
                 "target token) are exactly 0 in every head")
    tallies = [f for s, f in pairs if s.side == side and isinstance(f, Tally)
               and f.name == f"{s.name}.masked_zero"]
    for f in tallies:
        if not f.holds:
            return Fact(name, statement, FALSE, f.detail)
    if not tallies:
        return Fact(name, statement, VACUOUS, "no masked attention")
    count = sum(f.count for f in tallies)
    return Fact(name, statement, PROVED,
                f"{count} masked weights in {len(tallies)} stage(s): their score is -inf and "
                f"exp(-inf) = 0 makes the local formula the constant 0")


def no_look_ahead(g: Derivation) -> Fact:
    """Changing a future target token changes nothing before it.

    Proved by induction over the decoder's stages, entry by entry: the target
    tokens an entry depends on are the union of those of the entries its local
    formula reads, after every entry proved constant 0 or -inf is substituted (a
    masked score is -inf, so its weight is the constant 0 and the rows of V after
    the query drop out of the head output).  ``decoder.embeddings`` row i is target
    token i; encoder stages depend on no target token (cross-attention keys and
    values read only the encoder output).  The claim: entry [i, j] of every decoder
    stage depends only on target tokens 0..i -- except self-attention raw and scaled
    scores, pairs whose entry [i, j] may read token j as well (the mask discards
    those above the diagonal).
    """
    statement = ("the decoder never looks ahead: row i of every decoder stage (up to "
                 "logits and probabilities) depends only on target tokens 0..i")
    known: dict[sympy.Symbol, sympy.Expr] = {}
    depends: dict[str, list[list[frozenset[int]]]] = {}
    count = 0
    for stage in g:
        if stage.side != "decoder" or stage.op.picks_token:
            continue  # next_token is the last position: it may read every token
        n, m = stage.shape
        local, symbols = stage.local, g.symbols(stage.name)
        pairs = stage.op.columns == "keys" and not stage.op.weighs_keys \
            and ".self." in stage.name  # a self-attention's scores: j is a key position
        table = []
        for i in range(n):
            row = []
            for j in range(m):
                e = local[i, j].xreplace(known) if known else local[i, j]
                if e == 0 or e == -sympy.oo:
                    known[symbols[i, j]] = e
                reads: set[int] = {i} if stage.op.lookup == "tokens" else set()
                worst = None
                for sym in e.free_symbols:
                    owner, r, c = g.owner(sym)
                    tokens = depends[owner][r][c] if owner in depends else frozenset()
                    reads |= tokens
                    if tokens and (worst is None or max(tokens) > worst[0]):
                        worst = (max(tokens), f"{owner}[{r},{c}]")
                allowed = max(i, j) if pairs else i
                if reads and max(reads) > allowed:
                    why = (" (a finite mask such as -1e9 leaves that weight exp(...) > 0)"
                           if stage.op.weighs_keys else "")
                    return Fact("decoder.no_look_ahead", statement, FALSE,
                                f"{stage.name}[{i},{j}] depends on target token "
                                f"{max(reads)} > {allowed}: it reads {worst[1]}{why}")
                row.append(frozenset(reads))
                count += 1
            table.append(row)
        depends[stage.name] = table
    return Fact("decoder.no_look_ahead", statement, PROVED,
                f"by induction over {len(depends)} decoder stages ({count} entries): masked "
                f"scores are -inf, so masked weights are the constant 0 and the head output's "
                f"row i reads only rows 0..i of V; cross-attention keys and values read only "
                f"the encoder output")


def last_token_unchanged(plain: Derivation, masked: Derivation) -> Fact:
    """The last token's row of the first block is the same with and without the causal mask.

    A theorem for the first block only: its last query attends to every key either
    way.  From the second block on, the earlier tokens' rows (hence the keys and
    values the last token reads) differ, so nothing is claimed there.  Proof by
    induction over the stages: a row is unchanged when its local formulas are
    identical in both derivations and read only unchanged rows.
    """
    same: dict[str, set[int]] = {}
    for stage in plain:
        a, b = stage.local, masked.local(stage.name)
        rows = set()
        for i in range(a.rows):
            if a.row(i) == b.row(i) and all(
                    plain.owner(s)[1] in same[plain.owner(s)[0]]
                    for s in a.row(i).free_symbols):
                rows.add(i)
        same[stage.name] = rows
    last = plain["output"].shape[0] - 1
    encoder = [s for s in plain if s.side == "encoder" and s.layer]
    # no [[layer]] (given inputs; given Q, K, V): the stages up to output are one block
    one_block = max((s.layer for s in encoder), default=1) == 1
    # the first block's output: what the second block reads (side stages, σ and the
    # output's μ_y, σ_y², come after it but end nothing)
    end = "output" if one_block else next(name for s in encoder if s.layer == 2
                                          for name in s.inputs if plain[name].layer == 1)
    statement = ("the last token's output is unchanged by the causal mask" if one_block else
                 f"the last token's row of the first block ({end}) is unchanged by the "
                 f"causal mask (not a theorem past it: the earlier tokens' keys and values "
                 f"differ from the second block on)")
    if last in same[end]:
        return Fact("last_token_unchanged", statement, PROVED,
                    f"row {last} of every stage up to {end} has identical local formulas "
                    f"over unchanged rows")
    first = next(s.name for s in plain if last not in same[s.name])
    hi, lo = plain.evaluate(128)[end][last], masked.evaluate(128)[end][last]
    for j, (x, y) in enumerate(zip(hi, lo)):
        if not (x - y).contains(0):
            return Fact("last_token_unchanged", statement, FALSE,
                        f"{end}[{last},{j}] is {x.str(10)} unmasked but {y.str(10)} masked "
                        f"(the rows first differ at {first})")
    return Fact("last_token_unchanged", statement, CERTIFIED,
                f"not proved past {first}; the rows agree to 128 bits")


def repeated_tokens_differ(g: Derivation) -> Fact:
    """Two occurrences of the same token differ after positional encoding."""
    tokens = g.example.tokens
    pairs = [(i, j) for i in range(len(tokens)) for j in range(i + 1, len(tokens))
             if tokens[i] == tokens[j]]
    statement = "two occurrences of the same token differ after positional encoding"
    if not pairs:
        return Fact("repeated_tokens_differ", statement, VACUOUS, "no token occurs twice")
    if "input" not in g:
        return Fact("repeated_tokens_differ", statement, VACUOUS,
                    "no input rows (the example gives Q, K and V)")
    x = g.evaluate(128)["input"]
    found = []
    for i, j in pairs:
        for c in range(len(x[i])):
            diff = x[i][c] - x[j][c]
            if not diff.contains(0):
                found.append(f"{tokens[i]!r} at {i} and {j} differ in column {c} by "
                             f"{diff.str(5, radius=True)}")
                break
        else:
            if g["input"].local.row(i) == g["input"].local.row(j) or all(
                    sympy.simplify(g["input"].closed_form(i, c) - g["input"].closed_form(j, c))
                    == 0 for c in range(len(x[i]))):
                return Fact("repeated_tokens_differ", statement, FALSE,
                            f"{tokens[i]!r} at positions {i} and {j}: the input rows are "
                            f"exactly equal")
            return Fact("repeated_tokens_differ", statement, CERTIFIED,
                        f"undecided for positions {i} and {j}")
    return Fact("repeated_tokens_differ", statement, CERTIFIED, "; ".join(found))


def causal_gradient(example: Example, max_work: int | None = None) -> Fact:
    """Under the causal mask, the loss at position i has gradient exactly 0 with respect
    to every later position: rows j > i of ``grad.input``.

    For each position i < n - 1, the causally masked derivation gets the loss of
    position i alone (:class:`~symformer.ops.loss.PositionSquaredError`, the squared
    error of the encoder output's row i; the target does not matter) and its backward
    pass.  Then, by induction over every stage, forward and backward, entry by entry:
    an entry whose local formula, with the entries already shown constant 0 or -inf
    substituted, is the number 0 or -inf is recorded as such (a masked score is -inf,
    so its weight exp(-inf)/... is 0; the other positions' rows of dL/dz are 0, and so
    on backwards).  Rows j > i of ``grad.input`` must all be recorded 0.  False with a
    finite mask (-1e9), whose weights exp(...) stay > 0.
    """
    n = len(example.tokens)
    # the rows per position the gradient reaches: the input's, or (given Q, K, V) the
    # keys' and values' (a query row is its own position's)
    reached = ("grad.K", "grad.V") if example.attention is not None else ("grad.input",)
    statement = ("under the causal mask, the loss at position i has gradient exactly 0 with "
                 f"respect to every later position (rows j > i of {' and '.join(reached)})")
    if n < 2:
        return Fact("causal_gradient", statement, VACUOUS, "one position: none is later")
    for i in range(n - 1):
        g = derive(example, causal=True, max_work=max_work)
        output = g["output"]
        g.add("loss", "loss", PositionSquaredError(sympy.zeros(*output.shape), i),
              ("output",), ("loss",), ("L",), side=output.side)
        backward(g)
        zero = _constant_entries(g)
        for name in reached:
            symbols = g.symbols(name)
            for j in range(i + 1, symbols.rows):
                for c in range(symbols.cols):
                    if zero.get(symbols[j, c]) != 0:
                        return Fact("causal_gradient", statement, FALSE,
                                    f"the loss at position {i}: {name}[{j},{c}] is not shown "
                                    f"0 (with a finite mask the later weights stay exp(...) "
                                    f"> 0)")
    return Fact("causal_gradient", statement, PROVED,
                f"for each of the positions 0..{n - 2}, its own loss's backward pass: by "
                f"induction over the stages, the masked weights are exp(-inf)/... = 0, so "
                f"the rows after the position get the gradient 0 in every stage")


def _constant_entries(g: Derivation) -> dict[sympy.Symbol, sympy.Expr]:
    """Every entry of ``g`` whose local formula, with the constant entries before it
    substituted, is the number 0 or -inf (by induction over the stages, in order)."""
    known: dict[sympy.Symbol, sympy.Expr] = {}
    for stage in g:
        local, symbols = stage.local, g.symbols(stage.name)
        for i in range(local.rows):
            for j in range(local.cols):
                e = local[i, j].xreplace(known) if known else local[i, j]
                if e == 0 or e == -sympy.oo:
                    known[symbols[i, j]] = e
    return known
