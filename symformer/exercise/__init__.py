"""Exercise sheets with answer keys: variants of a template drawn for hand computation.

:func:`make_exercise` draws the variants (:mod:`~symformer.exercise.draw`, with the
certified constraints of :mod:`~symformer.exercise.margin` and the fair draws of
:mod:`~symformer.exercise.fair`, the bounded search of
:mod:`~symformer.exercise.generate`), and returns every output file: the manifest
(:mod:`~symformer.exercise.manifest`, what ``symformer grade`` reads), each variant's
example file, sheets, keys and ``key.json`` (:mod:`~symformer.exercise.sheets`, the
student's path of :mod:`~symformer.exercise.path`) and the combined key.
See docs/exercises.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from symformer.blocks import derive
from symformer.blocks.cost import EXERCISE_START
from symformer.errors import InputError
from symformer.example.loader import (
    builtin_text,
    example_from_dict,
    packaged_examples,
    read_text_file,
    read_toml,
)
from symformer.exercise.cells import Asked, check_rows, check_work, short_path, token_path
from symformer.exercise.generate import (
    MAX_VARIANTS,
    Search,
    Variant,
    asked_stages,
    draw_variants,
    sheet_work,
)
from symformer.exercise.givens import check_givens, with_decisions
from symformer.exercise.manifest import manifest_text
from symformer.exercise.settings import Settings, read_settings
from symformer.exercise.sheets import key_all_files, sheet_files

__all__ = ["MAX_VARIANTS", "Exercise", "SheetRequest", "make_exercise", "read_template"]

#: What ``--ask`` selects by default: every stage of the first head of layer 1.
DEFAULT_ASK = ("layer1.head1.*",)


@dataclass(frozen=True)
class SheetRequest:
    """What exercise sheets to make (``symformer exercise``'s settings): template (None:
    built-in), counts, stages, precision, token.  Not :class:`symformer.Request`, the
    pipeline's request to :func:`symformer.prepare`."""

    template: str | None
    variants: int
    seed: int
    ask: tuple[str, ...] = DEFAULT_ASK
    decimals: int = 2
    token: str = "1"
    margin: str | None = None  # overrides the template's [exercise] margin
    max_work: int | None = None  # the search's work limit (None: the default; 0: none)
    every_entry: bool = False  # every entry of the asked stages, not the token's path
    jobs: int = 1  # the variants' sheets and keys on this many local processes
    scheduler: str | None = None  # ... or as tasks on this Dask scheduler


@dataclass
class Exercise:
    """The files (relative path -> text) and how the search went."""

    files: dict[str, str]
    variants: list[Variant]
    asked: list[str]
    search: Search
    settings: Settings
    token: int = 1      # the token whose path the sheets ask
    title: str = ""     # the template's title (or file name)


def read_template(template: str | None) -> tuple[dict, str, str]:
    """The template's parsed TOML (its ``[exercise]`` table still in it),
    its source name for messages, and its name for the variants' header."""
    if template is None:
        return read_toml(builtin_text(), "<built-in>"), "<built-in>", "the built-in example"
    path = Path(template)
    packaged = packaged_examples()
    if not path.exists() and str(path) in packaged:
        path = packaged[str(path)]
    text = read_text_file(path, "a template .toml file",
                          f" (packaged examples: {', '.join(sorted(packaged))})")
    return read_toml(text, str(path)), str(path), path.name


def variant_sheets(text: str, vid: str, asked: list[str], decimals: int, token: int,
                   max_work: int | None) -> tuple[dict[str, str], list]:
    """One task: a variant's sheets and key, from its example file's text (the variant
    derived again where the task runs, exactly as the search derived it)."""
    from symformer.example.loader import parse_example

    g = derive(parse_example(text, f"{vid}/example.toml"), max_work=max_work)
    return sheet_files(g, asked, decimals, token, f"{vid}:")


def make_exercise(request: SheetRequest, progress: Callable[[int, int], None] | None = None,
                  searching: Callable[[str], None] | None = None) -> Exercise:
    """Draw the variants and build every file of the exercise folder (``progress``
    after each variant, ``searching`` now and then during a long search)."""
    from symformer.exercise.settings import margin_value
    from symformer.latex import resolve_token
    from symformer.pipeline import require_tokens

    data, source, name = read_template(request.template)
    settings = read_settings(data.pop("exercise", None), source)
    if request.margin is not None:
        settings = replace(settings, margin=margin_value(request.margin, "--margin"))
    template = example_from_dict(data, source)
    require_tokens(template, "exercise")
    g = derive(template, max_work=request.max_work)
    token = resolve_token(g, request.token)
    names = with_decisions(g, asked_stages(g, list(request.ask), source))
    check_rows(g, names, token, source)
    check_givens(g, names, source)
    # one token's path (the default sheet within MAX_ENTRIES entries), or every entry
    # of the asked stages (docs/exercises.md)
    asked = names if request.every_entry else short_path(g, names, token) \
        if request.ask == DEFAULT_ASK else token_path(g, names, token)
    check_work(g, asked, source)
    header = (f"# symformer exercise: variant {{id}} of {name}, seed {request.seed}.\n"
              f"# Drawn: embeddings {settings.embeddings.describe()}; weights "
              f"{settings.weights.describe()}; biases {settings.biases.describe()}.\n\n")
    variants, search = draw_variants(data, source, request.variants, request.seed, asked,
                                     request.decimals, settings, progress, header, g,
                                     request.max_work, sheet_work(g.example), searching,
                                     token, EXERCISE_START)
    files: dict[str, str] = {}
    keys: list[tuple[str, list]] = []
    if request.jobs == 1 and request.scheduler is None:
        made_all = [sheet_files(v.derivation, asked, request.decimals, token, f"{v.id}:")
                    for v in variants]
    else:  # each variant's sheets a task (symformer.parallel), in the variants' order
        from symformer.parallel import run_tasks

        outcomes = run_tasks(variant_sheets, [(v.text, v.id, asked, request.decimals, token,
                                               request.max_work) for v in variants],
                             [v.id for v in variants], jobs=request.jobs,
                             scheduler=request.scheduler)
        failed = next((o for o in outcomes if not o.ok), None)
        if failed is not None:
            raise InputError(f"variant {failed.name}: {failed.error}")
        made_all = [o.value for o in outcomes]
    for v, (made, key) in zip(variants, made_all):
        files[f"{v.id}/example.toml"] = v.text
        files.update({f"{v.id}/{k}": text for k, text in made.items()})
        keys.append((v.id, key))
    files.update(key_all_files(keys, str(data.get("title", name))))
    files["manifest.toml"] = manifest_text(
        template=request.template or "<built-in>", seed=request.seed,
        decimals=request.decimals, margin=settings.margin, token=token, asked=asked,
        path=isinstance(asked, Asked),
        ids=[v.id for v in variants])
    return Exercise(files, variants, asked, search, settings, token,
                    str(data.get("title", name)))
