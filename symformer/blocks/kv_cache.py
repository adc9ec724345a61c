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
is the full pass's last row, entry by entry.  No value is compared: formulas are.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from symformer.engine.graph import Derivation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops import AppendRow, Identity, Pool

#: The stages of a head's new-row chain, in order, after ``raw_scores``.
_CHAIN = ("raw_scores", "scores", "weights", "output")
#: The names this module gives the stages it adds (a step's head's cache and new row).
CACHE_STAGES = (".K_cache", ".V_cache", ".q_new", *(f".{c}_new" for c in _CHAIN))
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


class _Same:
    """Entries proved equal: each symbol's canonical representative (union by proof)."""

    def __init__(self, g: Derivation) -> None:
        self.g = g
        self.canon: dict[sympy.Symbol, sympy.Expr] = {}

    def _sub(self, expr: sympy.Expr) -> sympy.Expr:
        return expr.xreplace({s: self.resolve(s) for s in expr.free_symbols})

    def resolve(self, symbol: sympy.Symbol) -> sympy.Expr:
        """The canonical entry (or constant: 0, -inf) a symbol is proved equal to."""
        if symbol not in self.canon:
            self.canon[symbol] = symbol  # no cycle while resolving
            name, i, j = self.g.owner(symbol)
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


def prove_cache(g: Derivation, steps: int, heads: list[str]) -> CacheProof:
    """Prove the cache stages equal to the uncached run's, exactly (see the docstring)."""
    same = _Same(g)
    proof = CacheProof(heads=list(heads))
    names = [s.name.removeprefix("step1.") for s in g if s.name.startswith("step1.")
             and not s.name.endswith(CACHE_STAGES)]
    for t in range(1, steps + 1):
        if t > 1:  # rows shared with the step before: the same formulas
            for name in names:
                a, b = g.stages.get(f"step{t - 1}.{name}"), g.stages.get(f"step{t}.{name}")
                if a is None or b is None or a.side == "decoding":
                    continue
                for i in range(min(a.shape[0], b.shape[0])):
                    for j in range(a.shape[1]):
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
