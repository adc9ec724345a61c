"""The deck as Beamer source (``slides.tex``), for pdflatex.

16:9 frames (160 mm x 90 mm) at 12 pt in one family, Latin Modern, for text and
maths alike (``\\usefonttheme{serif}``: the Greek letters, ``PE`` and the digits
match the words around them); sub- and superscripts at 10.5 pt, so no text on a
frame is below 9 pt even measured as pdftotext measures it (a 10.5 pt word is 9.3 pt
tall there).  The metropolis theme where TeX Live has it (Debian's
texlive-latex-extra), else a plain frame styled alike.  Nothing is shrunk: a worked
line is a paragraph that TeX breaks at its sums (products stay whole), its left-hand
side right-aligned in a column so every ``=`` lines up, its continuation indented;
the deck (:mod:`symformer.slides.deck`) splits what is too tall over frames.  Every
frame is top-aligned and every reveal is ``\\uncover<n->``: the space is kept, so
nothing moves and nothing is taken away.
"""

from __future__ import annotations

from symformer.engine import Derivation
from symformer.figures import tikz
from symformer.latex.escape import latex_text
from symformer.latex.render import table_body
from symformer.pipeline import DEFAULT_DECIMALS
from symformer.slides import fit
from symformer.slides.deck import (
    HEADING,
    DiagramFrame,
    FigureFrame,
    Frame,
    HeadFlowFrame,
    Item,
    SectionFrame,
    SlideOptions,
    StageFrame,
    WeightsFrame,
    heading_beside,
    legend,
    reader_text,
    row_heading,
    row_position,
    row_widths,
    rows,
    significant_digits,
    table_width,
)
from symformer.words import plural, with_causal_mask

#: The font size figures are set in (``\\small`` inside a figure): figures are drawn for
#: the frame and set at their natural size, never scaled, so this is their text's size.
FIGURE_FONT = r"\fontsize{10.5}{12.6}\selectfont"

#: The font size of tables (cells, labels, legend): 10.5 pt, the least that measures
#: 9 pt and more in ``pdftotext -bbox``; rows at 12.6 pt.
TABLE_FONT = r"\fontsize{10.5}{12.6}\selectfont"

PREAMBLE = r"""\documentclass[12pt,aspectratio=169,xcolor=table]{beamer}
\usepackage[T1]{fontenc}
\usepackage[utf8]{inputenc}
\usepackage{lmodern}
\usepackage{amsmath,amssymb}
\usepackage{booktabs}
\usepackage{graphicx}
%% Every glyph carries its character, the big delimiters and roots of the maths
%% extension font too: copied text and pdftotext read "(" and a root sign.
\input{glyphtounicode}\pdfgentounicode=1
%(extension)s%(figures)s\IfFileExists{beamerthememetropolis.sty}{%%
  \usetheme[numbering=counter,progressbar=none]{metropolis}}{%%
  \setbeamercolor{frametitle}{fg=white,bg=black!80}%%
  \setbeamercolor{title}{fg=black!85}%%
  \setbeamertemplate{frametitle}{\nointerlineskip\begin{beamercolorbox}[wd=\paperwidth,
    ht=2.3em,dp=0.9em,leftskip=1em]{frametitle}\rightskip=1em plus 1fil\relax
    \usebeamerfont{frametitle}%%
    \insertframetitle\end{beamercolorbox}}%%
  \setbeamertemplate{footline}{\usebeamerfont{page number in head/foot}\hspace*{1em}%%
    \usebeamertemplate*{frame footer}\hfill\insertframenumber\hspace*{1em}\vspace*{0.6em}}}
\usefonttheme{serif}
%% Frame titles are never hyphenated ("approx-imation"): broken between words, ragged.
\addtobeamertemplate{frametitle}{\hyphenpenalty=10000\exhyphenpenalty=10000\raggedright}{}
%% One title page for both themes (metropolis's own is a paper-high box, overfull).
\setbeamertemplate{title page}{\vspace*{1.5em}%%
  {\usebeamerfont{title}\usebeamercolor[fg]{title}\inserttitle\par}\medskip
  {\usebeamerfont{subtitle}\usebeamercolor[fg]{subtitle}\insertsubtitle\par}\medskip
  {\color{orange!80!black}\rule{\textwidth}{0.6pt}\par}\bigskip
  \insertauthor\par\medskip{\small\insertinstitute\par\smallskip\insertdate\par}}
\setbeamertemplate{navigation symbols}{}
\setbeamerfont{frametitle}{size=\large}
%% ... ragged inside the title's box too (metropolis's own, its right skip stretching:
%% a long title's first line is not spaced out, no underfull box).
\makeatletter\@ifundefined{metropolis@frametitle@padding}{}{%%
  \setbeamertemplate{frametitle}{\nointerlineskip\begin{beamercolorbox}[wd=\paperwidth,
    sep=0pt,leftskip=\metropolis@frametitle@padding,
    rightskip=\metropolis@frametitle@padding]{frametitle}%%
    \rightskip=\dimexpr\metropolis@frametitle@padding\relax plus 1fil\relax
    \metropolis@frametitlestrut@start\insertframetitle\nolinebreak
    \metropolis@frametitlestrut@end\end{beamercolorbox}}}\makeatother
\setbeamerfont{page number in head/foot}{size=\small}
\setbeamerfont{institute}{size=\small}\setbeamerfont{author}{size=\normalsize}
\setbeamerfont{date}{size=\small}
\DeclareMathSizes{12}{12}{10.5}{10.5}
%% Spaces around operators never shrink: a long line is broken, never squeezed.
\medmuskip=4mu plus 2mu\relax\thickmuskip=5mu plus 5mu\relax
\DeclareMathSizes{14.4}{14.4}{12}{10.5}
\DeclareMathSizes{10.95}{10.95}{10.5}{10.5}
\DeclareMathSizes{10.5}{10.5}{10.5}{10.5}
\newlength{\symlhs}\newlength{\symtmp}
%% \symwidest{math}: \symlhs grows to the widest left-hand side of the frame.
\newcommand{\symwidest}[1]{\settowidth{\symtmp}{$\displaystyle #1$}%%
  \ifdim\symtmp>\symlhs\setlength{\symlhs}{\symtmp}\fi}
%% \symline{lhs}: a line whose left-hand side is right-aligned in the frame's column;
%% what follows is broken by TeX at its sums, continuation lines indented.
\newcommand{\symline}[1]{\par\noindent\hangindent=\dimexpr\symlhs+1.5em\relax
  \hangafter=1\makebox[\symlhs][r]{$\displaystyle #1$}}
"""


#: Characters of the maths extension font's glyphs (Latin Modern's names, which TeX
#: Live's glyphtounicode.tex lacks): without them a big parenthesis reads as a letter.
_EXTENSION = {"parenleft": "0028", "parenright": "0029", "bracketleft": "005B",
              "bracketright": "005D", "braceleft": "007B", "braceright": "007D",
              "radical": "221A", "summation": "2211", "product": "220F", "integral": "222B"}


def _extension_unicode() -> str:
    names = [f"{base}{size}" for base in _EXTENSION
             for size in ("big", "Big", "bigg", "Bigg", "text", "display", "tp", "bt", "ex",
                          "mid", "vertbt", "verttp")]
    return "".join(f"\\pdfglyphtounicode{{{n}}}{{{_EXTENSION[b]}}}\n"
                   for n in names for b in _EXTENSION if n.startswith(b))


def document(g: Derivation, options: SlideOptions, frames: list[Frame]) -> str:
    """The whole ``slides.tex``."""
    body = ["\\begin{frame}[plain]\n\\titlepage\n\\end{frame}"]
    for frame in frames:
        if isinstance(frame, StageFrame):
            body.append(stage_frame(frame, options.decimals))
        elif isinstance(frame, DiagramFrame):
            body.append(diagram_frame(frame))
        elif isinstance(frame, HeadFlowFrame):  # its text at the figures' size
            body.append("\\setbeamertemplate{frame footer}{}\n"
                        f"\\begin{{frame}}[t]{{{frame.title}}}\n"  # (a group here: a subtitle)
                        f"\\begingroup\\centering{_figure_sizes()}\\small\n"
                        f"\\makebox[\\textwidth][c]{{%\n{frame.tikz}}}\\par"
                        f"\\endgroup\\smallskip{{\\raggedright {frame.caption}\\par}}\n"
                        "\\end{frame}")
        elif isinstance(frame, WeightsFrame):
            body.append(f"\\begin{{frame}}[t]{{{frame.title}}}\n{frame.text}\n"
                        + "\n".join(frame.lines) + "\n\\end{frame}")
        elif isinstance(frame, SectionFrame):
            body.append("\\setbeamertemplate{frame footer}{}\n"
                        f"\\begin{{frame}}[t]{{{frame.title}}}\n{frame.text}\n\\end{{frame}}")
        else:
            body.append(figure_frame(frame))
    preamble = PREAMBLE % {"figures": tikz.PREAMBLE, "extension": _extension_unicode()}
    return preamble + title_page(g, options) + "\\begin{document}\n\n" + "\n\n".join(
        body) + "\n\n\\end{document}\n"


def diagram_frame(frame: DiagramFrame) -> str:
    """The block diagram (:mod:`symformer.figures.diagram`) on a plain frame of its own
    (the diagram has the whole frame's height), titled in the frame title's font, set at
    its natural size and centred, into the side margins if need be (never scaled)."""
    from symformer.figures import diagram

    side = frame.diagram.extra.get("part")
    name = f"The {side}" if side else "The architecture"
    return ("\\setbeamertemplate{frame footer}{}\n\\begin{frame}[plain,t]\n"
            f"\\noindent{{\\usebeamerfont{{frametitle}}{name}\\par}}\\smallskip\\centering"
            + _figure_sizes() + "\\small\n\\makebox[\\textwidth][c]{%\n"
            + diagram.draw(frame.diagram, diagram.SLIDES, diagram.SLIDES_LAYOUT) + "}\n"
            + "\\end{frame}")


def title_page(g: Derivation, options: SlideOptions) -> str:
    """The title page's fields: the example, the sentence, the token followed, how
    numbers are rounded."""
    tokens = g.example.tokens
    title = latex_text(with_causal_mask(g.example.title, g.causal))
    sentence = " ".join(latex_text(t) for t in tokens)
    return (f"\\title{{{title}}}\n\\subtitle{{step by step}}\n"
            f"\\author{{The sentence: \u201c{sentence}\u201d}}\n"
            f"\\institute{{Following the token \u201c{latex_text(tokens[options.token])}\u201d "
            f"(position {options.token}; positions count from 0).}}\n"
            f"\\date{{Every number is derived exactly and rounded correctly to "
            f"{options.decimals} decimals.}}\n")


def stage_frame(frame: StageFrame, decimals: int = DEFAULT_DECIMALS) -> str:
    """One frame of one or more stages: each stage's equation and the token's numbers
    substituted; then their results and the table with the token's row highlighted
    (each from its overlay on, never removed; :meth:`StageFrame.steps`).  A frame of
    tables of stages worked before sets them side by side under its sentence."""
    first = frame.items[0]
    where = (f"token \u201c{latex_text(first.stage.rows[first.token])}\u201d, "
             f"position {row_position(frame)}; rounded to {plural(decimals, 'decimal')}")
    if first.stage.name.startswith("grad."):  # gradients span magnitudes
        from symformer.worked.significant import DEFAULT_DIGITS

        # a table at fewer digits (too wide at the default's) says so, and so does this
        said = [d for i in frame.items if i.table is not None for t in i.table.legend
                if (d := significant_digits(t)) is not None]
        where = where.replace(f"rounded to {plural(decimals, 'decimal')}",
                              f"rounded to {min(said, default=DEFAULT_DIGITS)} "
                              "significant digits")
    if first.stage.op.of_weight or (  # its rows are the weight's, not tokens
            first.stage.shape == (1, 1) and first.stage.name.startswith("loss")):  # a scalar
        where = where.split("; ", 1)[1]
    if frame.footer:  # a decision over the vocabulary, a cache: not a token's row
        where = f"{frame.footer}; rounded to {plural(decimals, 'decimal')}"
    if first.row_range is not None:
        a, b = first.row_range
        where += f"; rows {a}\u2013{b - 1} of {first.stage.shape[0]}"
    lhs = [e.lhs for i in frame.items for e in i.equation] + [
        w.lhs for i in frame.items for w in i.lines]
    out = [f"\\setbeamertemplate{{frame footer}}{{{where}}}",
           f"\\begin{{frame}}[t]{{{frame.title}}}",
           "\\raggedright\\setlength{\\symlhs}{0pt}"
           + "".join(f"\\symwidest{{{x}}}" for x in lhs)]
    if frame.note:
        out.append(f"{frame.note}\\par\\smallskip")
    if frame.row:
        for row in rows(frame.items):
            widths = row_widths(row)
            if heading_beside(row):
                (i,), (w,) = row, widths
                out.append(f"\\noindent\\begin{{minipage}}[t]{{{HEADING}em}}\\vspace{{0pt}}"
                           f"\\raggedright {row_heading(frame, i)}\\end{{minipage}}\\hfill"
                           f"\\begin{{minipage}}[t]{{{w:.2f}em}}\\vspace{{0pt}}\\centering "
                           f"{_table(i)}\\end{{minipage}}\\par\\medskip")
                continue
            cells = [f"\\begin{{minipage}}[t]{{{w:.2f}em}}\\centering {row_heading(frame, i)}"
                     f"\\par\\smallskip{_table(i)}\\end{{minipage}}"
                     for i, w in zip(row, widths)]
            out.append("\\noindent" + "\\hfill".join(cells) + "\\par\\medskip")
    else:
        for k, (item, steps) in enumerate(zip(frame.items, frame.steps())):
            out.append(("\\par\\medskip" if k else "") + _item(item, *steps))
    out.append("\\par\\end{frame}")
    return "\n".join(out)


def _item(item: Item, numbers: int, results: int, step: int) -> str:
    """One stage's equation, working and table on a frame, at their overlays."""
    out = []
    for e in item.equation:
        remark = f" \\quad ({reader_text(e.remark)})" if e.remark else ""
        # in display style, as the notes set it: limits under a sum, full-size fractions
        closer = f"\\setlength{{\\arraycolsep}}{{{fit.COMPACT_SEP}pt}}" if e.compact else ""
        out.append(f"{closer}\\symline{{{e.lhs}}}$\\displaystyle {{}}= {e.rhs}$" + remark)
    if item.note:
        out.append(f"\\par\\smallskip\\uncover<{numbers or results or 1}->{{{item.note}}}")
    elif item.equation and item.lines:
        out.append("\\par\\smallskip")
    working = []
    for w in item.lines:
        # the left-hand side comes with the line's first reveal; TeX may break the
        # line between its pieces and at their sums
        first = numbers if w.shown else results
        shown = "\\allowbreak".join(f"$\\displaystyle {{}}{p}$" for p in w.shown)
        working.append(f"\\symline{{\\uncover<{first}->{{{w.lhs}}}}}"
                       + (f"\\uncover<{numbers}->{{{shown}}}\\allowbreak" if shown else "")
                       + f"\\uncover<{results}->{{$\\displaystyle {{}}{w.result}$}}")
    table = ""
    if item.table is not None:
        table = f"{{\\centering {_table(item)}\\par}}"
        table = f"\\uncover<{step}->{{{table}}}" if step > 1 else table
    if item.beside and item.table is not None and working:
        # the working in a column of its own, the table right of it, both top-aligned
        out.append(f"\\par\\noindent\\begin{{minipage}}[t]{{{item.working_width:.1f}em}}"
                   "\\raggedright"
                   + "\n".join(working) + "\\par\\end{minipage}\\hfill"
                   f"\\begin{{minipage}}[t]{{{table_width(item.table, item.compact):.1f}em}}"
                   "\\vspace{0pt}" + table + "\\end{minipage}")
    else:
        out.extend(working)
        if table:
            out.append("\\par\\medskip" + table)
    return "\n".join(out)


def _table(item: Item) -> str:
    """An item's table and its legend (without the rounding, which the footer says),
    then its key (LaTeX: what its abbreviated headings and the unit of its entries are);
    a compact table's columns closer (:mod:`symformer.slides.fit`)."""
    table = item.table
    text = fit.NEWLINE.join(filter(None, (latex_text(legend(table)), item.key)))
    sep = f"\\setlength{{\\tabcolsep}}{{{fit.COMPACT_SEP}pt}}" if item.compact else ""
    return f"{TABLE_FONT}{sep}" + table_body(table) + (f"\\par\\smallskip{{{text}\\par}}"
                                                    if text else "")


def figure_frame(frame: FigureFrame) -> str:
    """A figure on its own frame, titled like the stage it draws: drawn for the frame
    (:data:`~symformer.figures.tikz.SLIDES`: its room and its font), so set at its
    natural size, never shrunk; its text, whatever size the figure asks for, in
    :data:`FIGURE_FONT`."""
    title = frame.title or latex_text(frame.figure.title.split(":")[0].rstrip("."))
    return (f"\\setbeamertemplate{{frame footer}}{{}}\n"
            f"\\begin{{frame}}[t]{{{title}}}\n\\centering"
            + _figure_sizes() + "\\small\n"
            f"{tikz.draw(frame.figure, tikz.SLIDES)}\n\\end{{frame}}")


def _figure_sizes() -> str:
    """Every smaller size a figure asks for set at :data:`FIGURE_FONT` (never below
    9 pt on a slide)."""
    return "".join(f"\\renewcommand{{\\{size}}}{{{FIGURE_FONT}}}"
                   for size in ("small", "footnotesize", "scriptsize", "tiny"))

