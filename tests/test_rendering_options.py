"""One set of rendering options with one default: the Python API prints what the CLI prints.

``--decimals`` travels from the command line in the :class:`~symformer.pipeline.Request`
(its ``rendering``) to each renderer's options, which extend
:class:`~symformer.rendering.Rendering`; every renderer called from Python with its
defaults reads the same default (3 decimals, token 1), so ``figures(g, Options())`` draws
the files ``symformer figures`` writes, and ``--decimals 4`` the files of
``Options(decimals=4)``.  (``export`` and ``slides``: tests/test_pipeline.py.)
"""

from __future__ import annotations

import inspect

import pytest

from symformer import Request, load_example, prepare
from symformer.cli import main
from symformer.rendering import DEFAULT_DECIMALS, Rendering


def _spy(monkeypatch, module, name: str) -> list:
    """The options each call of the renderer ``module.name(g, options, ...)`` receives."""
    received, real = [], getattr(module, name)

    def spy(g, options, *args, **kwargs):
        received.append(options)
        return real(g, options, *args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return received


def test_every_renderer_defaults_to_the_one_value():
    from symformer.display import stage_html, stage_latex, stage_markdown
    from symformer.figures import Options as FigureOptions
    from symformer.fill.template import fill
    from symformer.latex import Options
    from symformer.pipeline import Rendering as PipelineRendering
    from symformer.slides import Options as SlideOptions
    from symformer.trace import trace_token

    assert PipelineRendering is Rendering and Request().rendering == Rendering()
    assert DEFAULT_DECIMALS == 3  # what `symformer derive --help` documents
    for options in (Options, SlideOptions, FigureOptions):
        assert issubclass(options, Rendering)
        assert (options().decimals, options().token) == (3, 1), options
    for function in (stage_html, stage_markdown, stage_latex, fill, trace_token):
        assert inspect.signature(function).parameters["decimals"].default == 3, function


@pytest.mark.parametrize("given", [None, 4])
def test_figures_from_python_are_what_the_command_writes(tmp_path, capsys, monkeypatch,
                                                         given):
    """``--decimals`` walked from the command line to the renderer (the options
    ``figure_files`` receives), and the files compared with the Python API's."""
    import symformer.figures as figures_package
    from symformer.figures import Options, figure_files

    received = _spy(monkeypatch, figures_package, "figure_files")
    argv = ["figures", "--out", str(tmp_path), "--format", "tikz", "--quiet"]
    assert main(argv + (["--decimals", str(given)] if given else [])) == 0
    capsys.readouterr()
    (options,) = received
    assert options.decimals == (given or 3) and options.token == 1
    g = prepare(load_example(), Request(command="figures")).derivation
    files = figure_files(g, Options(decimals=given) if given else Options())
    assert sorted(files) == sorted(p.name for p in tmp_path.iterdir())
    assert all((tmp_path / name).read_text() == text for name, text in files.items())


def test_export_decimals_reach_the_notes(tmp_path, capsys, monkeypatch):
    """``symformer export --decimals 5``: the notes' builder receives 5 (the request's
    rendering extended to the notes' options), as ``Options(decimals=5)`` from Python."""
    import symformer.latex as latex

    received = _spy(monkeypatch, latex, "build")
    assert main(["export", "--out", str(tmp_path), "--quiet", "--decimals", "5",
                 "--stage", "layer1.head1.Q"]) == 0
    capsys.readouterr()
    (options,) = received
    assert (options.decimals, options.token) == (5, 1)
    assert options == latex.Options(decimals=5, stages=("layer1.head1.Q",))
