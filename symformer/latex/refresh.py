"""Regenerate the committed export of the built-in example: ``python -m symformer.latex.refresh``.

Writes ``exports/`` (``main.tex``, ``fragments/``, ``main.pdf`` when pdflatex is
available) and ``exports/markdown/main.md`` with the default options.  A test
regenerates the text files in memory and fails when the committed ones differ.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from symformer.blocks import derive
from symformer.example import load_example
from symformer.files import write_files
from symformer.latex import NotesOptions, export_files

#: The committed export, at the repository root.
EXPORTS = Path(__file__).resolve().parents[2] / "exports"
OPTIONS = NotesOptions(decimals=2, token=1)


def expected_files() -> dict[str, str]:
    """Every committed text file of ``exports/``, by relative path."""
    g = derive(load_example())
    files = dict(export_files(g, OPTIONS, "latex"))
    files.update({f"markdown/{k}": v for k, v in export_files(g, OPTIONS, "markdown").items()})
    return files


def main(argv: list[str] | None = None) -> int:
    """Rewrite ``exports/`` (and its PDF unless ``--no-pdf`` or pdflatex is missing)."""
    parser = argparse.ArgumentParser(prog="python -m symformer.latex.refresh",
                                     description=__doc__)
    parser.add_argument("--out", type=Path, default=EXPORTS, help="default: exports/")
    parser.add_argument("--no-pdf", action="store_true", help="skip compiling main.pdf")
    args = parser.parse_args(argv)
    files: dict[str, str | bytes] = dict(expected_files())
    if not args.no_pdf and shutil.which("pdflatex"):
        from symformer.latex.compile import compile_pdf

        # A reproducible PDF: pdfTeX takes its dates and /ID from these, so the
        # committed main.pdf changes only when its content does.
        os.environ.update(SOURCE_DATE_EPOCH="0", FORCE_SOURCE_DATE="1")
        files["main.pdf"] = compile_pdf({k: v for k, v in files.items()
                                         if not k.startswith("markdown/")})
    # Fragments of stages that no longer exist would linger: the directory is never
    # cleared, so remove stale fragment files explicitly.
    stale = [p for p in (args.out / "fragments").glob("*.tex")
             if f"fragments/{p.name}" not in files]
    write_files(args.out, files)
    for path in stale:
        path.unlink()
    print(f"wrote {len(files)} files to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
