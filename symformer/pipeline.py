"""The spine every command runs on: a request, then :func:`prepare`.

A command reads *parse arguments → prepare → build its document → render → write*.
:func:`prepare` is the part they share, and a notebook calls it the same way::

    >>> from symformer import Request, load_example, prepare
    >>> p = prepare(load_example(), Request(command="derive", causal=True))
    >>> p.note
    ' (causal mask)'

It applies the conventions (``--causal``, ``--mask``, ``--layer-norm``, ``--norm``),
checks the slice (``--positions``, ``--heads``, ``--dims``) against the example, cuts
the sentence to the tokens the output reads where that is exact (a causal mask of
-inf), refuses a run over the work limit before any work (the command's estimate,
:mod:`symformer.blocks.cost`, with the same message as the command line), derives the
example, runs the backward pass when asked, selects the stages and their slice, and
says in one header note what the command line changed.  What a command then builds
from it (tables, a trace, a document) is in :mod:`symformer.documents`,
:mod:`symformer.trace`, :mod:`symformer.latex`, ...
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from symformer.blocks.cost import estimate
from symformer.blocks.slices import Shown, Slice, check_slice, spans, truncated, view
from symformer.blocks.work import check_size
from symformer.conventions import Convention, derive_variant, replaced, with_conventions
from symformer.engine import Derivation
from symformer.errors import InputError
from symformer.example import Example
from symformer.rendering import DEFAULT_DECIMALS as DEFAULT_DECIMALS  # its readers' name
from symformer.rendering import Rendering
from symformer.words import plural

#: The commands whose header says "(causal mask)" when the mask is on (the others say
#: it in their own words, or print no header).
_SAYS_CAUSAL_MASK = frozenset({"derive", "backward", "train"})
#: How much of the sentence a request derives (:attr:`Request.reads`).
Reads = Literal["all", "slice", "first", "token"]


@dataclass(frozen=True)
class Request:
    """What a command asks of an example, before anything is built or rendered.

    ``command`` names the work estimate (:func:`symformer.blocks.cost.estimate`) and
    the refusal's message (``symformer derive`` on this example needs about ...);
    ``work`` holds the other options that estimate takes (``steps``, ``figures``,
    ``reader_rounding``, ...).  ``causal``: True forces the causal mask on, None keeps
    the example's.  ``reads`` says how much of the sentence is derived:

    * ``"all"``: every token;
    * ``"slice"`` (``derive``): the tokens the slice's positions read, where that is
      exact (:func:`~symformer.blocks.slices.truncated`; every token when the backward
      pass is run: the loss reads every position);
    * ``"first"`` (``export``): the slice's positions must be the first K, and only
      they are derived: refused when that is not exact;
    * ``"token"`` (``trace``): the tokens up to position ``token``, when fewer (under a
      causal mask of -inf the later ones do not reach it).

    ``stages``: names or glob patterns of the stages shown (None: all);
    ``side_stages``: a name in ``stages`` may be a side stage's address, added on
    demand, and ``every_side_stage`` adds them all (``derive --all``); ``backward``:
    run the backward pass (the example needs a ``[loss]``).  ``rendering``: how the
    output is printed (:class:`Rendering`; ``request.decimals`` is its decimals).
    ``derive=False``: the command derives in its own way (``prove``, ``generate``,
    ``crosscheck``): nothing is derived here.
    """

    command: str = "derive"
    conventions: Convention = Convention()
    causal: bool | None = None
    slice: Slice = Slice()
    reads: Reads = "all"
    token: int | None = None
    stages: tuple[str, ...] | None = None
    side_stages: bool = False
    every_side_stage: bool = False
    backward: bool = False
    rendering: Rendering = Rendering()
    reader_rounding: bool = False
    max_work: int | None = None
    work: Mapping[str, object] = field(default_factory=dict, hash=False)
    derive: bool = True

    @property
    def decimals(self) -> int:
        """The decimals every value is printed with (``rendering.decimals``)."""
        return self.rendering.decimals


@dataclass
class Prepared:
    """What :func:`prepare` returns: everything a command builds its output from."""

    #: The example as given (before the conventions).
    given: Example
    #: The example as derived: the conventions applied, and the sentence cut (when cut).
    example: Example
    request: Request
    #: The derivation (None when the request says ``derive=False``).
    derivation: Derivation | None
    #: The selected stages, each with the rows and columns of the slice shown.
    shown: list[Shown]
    #: The header note: what the command line changed (`` (causal mask)``, the
    #: conventions replaced, the slice, the tokens derived, reader rounding); empty
    #: when nothing.
    note: str

    @property
    def cut(self) -> bool:
        """Whether fewer tokens than the sentence's were derived."""
        return len(self.example.tokens) < len(self.given.tokens)


def applied(example: Example, request: Request) -> Example:
    """``example`` with the request's conventions and ``causal`` applied."""
    example = with_conventions(example, request.conventions)
    return replace(example, causal=True) if request.causal else example


def check_work(example: Example, command: str, max_work: int | None,
               **options: object) -> None:
    """Refuse, before any work, ``symformer COMMAND`` on ``example`` when its estimate
    (:func:`symformer.blocks.cost.estimate` with ``options``) exceeds the work limit
    (``max_work``, else SYMFORMER_MAX_WORK, else the default; 0: no limit)."""
    check_size(example, max_work, estimate(command, example, **options), command)


def conventions_note(example: Example, conventions: Convention) -> str:
    """`` (--layer-norm biased: biased LayerNorm in place of the example's RMSNorm)``
    for a header: what ``conventions`` replaced in ``example`` (empty: nothing)."""
    notes = replaced(example, conventions)
    return f" ({'; '.join(notes)})" if notes else ""


def slice_note(chosen: Slice, derived: int, tokens: int) -> str:
    """`` (slice: positions 0:4, heads 1, dims 0:8; tokens 0 to 3 of 16 derived)``."""
    cut = f"; tokens 0 to {derived - 1} of {tokens} derived" if derived < tokens else ""
    return f" (slice: {chosen.describe()}{cut})"


#: The commands that follow tokens through a Transformer: an optimiser lesson (an
#: ``[objective]``, no tokens) has nothing for them to draw, state, trace or ask, and
#: notes or slides about its one "token" would be worded for a model it is not.
NEEDS_TOKENS = ("figures", "prove", "exercise", "export", "slides", "trace")


def require_tokens(example: Example, command: str) -> None:
    """Refuse ``command`` on an optimiser lesson in one line that says what it is and
    what to run instead (it would fail later on a token it does not have)."""
    if command in NEEDS_TOKENS and example.objective is not None:
        where = f"{example.source}: " if example.source else ""
        raise InputError(f"{where}an optimiser lesson ([objective]) has no tokens for "
                         f"`symformer {command}`: `symformer train FILE --stage 'step*'` "
                         f"prints its steps, and derive, backward and check work on it")


def prepare(example: Example, request: Request = Request()) -> Prepared:
    """Derive ``example`` as ``request`` asks, after checking its work (see the module).

    Raises :class:`~symformer.errors.InputError` with the command line's message for a
    slice outside the example, a convention it does not accept, a cut that is not
    exact (``reads="first"``), a run over the work limit, an unknown stage, a backward
    pass without a ``[loss]``.
    """
    require_tokens(example, request.command)
    check_slice(example, request.slice)
    cut = _cut(example, request)
    target = example if cut is None else cut
    options = dict(request.work)
    if request.reads == "slice" and cut is not None:
        options["shown"] = request.slice.share(cut)  # only the shown entries are printed
    if not request.derive:  # the command derives in its own way: the conventions first
        target = applied(example, request)
    check_work(target, request.command, request.max_work, **options)
    if not request.derive:
        return Prepared(example, target, request, None, [],
                        conventions_note(example, request.conventions))
    if cut is not None:
        from symformer.blocks.encoder import derive

        g = derive(cut, max_work=request.max_work)
    else:
        g = derive_variant(example, request.conventions, request.causal, request.max_work)
    shown = view(_stages(g, request), request.slice, len(example.tokens))
    return Prepared(example, g.example, request, g, shown, _note(example, g, request))


def _cut(example: Example, request: Request) -> Example | None:
    """The example to derive when ``request.reads`` cuts the sentence (its conventions
    applied), else None: the example is derived whole under its conventions."""
    if request.reads == "all" or (request.reads == "slice" and not request.slice):
        return None
    effective = applied(example, request)
    if request.reads == "slice":
        return effective if request.backward else truncated(
            effective, request.slice, causal=effective.causal)
    if request.reads == "token":
        if request.token is None:
            raise InputError("reads='token' needs the token's position (token=N)")
        cut = truncated(effective, Slice(positions=(request.token,)),
                        causal=effective.causal)
        return cut if len(cut.tokens) < len(example.tokens) else None
    positions = request.slice.positions  # "first": the first K positions, or refused
    if positions is None:
        return None
    k = len(positions)
    if positions != tuple(range(k)):
        raise InputError(f"{request.command} --positions takes the first positions, 0:K "
                         f"(found {spans(positions)[:40]}): its tables show every "
                         f"derived row")
    cut = truncated(effective, request.slice, causal=effective.causal)
    if len(cut.tokens) != k and k < len(example.tokens):
        raise InputError(f"{request.command} --positions needs a causal example with the "
                         f"-inf mask, no whole-matrix LayerNorm, no [decoder] and no "
                         f"[loss]: otherwise every position reads the later tokens and "
                         f"all are derived")
    return cut


def _stages(g: Derivation, request: Request) -> list:
    """The stages ``request`` selects, after the backward pass and the side stages it
    asks for (:mod:`symformer.blocks.side_stages`)."""
    if request.backward:
        from symformer.blocks.backward import backward

        backward(g)
    if request.side_stages or request.every_side_stage:
        from symformer.blocks.side_stages import add_requested, add_side_stage, side_addresses

        add_requested(g, request.stages or ())
        if request.every_side_stage:
            for name in list(side_addresses(g)):
                add_side_stage(g, name)
    return g.select(list(request.stages) if request.stages is not None else None)


def _note(given: Example, g: Derivation, request: Request) -> str:
    """The header note (see :attr:`Prepared.note`)."""
    note = " (causal mask)" if g.causal and request.command in _SAYS_CAUSAL_MASK else ""
    note += conventions_note(given, request.conventions)
    derived, tokens = len(g.example.tokens), len(given.tokens)
    if request.reads == "slice":
        if request.slice:
            note += slice_note(request.slice, derived, tokens)
    elif request.reads == "token" and derived < tokens:
        note += (f" (causal: tokens 0 to {derived - 1} of {tokens} derived, the later "
                 f"ones do not reach this token)")
    if request.reads != "slice" and request.slice.heads is not None:
        note += f" (heads {', '.join(map(str, request.slice.heads))})"
    if request.reader_rounding:
        note += (f" (reader rounding: each stage from the previous ones at "
                 f"{plural(request.decimals, 'decimal')})")
    return note
