"""Other conventions of the same example: mask, normalisation, norm placement.

The engine knows ``mask_value``, the normalisations of
:data:`~symformer.example.schema.LAYER_NORMS` (biased, unbiased and whole-matrix
LayerNorm, RMSNorm) and the placements of
:data:`~symformer.example.schema.NORM_PLACEMENTS` (post, pre, none) as fields of the
example; :func:`with_conventions` rewrites them with ``dataclasses.replace`` (every
block, the decoder's blocks and the final normalisation alike), so every command
offers the same choices.  :func:`replaced` says what a choice changed, for the
header of a command's output.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from symformer.blocks import derive
from symformer.engine import Derivation
from symformer.errors import InputError
from symformer.example import Example
from symformer.example.literals import exact_number
from symformer.example.schema import LAYER_NORMS, NORM_PLACEMENTS
from symformer.lazy import sympy
from symformer.registry import norm_title, normalisation

#: Norm placements (``--norm``).
NORMS = NORM_PLACEMENTS
#: How a header names each placement.
_PLACEMENT_NAMES = {"post": "post-norm", "pre": "pre-norm", "none": "no normalisation"}


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
            parts.append(norm_title(self.layer_norm) if self.layer_norm in LAYER_NORMS
                         else self.layer_norm)
        if self.norm is not None:
            parts.append(_PLACEMENT_NAMES.get(self.norm, self.norm))
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
        layer_changes["layer_norm"] = convention.layer_norm
        if example.final_norm is not None:
            changes["final_norm"] = replace(example.final_norm,
                                            layer_norm=convention.layer_norm)
    if convention.norm is not None:
        if convention.norm not in NORMS:
            raise InputError(f"norm must be one of {', '.join(NORMS)}, "
                             f"found {convention.norm!r}")
        layer_changes["norm"] = convention.norm
    if layer_changes:
        changes["layers"] = tuple(replace(layer, **layer_changes) for layer in example.layers)
        if example.decoder is not None:  # the decoder's blocks follow the same conventions
            changes["decoder"] = replace(example.decoder, layers=tuple(
                replace(layer, **layer_changes) for layer in example.decoder.layers))
    return replace(example, **changes) if changes else example


def _blocks(example: Example) -> list:
    return [*example.layers, *(example.decoder.layers if example.decoder else ())]


def replaced(example: Example, convention: Convention) -> list[str]:
    """What ``convention`` changes in ``example``, one phrase each (none when it keeps
    the example's own), e.g. ``--layer-norm biased: biased LayerNorm in place of the
    example's RMSNorm``."""
    notes = []
    blocks = _blocks(example)
    if convention.layer_norm is not None:
        norms = [b.layer_norm for b in blocks] + (
            [example.final_norm.layer_norm] if example.final_norm is not None else [])
        old = sorted({n for n in norms if n != convention.layer_norm})
        if old:
            lost = ""
            title = norm_title(convention.layer_norm)
            if not normalisation(convention.layer_norm).norm_shifts and any(
                    any(b.beta_1) or any(b.beta_2) for b in blocks):
                lost = f" (its beta is not used: {title} has none)"
            notes.append(f"--layer-norm {convention.layer_norm}: {title} in place of the "
                         f"example's {' and '.join(norm_title(n) for n in old)}{lost}")
    if convention.norm is not None:
        old = sorted({b.norm for b in blocks if b.norm != convention.norm})
        if old:
            notes.append(f"--norm {convention.norm}: {_PLACEMENT_NAMES[convention.norm]} "
                         f"in place of the example's "
                         f"{' and '.join(_PLACEMENT_NAMES[n] for n in old)}")
    if convention.mask is not None:
        value = mask_value(convention.mask)
        if value != example.mask_value:
            own = "-inf" if example.mask_value is None else str(example.mask_value)
            notes.append(f"--mask {convention.mask} in place of the example's {own}")
    return notes


def derive_variant(example: Example, convention: Convention, causal: bool | None = None,
                   max_work: int | None = None) -> Derivation:
    """Derive the example under ``convention``."""
    return derive(with_conventions(example, convention), causal=causal, max_work=max_work)
