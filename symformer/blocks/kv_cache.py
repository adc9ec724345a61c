"""The KV cache: a generation run derived as prefill then decode steps, proved equal to
the run without a cache.

:func:`add_kv_cache` appends to a generation run (:func:`symformer.blocks.generate.
run_derivation`: step t's stages named ``step{t}.*``), for every causal self-attention
head ``P`` (``layer1.head1``, ``decoder.layer1.self.head1``):

* ``step1.P.K_cache``, ``step1.P.V_cache`` -- the prefill: the prompt's keys and values;
* ``step{t}.P.K_cache`` = [``step{t-1}.P.K_cache``; the new token's key row], the same
  for V (:class:`~symformer.ops.decoding_cache.AppendRow`), for t >= 2;
* ``step{t}.P.q_new`` (the one new query row), ``raw_scores_new``, ``scores_new``,
  ``weights_new``, ``output_new``: the new token's attention read from the cache.

:func:`prove_cache` proves, exactly, that cached = uncached: each row a step shares with
the step before has the same local formula over entries already proved equal (the
causal mask makes the future invisible: a masked score is -inf, its weight exactly 0),
so every cache row is the full pass's key/value row and the new row's attention output
is the full pass's last row, entry by entry.  No value is compared: a row-local
stage's rows by structure (the same operation, its input rows proved equal:
:data:`ROW_LOCAL`), attention's by formula; only the stages the cached heads read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from symformer.engine.graph import Derivation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops import AppendRow, Identity, Pool

#: The stages of a head's new-row chain, in order, after ``raw_scores``.
_CHAIN = ("raw_scores", "scores", "weights", "output")
#: The operations a head's chain may have for the cache to be derived (its masks remapped).
_CACHEABLE = ("dot_scores", "scale_mask", "softmax", "weighted_sum")


@dataclass
class CacheProof:
    """What :func:`prove_cache` proved: per step, the heads whose cache equals the full
    pass, and the rows or heads it could not prove (empty: cached = uncached)."""

    heads: list[str] = field(default_factory=list)
    proved: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        """True when every cached entry was proved equal to the uncached one."""
        return bool(self.proved) and not self.failed


def cached_heads(g: Derivation, step: int = 1) -> list[str]:
    """The causal self-attention heads of step ``step`` whose cache can be derived."""
    out = []
    prefix = f"step{step}."
    for s in g:
        if not (s.name.startswith(prefix) and s.name.endswith(".raw_scores")):
            continue
        head = s.name[len(prefix):-len(".raw_scores")]
        chain = [g.stages.get(f"{prefix}{head}.{c}") for c in _CHAIN]
        if any(c is None or c.op.name not in _CACHEABLE for c in chain):
            continue
        scores = g[f"{prefix}{head}.scores"]
        if ".cross." in head or not _causal(scores.op, scores.shape[0]):
            continue
        out.append(head)
    return out


def _causal(op, n: int) -> bool:
    """Does the score op mask every key after its query (n queries)?"""
    masked = getattr(op, "masked", frozenset())
    return all((i, j) in masked for i in range(n) for j in range(i + 1, n))


def add_kv_cache(g: Derivation, steps: int) -> list[str]:
    """Append the cache stages of every step (see the module's docstring); returns the
    heads cached."""
    heads = cached_heads(g)
    for t in range(1, steps + 1):
        for head in heads:
            _cache_step(g, t, head)
    return heads


def _cache_step(g: Derivation, t: int, head: str) -> None:
    p = f"step{t}.{head}"
    raw = g[f"{p}.raw_scores"]
    q_src, k_src = raw.inputs
    v_src = g[f"{p}.output"].inputs[1]
    last = g[q_src].shape[0] - 1
    rows = g[q_src].rows
    where = {"layer": raw.layer, "head": raw.head, "side": raw.side}
    for name, src in (("K_cache", k_src), ("V_cache", v_src)):
        notation = Notation(f"{name[0]}_{{cache}}", f"{name[0]}_cache",
                            f"{name[0]} cache (prefill)" if t == 1 else f"{name[0]} cache")
        if t == 1:
            g.add(f"{p}.{name}", "cache", Identity(notation, "the prefill: the prompt's rows"),
                  (src,), rows, g[src].cols, **where)
        else:
            g.add(f"{p}.{name}", "cache", AppendRow(notation),
                  (f"step{t - 1}.{head}.{name}", src), rows, g[src].cols, **where)
    g.add(f"{p}.q_new", "cache", Pool("row", last, Notation("q", "q", "The new query row")),
          (q_src,), rows[-1:], g[q_src].cols, **where)
    inputs = {"raw_scores": (f"{p}.q_new", f"{p}.K_cache"), "scores": (f"{p}.raw_scores_new",),
              "weights": (f"{p}.scores_new",), "output": (f"{p}.weights_new", f"{p}.V_cache")}
    for c in _CHAIN:
        full = g[f"{p}.{c}"]
        op = full.op
        if hasattr(op, "masked"):  # the last row's mask, as row 0
            op = dataclasses.replace(op, masked=frozenset((0, j) for i, j in op.masked
                                                           if i == last))
        g.add(f"{p}.{c}_new", "cache", op, inputs[c], rows[-1:], full.cols, **where)


#: Operations whose output row i is a function of their inputs' rows i alone, the same
#: function for every row (given equal operation fields): a projection x_i W + b, a sum,
#: an activation, a norm and its row statistics, a concatenation of columns, RoPE (row
#: i turned by the angles of position i), a softmax over a row of fixed width.  For
#: these, row i of two steps is proved equal by structure (:meth:`_Same.same_rows`):
#: no formula is built.  Any other operation's rows are compared by formula.
ROW_LOCAL = frozenset({
    "projection", "add", "concat", "identity", "gelu", "gelu_tanh", "relu", "silu",
    "sigmoid", "gated_product", "mean", "variance", "std_dev", "mean_square", "normalize",
    "rms_normalize", "rope", "softmax"})
#: Of these, the operations whose entries are never a copy, an exact 0 or -inf the proof
#: needs to know of (a masked score, a weight exactly 0): their symbols stand for
#: themselves, and no formula is built to find out (a projection's is the costly one).
OPAQUE = ROW_LOCAL - {"identity", "concat", "softmax"}


class _Same:
    """Entries proved equal: each symbol's canonical representative (union by proof)."""

    def __init__(self, g: Derivation) -> None:
        self.g = g
        self.canon: dict[sympy.Symbol, sympy.Expr] = {}

    def same_rows(self, a: str, b: str, rows: int) -> list[int]:
        """Rows < ``rows`` of stages ``a`` (a step) and ``b`` (the next) proved equal by
        structure: the same row-local operation (:data:`ROW_LOCAL`, equal fields), every
        input as wide in both steps and one row per token (as the output), and the
        input rows already proved equal.  Their entries are recorded as equal; the rows
        returned need no formula."""
        sa, sb = self.g[a], self.g[b]
        if not _same_operation(sa.op, sb.op) or len(sa.inputs) != len(sb.inputs):
            return []
        pairs = [(self.g[x], self.g[y]) for x, y in zip(sa.inputs, sb.inputs)]
        if sa.shape[1] != sb.shape[1] or any(
                x.shape[1] != y.shape[1] or x.shape[0] != sa.shape[0]
                or y.shape[0] != sb.shape[0] for x, y in pairs):
            return []
        done = []
        out_a, out_b = self.g.symbols(a), self.g.symbols(b)
        inputs = [(self.g.symbols(x.name), self.g.symbols(y.name)) for x, y in pairs]
        for i in range(rows):
            if all(self.resolve(x[i, j]) == self.resolve(y[i, j])
                   for x, y in inputs for j in range(x.shape[1])):
                for j in range(sa.shape[1]):
                    self.canon[out_b[i, j]] = self.resolve(out_a[i, j])
                done.append(i)
        return done

    def _sub(self, expr: sympy.Expr) -> sympy.Expr:
        return expr.xreplace({s: self.resolve(s) for s in expr.free_symbols})

    def resolve(self, symbol: sympy.Symbol) -> sympy.Expr:
        """The canonical entry (or constant: 0, -inf) a symbol is proved equal to."""
        if symbol not in self.canon:
            self.canon[symbol] = symbol  # no cycle while resolving
            name, i, j = self.g.owner(symbol)
            if self.g[name].op.name in OPAQUE:
                return symbol
            local = self._sub(self.g.local(name)[i, j])
            if local.is_Symbol or local == 0 or local == -sympy.oo:
                self.canon[symbol] = local  # a copy, a masked score, a weight exactly 0
        return self.canon[symbol]

    def same(self, a: tuple[str, int, int], b: tuple[str, int, int]) -> bool:
        """Prove entry a = entry b (and remember it); False: no proof."""
        sa = self.g.symbols(a[0])[a[1], a[2]]
        sb = self.g.symbols(b[0])[b[1], b[2]]
        ra, rb = self.resolve(sa), self.resolve(sb)
        if ra == rb:
            return True
        fa = self._sub(self.g.local(a[0])[a[1], a[2]])
        fb = self._sub(self.g.local(b[0])[b[1], b[2]])
        if fa == fb:
            self.canon[sb] = ra
            return True
        return False


def _same_operation(a: object, b: object) -> bool:
    """Are ``a`` and ``b`` the same row-local operation (:data:`ROW_LOCAL`) with equal
    fields (weights compared entry by entry unless the same object)?"""
    if type(a) is not type(b) or a.name not in ROW_LOCAL or a.whole_matrix:
        return False
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x is y:
            continue
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
                    and x.shape == y.shape and np.array_equal(x, y)):
                return False
            continue
        try:
            if not bool(x == y):
                return False
        except (TypeError, ValueError):
            return False
    return True


def _feeding(g: Derivation, heads: list[str]) -> list[str]:
    """The stages (step 1's names, without ``step1.``) the cached heads' keys, values,
    queries and outputs are computed from, in the run's order: only their shared rows
    need proving (what comes after the last head -- the logits, a softmax over the
    vocabulary, the decision -- is no part of the cache)."""
    wanted = [f"step1.{head}.{c}" for head in heads for c in _CHAIN]
    seen: set[str] = set()
    while wanted:
        name = wanted.pop()
        if name not in seen and name in g.stages:
            seen.add(name)
            wanted.extend(g[name].inputs)
    return [s.name.removeprefix("step1.") for s in g if s.name in seen]


def prove_cache(g: Derivation, steps: int, heads: list[str]) -> CacheProof:
    """Prove the cache stages equal to the uncached run's, exactly (see the docstring)."""
    same = _Same(g)
    proof = CacheProof(heads=list(heads))
    names = _feeding(g, heads)
    for t in range(1, steps + 1):
        if t > 1:  # rows shared with the step before: the same formulas
            for name in names:
                a, b = g.stages.get(f"step{t - 1}.{name}"), g.stages.get(f"step{t}.{name}")
                if a is None or b is None or a.side == "decoding":
                    continue
                shared = min(a.shape[0], b.shape[0])
                by_structure = set(same.same_rows(a.name, b.name, shared))
                for i in range(shared):
                    for j in range(a.shape[1] if i not in by_structure else 0):
                        same.same((a.name, i, j), (b.name, i, j))
        for head in heads:
            p = f"step{t}.{head}"
            raw = g[f"{p}.raw_scores"]
            last = g[raw.inputs[0]].shape[0] - 1
            checks = [(src, i, f"{p}.{cache}", i)
                      for cache, src in (("K_cache", raw.inputs[1]),
                                         ("V_cache", g[f"{p}.output"].inputs[1]))
                      for i in range(last + 1)]
            checks += [(f"{p}.{c}", last, f"{p}.{c}_new", 0) for c in _CHAIN]
            bad = [f"{b}[{bi}]" for a, ai, b, bi in checks
                   if not all(same.same((a, ai, j), (b, bi, j)) for j in range(g[a].shape[1]))]
            if bad:
                proof.failed.append(f"step {t}, {head}: not proved: " + ", ".join(bad))
            else:
                proof.proved.append(f"step {t}, {head}: K_cache = K, V_cache = V (every row), "
                                    f"output_new = output[{last}] (exact, by formula)")
    return proof
