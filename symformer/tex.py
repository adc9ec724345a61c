"""Running pdflatex and Poppler in scratch folders: a document to PDF, a PDF to PNG or SVG."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from symformer.errors import InputError


def pdflatex() -> str:
    """The pdflatex executable, or an error saying how to get one."""
    exe = shutil.which("pdflatex")
    if exe is None:
        raise InputError("pdflatex was not found on PATH; install TeX Live "
                         "(Debian: apt-get install texlive-latex-base "
                         "texlive-latex-recommended lmodern) or drop --pdf")
    return exe


def compile_pdf(files: dict[str, str], main: str = "main.tex") -> bytes:
    """Compile ``files`` (relative path -> text) in a scratch directory; the PDF's bytes."""
    return compile_log(files, main)[0]


def compile_log(files: dict[str, str], main: str = "main.tex",
                progress: Callable[[int, int], None] | None = None,
                passes: int = 2) -> tuple[bytes, str]:
    """Compile with pdflatex (twice, so references resolve): the PDF's bytes and the log.

    ``progress(k, passes)`` is called before pass ``k``; one pass is enough to check the
    layout (references then print as ??).  Raises :class:`InputError` quoting the log's
    first error when pdflatex fails.
    """
    exe = pdflatex()
    with tempfile.TemporaryDirectory(prefix="symformer-tex-") as tmp:
        root = Path(tmp)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        for k in range(1, passes + 1):
            if progress:
                progress(k, passes)
            # every pass but the last writes only its .aux (no PDF): about 15 % faster
            draft = ["-draftmode"] if k < passes else []
            run = subprocess.run([exe, *draft, "-interaction=nonstopmode", "-halt-on-error",
                                  main],
                                 cwd=root, capture_output=True, text=True,
                                 encoding="utf-8", errors="replace", timeout=300)
            if run.returncode != 0:
                lines = [ln for ln in run.stdout.splitlines() if ln.startswith("!")]
                raise InputError(f"pdflatex failed: {lines[0] if lines else run.stdout[-500:]}")
        log = (root / main).with_suffix(".log").read_text(encoding="utf-8", errors="replace")
        return (root / main).with_suffix(".pdf").read_bytes(), log


def convert_pdf(pdf: bytes, fmt: str, dpi: int = 200) -> bytes | None:
    """A one-page PDF as a PNG (``pdftoppm`` at ``dpi``) or an SVG (``pdftocairo``), by
    Poppler in a scratch directory; None when that tool is not installed."""
    tool = {"png": "pdftoppm", "svg": "pdftocairo"}[fmt]
    if shutil.which(tool) is None:
        return None
    with tempfile.TemporaryDirectory(prefix="symformer-pdf-") as tmp:
        root = Path(tmp)
        (root / "d.pdf").write_bytes(pdf)
        command = (["pdftoppm", "-r", str(dpi), "-png", "-singlefile", "d.pdf", "d"]
                   if fmt == "png" else ["pdftocairo", "-svg", "d.pdf", "d.svg"])
        subprocess.run(command, cwd=root, check=True, capture_output=True, timeout=300)
        return (root / f"d.{fmt}").read_bytes()
