"""The identities lecture notes state, proved on the example's stage-local formulas.

Each fact gets a status: ``proved`` (symbolically, on the local formulas: short
expressions over the names of the stage before, so this stays fast), ``certified``
(by ball arithmetic, with the enclosure), ``false`` (with a counterexample) or
``vacuous`` (nothing to prove, e.g. no token occurs twice).

With a decoder, three more: cross-attention and ``probabilities`` rows sum to 1
(named as such by the softmax facts), the decoder's masked self-attention weights
above the diagonal are exactly 0, and, stronger, the decoder never looks ahead
(:func:`no_look_ahead`: changing a future target token changes nothing before it).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from flint import arb

from symformer.engine import Derivation, derive
from symformer.engine.ops import Normalize, ScaleMask, Softmax
from symformer.example import Example

PROVED, CERTIFIED, FALSE, VACUOUS = "proved", "certified", "false", "vacuous"


@dataclass
class Fact:
    """One identity and its status; ``detail`` says how (or the counterexample)."""

    name: str
    statement: str
    status: str
    detail: str

    @property
    def holds(self) -> bool:
        """True unless the fact was shown false."""
        return self.status != FALSE


def prove_all(example: Example, max_work: int | None = None) -> list[Fact]:
    """Every identity on ``example`` (unmasked and causally masked derivations)."""
    plain = derive(example, causal=False, max_work=max_work)
    masked = derive(example, causal=True, max_work=max_work)
    facts = softmax_rows(plain) + softmax_rows(masked) + [masked_zero(masked),
                                                          last_token_unchanged(plain, masked)]
    if any(s.side == "decoder" for s in plain):
        facts += [masked_zero(plain, side="decoder"), no_look_ahead(plain)]
    facts += layer_norm_facts(plain)
    facts += [pe_bounded(plain), repeated_tokens_differ(plain)]
    return facts


def _softmax_role(g: Derivation, name: str) -> str:
    """What a softmax stage's rows are, for the report."""
    if name == "probabilities" or g[name].kind == "probabilities":
        return " (each target position's next-token distribution over the vocabulary)"
    if ".cross." in name:
        return " (cross-attention: each target token's weights over the source tokens)"
    if ".self." in name:
        return " (masked self-attention over the target tokens so far)"
    return ""


def softmax_rows(g: Derivation) -> list[Fact]:
    """Every softmax row sums to exactly 1 (the local row sum simplifies to 1)."""
    facts = []
    label = " (causal)" if g.causal else ""
    for stage in g:
        # The causal mask concerns the encoder: a decoder's local formulas are the same
        # in both derivations, so its softmax rows are proved once, unmasked.
        if not isinstance(stage.op, Softmax) or g.causal and stage.side == "decoder":
            continue
        local = stage.local
        role = _softmax_role(g, stage.name)
        bad = [i for i in range(local.rows) if sympy.together(sum(local.row(i))) != 1]
        if bad:
            facts.append(Fact(f"{stage.name}.row_sums{label}", f"every row of {stage.name}"
                              f"{role} sums to 1{label}", FALSE,
                              f"row {bad[0]} does not simplify to 1"))
        else:
            facts.append(Fact(f"{stage.name}.row_sums{label}",
                              f"every row of {stage.name}{label}{role} sums to exactly 1",
                              PROVED, "each local row sum exp(s_j)/sum_k exp(s_k) "
                                      "simplifies to 1"))
    return facts


def masked_zero(g: Derivation, side: str = "encoder") -> Fact:
    """Every causally masked weight (key after query) of ``side``'s attention is exactly 0.

    The masked entries are those of the scores' mask (cross-attention has none).
    Their local formulas are -inf; put into the softmax's local formula,
    exp(-inf) = 0 makes the weight the constant 0.  With a finite mask such as
    -1e9 the weight stays exp(...) > 0 and the fact is false.
    """
    name = "masked_weights_zero" if side == "encoder" else "decoder.masked_weights_zero"
    statement = ("masked weights (key after query) are exactly 0" if side == "encoder" else
                 "the decoder's masked self-attention weights above the diagonal (a later "
                 "target token) are exactly 0 in every head")
    stages = [s for s in g if isinstance(s.op, Softmax) and s.side == side
              and isinstance(g[s.inputs[0]].op, ScaleMask) and g[s.inputs[0]].op.masked]
    count = 0
    for s in stages:
        scores = s.inputs[0]
        infinite = {sym: -sympy.oo for sym, e in zip(g.symbols(scores), g.local(scores))
                    if e == -sympy.oo}
        for i, j in sorted(g[scores].op.masked):
            value = s.local[i, j].xreplace(infinite)
            if value != 0:
                return Fact(name, statement, FALSE, f"{s.name}[{i},{j}] = {value}")
            count += 1
    return Fact(name, statement, PROVED if stages else VACUOUS,
                f"{count} masked weights in {len(stages)} stage(s): their score is -inf and "
                f"exp(-inf) = 0 makes the local formula the constant 0" if stages else
                "no masked attention")


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
        if stage.side != "decoder" or stage.kind == "next_token":
            continue  # next_token is the last position: it may read every token
        n, m = stage.shape
        local, symbols = stage.local, g.symbols(stage.name)
        pairs = stage.kind in ("raw_scores", "scores") and ".self." in stage.name
        table = []
        for i in range(n):
            row = []
            for j in range(m):
                e = local[i, j].xreplace(known) if known else local[i, j]
                if e == 0 or e == -sympy.oo:
                    known[symbols[i, j]] = e
                reads: set[int] = {i} if stage.kind == "embeddings" else set()
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
                           if stage.kind == "weights" else "")
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
    one_block = max(s.layer for s in encoder) == 1
    end = "output" if one_block else [s.name for s in encoder if s.layer == 1][-1]
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


def layer_norm_facts(g: Derivation) -> list[Fact]:
    """Each LayerNorm row has mean 0 and variance sigma^2/(sigma^2+eps) -- not 1."""
    facts = []
    for stage in g:
        if not isinstance(stage.op, Normalize):
            continue
        op = stage.op
        x_name, mu_name, var_name = stage.inputs
        local = stage.local
        mu_subs = dict(zip(g.symbols(mu_name), g.local(mu_name)))
        var_subs = dict(zip(g.symbols(var_name), g.local(var_name)))
        d = local.cols
        if any(gm == 0 for gm in op.gamma):
            continue
        z = sympy.Matrix([[(local[i, j] - op.beta[j]) / op.gamma[j] for j in range(d)]
                          for i in range(local.rows)])
        # mean 0: the numerator over the common denominator is sum_j (x_j - mu) = 0
        means_zero = all(
            sympy.expand(sympy.together(sum(z.row(i))).as_numer_denom()[0].xreplace(mu_subs))
            == 0 for i in range(z.rows))
        var_sym = g.symbols(var_name)
        ok_var = True
        for i in range(z.rows):
            v = var_sym[i, 0]
            sq = sum(e ** 2 for e in z.row(i)) / d
            if op.unbiased:  # y = (x - mu)/(s + eps): biased variance (d-1)/d s^2/(s+eps)^2
                target = sympy.Rational(d - 1, d) * v / (sympy.sqrt(v) + op.eps) ** 2
            else:
                target = v / (v + op.eps)
            # v is the variance's own formula over x and mu: substitute it, keep mu a name
            difference = sympy.together((sq - target).xreplace(var_subs))
            if sympy.expand(difference.as_numer_denom()[0]) != 0:
                ok_var = False
        name = stage.name
        facts.append(Fact(f"{name}.mean", f"every row of {name} (after removing gamma, beta) "
                          f"has mean exactly 0", PROVED if means_zero else FALSE,
                          "sum_j (x_j - mu) = 0 with mu = sum_j x_j / d" if means_zero
                          else "the local row mean does not simplify to 0"))
        formula = "(d-1)/d s^2/(s+eps)^2" if op.unbiased else "sigma^2/(sigma^2+eps)"
        facts.append(Fact(f"{name}.variance", f"every row of {name} has variance exactly "
                          f"{formula}", PROVED if ok_var else FALSE,
                          "the local formulas simplify to it" if ok_var else "they do not"))
        facts.append(unit_variance(g, stage.name, var_name, op))
    return facts


def unit_variance(g: Derivation, name: str, var_name: str, op: Normalize) -> Fact:
    """The lecture-note claim "variance 1": false whenever eps > 0 (shown on a row)."""
    statement = f"every row of {name} has variance exactly 1"
    if op.eps == 0 and not op.unbiased:
        return Fact(f"{name}.unit_variance", statement, PROVED, "eps = 0")
    var = g.evaluate(128)[var_name][0][0]
    eps = arb(int(op.eps.p)) / int(op.eps.q)
    gap = eps / (var + eps) if not op.unbiased else None
    detail = (f"false for eps > 0: row 0 has variance 1 - eps/(sigma^2+eps) with "
              f"eps/(sigma^2+eps) in {gap.str(5, radius=True)}" if gap is not None else
              "false for eps > 0 (and the unbiased convention scales it by (d-1)/d)")
    return Fact(f"{name}.unit_variance", statement, FALSE, detail)


def pe_bounded(g: Derivation) -> Fact:
    """Every positional encoding lies in [-1, 1]: each entry is a sine or a cosine."""
    pe = g["positional_encoding"].local
    for (i, j), e in zip(((i, j) for i in range(pe.rows) for j in range(pe.cols)), pe):
        if not (isinstance(e, (sympy.sin, sympy.cos)) and e.args[0].is_real
                or e.is_Rational and abs(e) <= 1):
            return Fact("pe_bounded", "positional encodings lie in [-1, 1]", FALSE,
                        f"positional_encoding[{i},{j}] = {e}")
    return Fact("pe_bounded", "positional encodings lie in [-1, 1]", PROVED,
                "every entry is sin or cos of a real angle (or 0, 1)")


def repeated_tokens_differ(g: Derivation) -> Fact:
    """Two occurrences of the same token differ after positional encoding."""
    tokens = g.example.tokens
    pairs = [(i, j) for i in range(len(tokens)) for j in range(i + 1, len(tokens))
             if tokens[i] == tokens[j]]
    statement = "two occurrences of the same token differ after positional encoding"
    if not pairs:
        return Fact("repeated_tokens_differ", statement, VACUOUS, "no token occurs twice")
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
