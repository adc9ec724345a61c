"""The operations by name, and the lists built from their own declarations.

Defining a subclass of :class:`~symformer.ops.base.Operation` registers it in
:data:`OPERATIONS`.  An FFN activation is one that declares its ``activation_key`` (the
example file's value): everything that lists or dispatches on activations (the example
file, the blocks, the exercise sheet, the matrix form, the figures, the PyTorch module)
reads them here, so the tenth activation is added as the first was: one module under
``symformer/ops/``, or one class defined at run time.

This module imports nothing of the package (a bottom floor): the example schema reads
the names without importing the operations, which ``import symformer`` has registered
before any example is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from symformer.ops.base import Operation

#: Every concrete operation class, by its ``name`` (filled as classes are defined).
OPERATIONS: dict[str, type[Operation]] = {}


def activations() -> dict[str, type[Operation]]:
    """Every activation by its example-file name, in listing order (the declared rank,
    then definition order)."""
    found = [cls for cls in OPERATIONS.values() if cls.__dict__.get("activation_key")]
    order = {cls: k for k, cls in enumerate(found)}
    found.sort(key=lambda cls: (cls.activation_rank, order[cls]))
    return {cls.activation_key: cls for cls in found}


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


class ActivationNames(Sequence[str]):
    """The activation names as a live tuple: one registered later is in it too."""

    def __getitem__(self, index):  # type: ignore[override]
        return tuple(activations())[index]

    def __len__(self) -> int:
        return len(activations())

    def __repr__(self) -> str:
        return repr(tuple(activations()))


#: Every activation's example-file name (``relu``, ``gelu``, ``gelu_tanh``, ``silu``, ...).
ACTIVATION_NAMES = ActivationNames()
