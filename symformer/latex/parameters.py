"""The weights a step reads, printed where they are first used.

A reader rebuilds a table from the one before it only with the step's weights in
hand: every weight and bias (``op.parameters()``: W_Q, W_1, b_1, γ, β, the embedding
table, a learned positional table, W_vocab, ...) is printed exactly, as a matrix,
in the section of the stage that uses it (each stage has weights of its own:
grouped-query attention's shared key and value heads are stages of their own), once
even when the stage is shown twice (again under the causal mask).
"""

from __future__ import annotations

from symformer.engine import Stage
from symformer.latex.blocks import Matrices, MatrixBlock, Prose
from symformer.latex.numbers import weight
from symformer.latex.render import TEXT_WIDTH
from symformer.lazy import sympy
from symformer.notation import parameter
from symformer.worked.render_latex import width

#: The embedding table's name in ``op.parameters()``: its rows are the vocabulary.
TABLE = "embedding_table"


def _matrix(lhs: str, value: sympy.Matrix) -> MatrixBlock:
    rows = value.tolist()
    return MatrixBlock(lhs, tuple(tuple(weight(v) for v in row) for row in rows))


def weight_block(stage: Stage, name: str, value: sympy.Matrix) -> MatrixBlock:
    """The weight ``name`` of ``stage``'s operation as the notes print it: its symbol
    and its exact entries."""
    return _matrix(parameter(stage, name).latex, value)


def _width(block: MatrixBlock) -> int:
    if block.value is not None:
        return width(block.lhs) + 4 + width(block.value)
    columns = zip(*block.rows)
    return width(block.lhs) + 4 + sum(max(width(v) for v in col) + 2 for col in columns)


def fits_line(block: MatrixBlock, room: int | None = None) -> bool:
    """Whether ``block`` fits a display line (``room`` characters; default the notes'
    :data:`MATRIX_WIDTH`) on its own (else a table shows it)."""
    return _width(block) <= (MATRIX_WIDTH if room is None else room)


#: The characters of visible math a display line of matrices holds: more than a line
#: of text (:data:`~symformer.latex.render.TEXT_WIDTH`, which counts an operator's
#: spacing), since a matrix is mostly digits (measured: 84 fit the 470 pt line).
MATRIX_WIDTH = 80


def matrix_lines(blocks: list[MatrixBlock], room: int = TEXT_WIDTH
                 ) -> tuple[tuple[MatrixBlock, ...], ...]:
    """The matrices side by side, a new display line where the next would not fit
    ``room`` characters."""
    lines: list[list[MatrixBlock]] = []
    used = 0
    for block in blocks:
        if lines and used + 4 + _width(block) <= room:
            lines[-1].append(block)
            used += 4 + _width(block)
        else:
            lines.append([block])
            used = _width(block)
    return tuple(tuple(line) for line in lines)


def parameter_blocks(stage: Stage, seen: set) -> list:
    """The prose and matrices of the weights ``stage`` is the first to use (nothing
    when it uses none, or only weights printed before); ``seen`` records them."""
    found = []
    for name, value in stage.op.parameters().items():
        key = (stage.name, name)
        if key in seen or value is None:
            continue
        seen.add(key)
        found.append((name, value))
    if not found:
        return []
    blocks = [weight_block(stage, name, value) for name, value in found]
    text = "This example\u2019s weights" if len(found) > 1 else \
        "This example\u2019s weight"
    if any(name == TABLE for name, _ in found):
        example = stage.derivation.example
        vocab = example.decoder.vocab if stage.side == "decoder" else example.vocab
        text += (" (the rows of E are the vocabulary in order: "
                 + ", ".join(f"\u201c{w}\u201d" for w in vocab) + ")")
    return [Prose((text + ":",)), Matrices(matrix_lines(blocks, MATRIX_WIDTH))]


#: What the notes and slides say where worked lines leave out terms
#: (:func:`omits_zero_terms`).
ZERO_TERMS = "terms with a weight of exactly 0 are left out"


def zero_terms_note(stage: Stage) -> str:
    """:data:`ZERO_TERMS` when the stage's worked lines leave out terms, else ``""``."""
    return ZERO_TERMS if omits_zero_terms(stage) else ""


def omits_zero_terms(stage: Stage) -> bool:
    """Whether the stage's worked lines leave out terms: a weight the formula names
    (:meth:`~symformer.ops.base.Operation.named_constants`) has an entry exactly 0."""
    op = stage.op
    for field in op.named_constants():
        value = getattr(op, field, None)
        if hasattr(value, "shape") and any(x == 0 for x in value):  # a matrix, not ε
            return True
    return False
