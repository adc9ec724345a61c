"""Other conventions of the same example: mask, LayerNorm variant, norm placement.

The engine knows ``mask_value``, biased/unbiased LayerNorm and pre/post norm as
fields of the example; :func:`with_conventions` rewrites them with
``dataclasses.replace``.  The "whole-matrix" LayerNorm (mean and variance over
every entry, what ``x.mean()``/``x.var()`` without an axis compute) is not an
engine option: :func:`derive_variant` swaps the ops of the ``.mean``/``.variance``
stages of a biased derivation for the whole-matrix ones defined here.  Every
convention applies to an example's decoder blocks too (its self-attention is
always causal, so the mask convention always matters there).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from symformer.blocks import derive
from symformer.engine import Derivation
from symformer.errors import InputError
from symformer.example import Example
from symformer.example.numbers import exact_number
from symformer.lazy import sympy
from symformer.ops import RowMean, RowVariance, WholeMean, WholeVariance

#: LayerNorm conventions the verification knows (the engine's two plus whole-matrix).
LAYER_NORMS = ("biased", "unbiased", "whole_matrix")
NORMS = ("post", "pre")


@dataclass(frozen=True)
class Convention:
    """A choice of conventions; ``None`` keeps the example's own setting."""

    mask: str | None = None          # "-inf" or a negative number such as "-1e9"
    layer_norm: str | None = None    # one of LAYER_NORMS
    norm: str | None = None          # "post" or "pre"

    def describe(self) -> str:
        """Human-readable summary, e.g. ``mask -1e9, unbiased LayerNorm``."""
        parts = []
        if self.mask is not None:
            parts.append(f"mask {self.mask}")
        if self.layer_norm is not None:
            parts.append(f"{self.layer_norm.replace('_', '-')} LayerNorm")
        if self.norm is not None:
            parts.append(f"{self.norm}-norm")
        return ", ".join(parts) or "the example's own conventions"


#: Alternatives tried when a claimed matrix is wrong (see symformer.verify.check).
ALTERNATIVES = (
    Convention(mask="-1e9"),
    Convention(layer_norm="unbiased"),
    Convention(layer_norm="whole_matrix"),
    Convention(norm="pre"),
)


def mask_value(text: str) -> sympy.Rational | None:
    """``"-inf"`` as None, a negative number as the exact rational added to masked scores."""
    if text.strip() in {"-inf", "-infinity"}:
        return None
    value = exact_number(text, "--mask")
    if value >= 0:
        raise InputError(f"--mask must be \"-inf\" or a negative number such as -1e9, "
                         f"found {text!r}")
    return value


def with_conventions(example: Example, convention: Convention) -> Example:
    """The example with the engine-supported conventions replaced."""
    changes: dict = {}
    if convention.mask is not None:
        changes["mask_value"] = mask_value(convention.mask)
    layer_changes: dict = {}
    if convention.layer_norm is not None:
        if convention.layer_norm not in LAYER_NORMS:
            raise InputError(f"layer norm must be one of {', '.join(LAYER_NORMS)}, "
                             f"found {convention.layer_norm!r}")
        layer_changes["layer_norm"] = ("biased" if convention.layer_norm == "whole_matrix"
                                       else convention.layer_norm)
    if convention.norm is not None:
        if convention.norm not in NORMS:
            raise InputError(f"norm must be post or pre, found {convention.norm!r}")
        layer_changes["norm"] = convention.norm
    if layer_changes:
        changes["layers"] = tuple(replace(layer, **layer_changes) for layer in example.layers)
        if example.decoder is not None:  # the decoder's blocks follow the same conventions
            changes["decoder"] = replace(example.decoder, layers=tuple(
                replace(layer, **layer_changes) for layer in example.decoder.layers))
    return replace(example, **changes) if changes else example


def derive_variant(example: Example, convention: Convention, causal: bool | None = None,
                   max_work: int | None = None) -> Derivation:
    """Derive the example under ``convention`` (whole-matrix LayerNorm included)."""
    g = derive(with_conventions(example, convention), causal=causal, max_work=max_work)
    if convention.layer_norm == "whole_matrix":
        for stage in g:
            if isinstance(stage.op, RowMean):
                stage.op = WholeMean()
            elif isinstance(stage.op, RowVariance):
                stage.op = WholeVariance()
    return g
