"""The operations by name, and the lists built from their own declarations.

Defining a subclass of :class:`~symformer.ops.base.Operation` registers it in
:data:`OPERATIONS`.  An FFN activation is one that declares its ``activation_key`` (the
example file's value): everything that lists or dispatches on activations (the example
file, the blocks, the exercise sheet, the matrix form, the figures, the PyTorch module)
reads them here, so the tenth activation is added as the first was: one module under
``symformer/ops/``, or one class defined at run time.  A normalisation is one that
declares its ``norm_keys`` (the example file's ``layer_norm`` values): the blocks, the
example file, the diagram, the matrix form, the notes and the PyTorch module read it
here too (:func:`normalisation`), and one that does not declare what a consumer asks
is refused by that consumer in one line (:func:`refuse`), never given a default.

This module imports nothing of the package (a bottom floor): the example schema reads
the names without importing the operations, which ``import symformer`` has registered
before any example is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from symformer.errors import InputError, NotSupportedError

if TYPE_CHECKING:
    from symformer.ops.base import Operation

#: Every concrete operation class, by its ``name`` (filled as classes are defined).
OPERATIONS: dict[str, type[Operation]] = {}


def _declaring(declaration: str, rank: Callable[[type[Operation]], int]
               ) -> list[type[Operation]]:
    """The operations declaring ``declaration`` themselves (not by inheritance), in
    listing order: their declared ``rank``, then definition order."""
    found = [cls for cls in OPERATIONS.values() if cls.__dict__.get(declaration)]
    return sorted(found, key=rank)  # a stable sort: definition order among equals


def activations() -> dict[str, type[Operation]]:
    """Every activation by its example-file name, in listing order (the declared rank,
    then definition order)."""
    return {cls.activation_key: cls for cls in _declaring(
        "activation_key", lambda cls: cls.activation_rank)}


def activation(name: str) -> type[Operation]:
    """The activation class the example file's ``activation = name`` chooses."""
    return activations()[name]


def per_position_form(loss: str) -> type[Operation] | None:
    """The operation giving the per-position terms of the loss named ``loss`` (None:
    the loss has none, an upstream gradient)."""
    return next((cls for cls in OPERATIONS.values() if cls.per_position_of == loss), None)


def torch_activations() -> dict[str, str]:
    """The activations with a PyTorch form, by name: their torch expression in ``x``."""
    return {name: cls.torch_function for name, cls in activations().items()
            if cls.torch_function is not None}


def normalisations() -> dict[str, type[Operation]]:
    """Every normalisation by its example-file name (``layer_norm = "rms"``), in listing
    order (the declared ``norm_rank``, then definition order): the class whose
    ``add_norm`` adds its stages."""
    return {key: cls for cls in _declaring("norm_keys", lambda cls: cls.norm_rank)
            for key in cls.norm_keys}


def normalisation(key: str) -> type[Operation]:
    """The normalisation the example file's ``layer_norm = key`` chooses (an unknown
    name: an :class:`InputError` naming the known ones)."""
    known = normalisations()
    if key not in known:
        raise InputError(f"layer_norm must be one of {', '.join(known)}, found {key!r}")
    return known[key]


def score_functions() -> dict[str, type[Operation]]:
    """Every attention score function by its example-file name (``attention_scores =
    "dot"``), in listing order (the declared ``score_rank``, then definition order)."""
    return {cls.score_key: cls for cls in _declaring("score_key", lambda c: c.score_rank)}


def torch_scores() -> dict[str, str]:
    """The score functions with a PyTorch form, by example-file name: their torch
    expression in ``q`` and ``k``."""
    return {key: cls.torch_scores for key, cls in score_functions().items()
            if cls.torch_scores is not None}


def score_function(key: str) -> type[Operation]:
    """The score function the example file's ``attention_scores = key`` chooses (an
    unknown name: an :class:`InputError` naming the known ones)."""
    known = score_functions()
    if key not in known:
        raise InputError(f"attention_scores must be one of {', '.join(known)}, found "
                         f"{key!r}")
    return known[key]


def refuse(kind: str, key: str, consumer: str, missing: str) -> NotSupportedError:
    """The one-line refusal of a consumer that does not know a kind of step: ``the
    PyTorch module: the normalisation 'dyt' declares no torch_norms (its PyTorch form)``.
    Never a default in its place."""
    return NotSupportedError(f"{consumer}: the {kind} {key!r} declares no {missing}")


#: What the frameworks' names of a kind of step are declared in, by kind and framework.
_FRAMEWORK_NAMES = {("activation", "hf"): "hf_names", ("activation", "torch"): "torch_names",
                    ("normalisation", "hf"): "hf_modules",
                    ("normalisation", "torch"): "torch_modules",
                    ("positional encoding", "hf"): "hf_positions"}


def framework_names(kind: str, framework: str) -> dict[str, str]:
    """A framework's names of the ``kind`` of step (``"activation"``, ``"normalisation"``)
    -> the example-file key each means, as the operations declare them (``hf_names`` and
    ``torch_names`` of an activation, ``hf_modules`` and ``torch_modules`` of a
    normalisation), in listing
    order: the one table the Hugging Face and PyTorch imports read."""
    declaration = _FRAMEWORK_NAMES[kind, framework]
    if kind == "activation":
        return {name: key for key, cls in activations().items()
                for name in getattr(cls, declaration)}
    classes = dict.fromkeys(normalisations().values()) if kind == "normalisation" \
        else _declaring(declaration, lambda cls: 0)  # each class once, in order
    return {name: key for cls in classes for name, key in getattr(cls, declaration).items()}


def framework_key(kind: str, framework: str, name: Any, consumer: str,
                  shown: str | None = None) -> str:
    """The example-file key of the framework's ``name`` for a ``kind`` of step; a name no
    operation declares: ``consumer`` refuses it in one line naming both (``shown``: how
    the name is written there), never another kind in its place."""
    known = framework_names(kind, framework)
    if not isinstance(name, str) or name not in known:
        raise NotSupportedError(f"{consumer}: the {kind} {shown or name} is not supported (no "
                                f"operation declares it in {_FRAMEWORK_NAMES[kind, framework]}"
                                f"; supported: {', '.join(known)})")
    return known[name]


def norm_module(key: str, consumer: str) -> type[Operation]:
    """The normalisation of the example-file ``key`` as a framework module computes it:
    its class, whose ``module_weights`` name the module's parameters; none declared:
    ``consumer`` refuses."""
    cls = normalisation(key)
    if not cls.module_weights:
        raise refuse("normalisation", key, consumer, "module_weights (its module's weights)")
    return cls


def norm_title(key: str) -> str:
    """The normalisation's name in a sentence (``biased LayerNorm``, ``RMSNorm``): its
    declared ``norm_titles``, else its ``norm_label``; neither: refused."""
    cls = normalisation(key)
    title = cls.norm_titles.get(key, cls.norm_label)
    if title is None:
        raise refuse("normalisation", key, "the notes", "norm_label (its name)")
    return title


def norm_label(key: str, consumer: str) -> str:
    """The normalisation's short name (``LayerNorm``, ``RMSNorm``): the block diagram's
    box (``Add & LayerNorm``) and the matrix form's function; undeclared: ``consumer``
    refuses."""
    label = normalisation(key).norm_label
    if label is None:
        raise refuse("normalisation", key, consumer, "norm_label (its name in a box)")
    return label


def torch_norms() -> dict[str, str]:
    """The normalisations with a PyTorch form, by example-file name: their code (see
    ``Operation.torch_norms``)."""
    return {key: cls.torch_norms[key] for key, cls in normalisations().items()
            if key in cls.torch_norms}


class LiveNames(Sequence[str]):
    """The keys of a registry listing (``activations()``, ``normalisations()``) as a
    live tuple: one registered later is in it too."""

    def __init__(self, listing: Callable[[], dict[str, type[Operation]]]) -> None:
        self.listing = listing

    def __getitem__(self, index):  # type: ignore[override]
        return tuple(self.listing())[index]

    def __len__(self) -> int:
        return len(self.listing())

    def __repr__(self) -> str:
        return repr(tuple(self.listing()))


#: Every activation's example-file name (``relu``, ``gelu``, ``gelu_tanh``, ``silu``, ...).
ACTIVATION_NAMES = LiveNames(activations)
#: Every normalisation's example-file name (``biased``, ``unbiased``, ``whole_matrix``,
#: ``rms``, ...).
NORM_NAMES = LiveNames(normalisations)
#: Every attention score function's example-file name (``dot``, ...).
SCORE_NAMES = LiveNames(score_functions)
