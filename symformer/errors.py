"""The exceptions symformer raises.

Two families matter to callers:

* :class:`InputError` -- the user's input is wrong (a TOML file, a claim, a stage
  name).  The command line prints its message and exits with status 2.
* :class:`NotSupportedError` -- the input is valid, but symformer cannot do this
  (yet), or a limit was hit (a closed form too large to print).
"""

from __future__ import annotations


class SymformerError(Exception):
    """Base class of every error symformer raises on purpose."""


class InputError(SymformerError, ValueError):
    """Invalid user input: the message names what is wrong and where."""


class NotSupportedError(SymformerError):
    """Valid input that symformer cannot handle, or a size limit that was hit."""


class ClosedFormTooLarge(NotSupportedError):
    """The closed form of an entry exceeds the requested size limit."""


class UndecidedError(SymformerError):
    """Certified arithmetic could not decide a sign or a rounding within limits."""


class UndecidedWarning(UserWarning):
    """An entry's rounding was not decided: it is printed in the undecided form."""
