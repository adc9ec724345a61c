"""The deck as Beamer source (``slides.tex``), for pdflatex.

16:9 frames at 11 pt (set large on a projector: a frame is 16 cm wide), no
navigation symbols.  Every frame is top-aligned so nothing moves between overlays:
the equation stays at the top, the worked lines (overlay 2) and the table (overlay 3)
take turns in the space below.  Each piece is shrunk (never enlarged) to fit its share
of the frame, by width and by height (:data:`FIT`, graphicx only), so no frame is
overfull however wide a table or long a worked line.
"""

from __future__ import annotations

from symformer.engine import Derivation
from symformer.figures import tikz
from symformer.latex.escape import latex_text
from symformer.latex.render import step_lines, table_body
from symformer.slides.deck import FigureFrame, Frame, Options, StageFrame, row_position

#: ``\symfit{H}{content}``: the content shrunk to the line's width and at most H tall.
FIT = r"""\newcommand{\symfit}[2]{\resizebox*{!}{\ifdim\totalheight>#1 #1\else\totalheight\fi}{%
\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{#2}}}"""

PREAMBLE = r"""\documentclass[11pt,aspectratio=169,xcolor=table]{beamer}
\usepackage[T1]{fontenc}
\usepackage[utf8]{inputenc}
\usepackage{lmodern}
\usepackage{amsmath,amssymb}
\usepackage{booktabs}
\usepackage{graphicx}
%(figures)s\setbeamertemplate{navigation symbols}{}
\setbeamertemplate{footline}[frame number]
\setbeamerfont{frametitle}{size=\large}
\setbeamerfont{framesubtitle}{size=\footnotesize}
%(fit)s
"""

#: The share of the text height each piece may take.
EQUATION_HEIGHT = r"0.24\textheight"
BODY_HEIGHT = r"0.56\textheight"
#: Worked steps per column before a second column starts, and the most columns.
ROWS_PER_COLUMN = 8
MAX_COLUMNS = 3
#: A worked step whose LaTeX is longer than this many characters takes two lines.
LONG_LINE = 180


def document(g: Derivation, options: Options, frames: list[Frame]) -> str:
    """The whole ``slides.tex``."""
    body = [title_frame(g, options)]
    for frame in frames:
        body.append(stage_frame(frame) if isinstance(frame, StageFrame)
                    else figure_frame(frame))
    preamble = PREAMBLE % {"figures": tikz.PREAMBLE, "fit": FIT}
    title = latex_text(g.example.title) + (" (causal mask)" if g.causal else "")
    return (preamble + f"\\title{{{title}}}\n\\subtitle{{step by step}}\n"
            "\\author{derived exactly by symformer}\n\\date{}\n\\begin{document}\n\n"
            + "\n\n".join(body) + "\n\n\\end{document}\n")


def title_frame(g: Derivation, options: Options) -> str:
    """The title page: the sentence, the token followed, how numbers are rounded."""
    tokens = g.example.tokens
    sentence = " ".join(latex_text(t) for t in tokens)
    return ("\\begin{frame}\n\\titlepage\n\\centering\\small\n"
            f"The sentence: {sentence}\\\\\n"
            f"Following the token \u201c{latex_text(tokens[options.token])}\u201d "
            f"(position {options.token}; positions count from 0).\\\\\n"
            f"Every number is rounded correctly to {options.decimals} decimals "
            "(certified).\n\\end{frame}")


def stage_frame(frame: StageFrame) -> str:
    """Three overlays: the equation; its numbers for the token; the table."""
    stage = frame.stage
    word = latex_text(stage.rows[frame.token])
    where = f"{latex_text(stage.name)} \u2014 token \u201c{word}\u201d, position " \
            f"{row_position(frame)}"
    lines = [f"\\begin{{frame}}[t]{{{latex_text(frame.title)}}}{{{where}}}",
             f"\\centering\\large\n\\symfit{{{EQUATION_HEIGHT}}}{{{aligned(frame.equation.lines)}}}"
             "\\par\\medskip"]
    worked = ("\\footnotesize no numbers to substitute" if frame.worked is None
              else f"\\symfit{{{BODY_HEIGHT}}}{{{worked_aligned(frame)}}}")
    lines.append(f"\\only<2>{{{worked}}}")
    legend = latex_text(" ".join(frame.table.legend))
    lines.append(f"\\only<3>{{\\symfit{{{BODY_HEIGHT}}}{{{table_body(frame.table)}}}"
                 f"\\par\\smallskip{{\\scriptsize {legend}}}}}")
    lines.append("\\end{frame}")
    return "\n".join(lines)


def aligned(rows: tuple[tuple[str, str], ...]) -> str:
    """Equation lines ``(lhs, rhs)`` as inline display math aligned at ``=``."""
    body = " \\\\ ".join(f"{lhs} &= {rhs}" for lhs, rhs in rows)
    return f"$\\displaystyle\\begin{{aligned}} {body} \\end{{aligned}}$"


def worked_aligned(frame: StageFrame) -> str:
    """The worked lines, one per step (formula, numbers, result; a long step on two), in up to
    :data:`MAX_COLUMNS` columns of at most :data:`ROWS_PER_COLUMN` steps."""
    rows = []
    for step in frame.worked.steps:
        first, rest = step_lines(step)
        if len(first) + len(rest) > LONG_LINE:  # the formula, then the numbers below it
            rows += [f"{step.lhs} &{first}", f"&{rest}"]
        else:
            rows.append(f"{step.lhs} &{first} {rest}".rstrip())
    columns = min(MAX_COLUMNS, -(-len(rows) // ROWS_PER_COLUMN))
    height = -(-len(rows) // columns)
    blocks = [" \\\\ ".join(rows[k:k + height]) for k in range(0, len(rows), height)]
    return "\\qquad ".join(f"$\\displaystyle\\begin{{aligned}} {b} \\end{{aligned}}$"
                            for b in blocks)


def figure_frame(frame: FigureFrame) -> str:
    """A figure on its own frame, the first part of its caption as the frame title.

    The figure is drawn for the frame (:data:`~symformer.figures.tikz.SLIDES`: its room
    and a 9 pt font), so it is set at its natural size, never shrunk."""
    figure = frame.figure
    title = latex_text(figure.title.split(":")[0].rstrip("."))
    return (f"\\begin{{frame}}[t]{{{title}}}\n\\centering\n"
            f"{tikz.draw(figure, tikz.SLIDES)}\\end{{frame}}")
