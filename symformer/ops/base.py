"""What every operation owns, in one place: the :class:`Operation` protocol.

An operation is one kind of step of a Transformer (a projection, a softmax, a
LayerNorm's mean, ...).  Its module holds everything about it, side by side:

* ``sympy(args)`` -- the exact local formula of every entry, over SymPy matrices
  (normally the symbols that *name* the input stages' entries, so a formula stays
  short however deep the stage sits; given rational matrices, it recomputes the
  stage exactly from them, as ``check`` does with an author's printed numbers);
* ``arb(args)`` -- the same operation in ball arithmetic (certified digits);
* ``reference(args, dtype)`` -- the float reference: it calls the module's NumPy
  function (``function()``) on ``arguments(args, dtype)``; ``crosscheck`` runs it;
* ``equation()`` -- the general equation in index form over named arrays, declared
  once (:mod:`symformer.equations`): every format prints it and a test proves it
  equal to ``sympy()`` at every entry;
* ``notation`` -- the symbol of the token's vector at this step and the step's
  title, used by every format;
* ``facts(stage)`` -- the identities ``prove`` states about the step, if any;
* ``backward(args, out, grad, wrt, num)`` -- the vector-Jacobian product (the
  derivative written once, beside the forward definition), and ``parameters()``,
  the exact weights it differentiates with respect to (see
  :mod:`symformer.ops.calculus` and :mod:`symformer.blocks.backward`).

Worked lines and trace steps are built from the local formula by
:mod:`symformer.worked`, so an operation does not write its formula a second
time.  Weights are exact constants baked into the operation (part of the
formula, as in ``q = x1/4 + x2/4``), or -- in a training step, where they are no
longer rational -- stages the same operation reads (``from_stages``, made by
:meth:`Operation.staged`); an operation may *name* them (``named_constants``:
``q_0 = x_0 (W_Q)_{0,0} + ...``) and may name a part of its formula shared by a row
(``worked_parts``: a softmax's denominator).

Every concrete subclass is registered in :data:`OPERATIONS` by defining it; a
test checks that each provides all of the above.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.errors import InputError, NotSupportedError
from symformer.lazy import sympy
from symformer.notation_types import Notation, named
from symformer.ops.facts import Fact
from symformer.registry import OPERATIONS

if TYPE_CHECKING:
    from symformer.engine.graph import Stage
    from symformer.equations.ir import IndexEquation
    from symformer.ops.calculus import Arithmetic, Rows
    from symformer.ops.gradient import Part
    from symformer.worked.model import Node



def bilinear_difference(op: Operation, x0: Sequence[ArbMatrix],
                        dx: Sequence[ArbMatrix]) -> ArbMatrix:
    """f(a0 + da, b0 + db) - f(a0, b0) = f(da, b0) + f(a0, db) + f(da, db) for a
    bilinear ``op`` (a product of two stages), without subtracting close numbers."""
    (a0, b0), (da, db) = x0, dx
    terms = [op.arb([da, b0]), op.arb([a0, db]), op.arb([da, db])]
    return [[x + y + z for x, y, z in zip(*rows)] for rows in zip(*terms)]


def matrix(value: sympy.Matrix | None, dtype: type) -> np.ndarray | None:
    """An exact SymPy matrix (rationals, sin(1), ...) as a float array (None stays None).

    The example's exact numbers become floats here and only here.
    """
    if value is None:
        return None
    from symformer.example.dyadic import DyadicMatrix

    if isinstance(value, DyadicMatrix) and value.fresh():
        # floats already (a weights file's): widened exactly, rounded once to dtype,
        # as float() of each exact rational would be -- without a Rational per entry
        return np.asarray(value.array, dtype=np.float64).astype(dtype)
    return np.array([[float(v) for v in value.row(i)] for i in range(value.rows)],
                    dtype=dtype)


class Operation(ABC):
    """One kind of step: exact formula, balls, float reference, notation and facts."""

    #: The registry key (a short lower-case name, unique per class).
    name: ClassVar[str]
    #: The NumPy function the float reference runs (``crosscheck``).
    reference_function: ClassVar[Callable[..., Any]]
    #: The default notation; a composition may give a stage another role's notation
    #: (a projection makes queries ``q`` or keys ``k``) through the ``notation`` field.
    default_notation: ClassVar[Notation]
    #: True when rational inputs give rational outputs (exact recomputation from an
    #: author's printed numbers is then possible without balls).
    rational: ClassVar[bool] = False
    #: True when every output entry is >= 0 whatever the inputs (a variance).
    nonnegative: ClassVar[bool] = False
    #: True when every output row sums to exactly 1 whatever the inputs (a softmax):
    #: the zero proofs use it (a softmax row's score gradient sums to 0).
    rows_sum_to_one: ClassVar[bool] = False
    #: True when the step outputs exactly 0 wherever its input is <= 0 and passes no
    #: gradient back there (a ReLU): a unit whose input is <= 0 for every token is dead
    #: (:mod:`symformer.analysis.inactive` says so, decided by certified signs).
    clips: ClassVar[bool] = False
    #: True when each output entry is a rotation of its row by angles with exact cos and
    #: sin (RoPE): the exact pass uses sin^2 + cos^2 = 1 on products of rotated entries.
    rotates: ClassVar[bool] = False
    #: Every entry's value when the step is a known constant (the loss's own gradient
    #: dL/dL = 1): equations and worked lines write the number, not the symbol.
    constant: ClassVar[int | None] = None
    #: How a trace shows the step: "vector" (the token's row), "attention" (one entry
    #: per key), "norm" (with its mean and variance), "activation", or "folded" (shown
    #: inside the step that reads it: a LayerNorm's mean and variance).
    trace_step: ClassVar[str] = "vector"
    #: What the columns are: "dims" (components of the token's vector), "keys" (key
    #: positions) or "vocab" (vocabulary entries); labels and captions follow it.
    columns: ClassVar[str] = "dims"
    #: Whether tables shade the values as a heat map (entries in [0, 1]).
    heat: ClassVar[bool] = False
    #: How the matrix form (:mod:`symformer.latex.matrix_form`) writes the step, named
    #: by the tree it becomes: "affine" (``X W + b``), "rotate" (RoPE), "softmax",
    #: "scores" (``Q K^T / sqrt(d_k) + M``), "dot_products" (``Q K^T``, folded into the
    #: scores), "product" (``A V``), "columns" (heads side by side), "sum" (a residual),
    #: "layer_norm", "rms_norm", "hadamard" (a gated activation), "identity" (a step
    #: that only names its input anew); None: folded into the step that reads it, or an
    #: activation (``ReLU(...)``, named by ``function_name``).
    matrix_form: ClassVar[str | None] = None
    #: True for the step that scales the scores and applies the causal mask (its
    #: ``masked`` entries); ``keeps_mask``: the step carries the mask's entries in a
    #: ``masked`` field (that step, and ALiBi's after it).
    scales_and_masks: ClassVar[bool] = False
    keeps_mask: ClassVar[bool] = False
    #: True when the step gives one number per token row (a row mean, a per-position
    #: loss L_i): its entries carry no subscript.
    per_row: ClassVar[bool] = False
    #: True when mean and variance are taken over every entry of the matrix, not per row.
    whole_matrix: ClassVar[bool] = False
    #: True when the step only names its input anew (``m = c``): a sentence, not a section.
    renames: ClassVar[bool] = False
    #: True for a residual connection's sum x + F(x) (a sub-layer's input and its
    #: output; :class:`~symformer.ops.add.Add` says which of its sums is one).
    residual: ClassVar[bool] = False
    #: True for a statistic a normalisation computes (a row's mean, variance, standard
    #: deviation or mean square; the whole matrix's): it belongs to its normalisation.
    norm_statistic: ClassVar[bool] = False
    #: The sub-layer whose output this step gives, in words: "attention" (the heads'
    #: outputs mixed, or only concatenated), "feed-forward"; None: no sub-layer's output.
    sublayer_of: ClassVar[str | None] = None
    #: What a projection or a given matrix stands for in its block: "queries", "keys",
    #: "values" (a head's), "heads" (W_O over the concatenated heads), "ffn_hidden",
    #: "ffn_gate", "ffn_output" (the FFN's), "transform" (a masked LM's prediction
    #: transform), "logits" (the vocabulary's or a classifier's), "regression" (a
    #: regression head's outputs), "input" (given input rows); "" : none of these (a
    #: weight, any other step).
    role: ClassVar[str] = ""
    #: The part of a Transformer block the step belongs to, which the notes' sections
    #: follow: "input" (embeddings and positional encoding), "head" (one attention
    #: head's), "heads" (the heads together), "add_norm" (a residual sum, a
    #: normalisation and its statistics), "ffn" (the feed-forward network), "output"
    #: (the last output, logits, probabilities, the next token); None: none (a loss, a
    #: gradient, a side stage).  By default read off the step's other declarations (a
    #: score function's, a normalisation's, an activation's; a projection's role).
    #: A score function, normalisation or activation needs nothing more.
    part_of_block: ClassVar[str | None] = None
    #: True for a weight's own value as a stage (a training run's weights step by step:
    #: the example's, each update's, a tied table's transpose; a claimed weight): its
    #: rows are the weight's, not tokens.
    is_weight: ClassVar[bool] = False
    #: True for an optimizer's state about one weight (Adam's moments and the parts of
    #: its update, SGD's lr times the gradient): its rows are the weight's.
    optimizer_state: ClassVar[bool] = False
    #: True for a constant of the example, the same for every token (√d_k, log V, RoPE's
    #: θ_i, Adam's 1 − β^t): its entries have no position.
    example_constant: ClassVar[bool] = False
    #: True for a side's final output (the last block's result, named anew): the notes
    #: give it a section of its own, not a renaming's sentence.
    final: ClassVar[bool] = False
    #: True for a side stage about one row of its input (a softmax row's Jacobian): the
    #: notes show it with that input.
    about_input: ClassVar[bool] = False
    #: True when the step multiplies an activated gate by a hidden entry (a gated FFN):
    #: its ``activation`` field is the gate's activation.
    gates: ClassVar[bool] = False
    #: A table lookup's rows: "tokens" (an embedding table, one row per token read) or
    #: "positions" (a learned positional table); its gradient has only the rows read,
    #: and a trained table is shown whole.  None: not a table.
    lookup: ClassVar[str | None] = None
    #: True for a gradient stage's step: the sum over the paths from the loss of its
    #: consumers' backward rules (``parts(stage)``), displayed one rule per path.
    sums_paths: ClassVar[bool] = False
    #: True for a step giving the gradient of a weight (dL/dW_1, dL/dgamma, a tied
    #: table's): its rows are the weight's rows, not tokens (one row for a bias or a
    #: gain), and the notes gather it with the other weights' gradients.
    of_weight: ClassVar[bool] = False
    #: True for a step giving the gradient of a stage (dL/dX, summed over the paths
    #: from the loss; the loss's own dL/dL = 1): its rows are the stage's.
    of_stage: ClassVar[bool] = False
    #: True for a stage that is identically 0 whatever the example's weights and adds
    #: nothing to what reads it (a RoPE model's absent positional table): no gradient is
    #: taught at it.
    adds_nothing: ClassVar[bool] = False
    #: True for a step giving each position's encoding, added to the embeddings (a
    #: sinusoidal or learned table), or standing for none (RoPE's, none's: all zeros).
    encodes_positions: ClassVar[bool] = False
    #: True for a step giving the loss L that the backward pass differentiates (one
    #: number: a cross-entropy, a squared error, an objective); its per-position terms
    #: are ``per_position_of``'s.
    is_loss: ClassVar[bool] = False
    #: The loss (its ``name``) whose per-position terms this step gives, built from that
    #: loss's step by :meth:`from_loss` (``[stages] per_position_loss``); None: not one.
    per_position_of: ClassVar[str | None] = None
    #: True for the step that picks the next token (the argmax indicator over the
    #: vocabulary's probabilities): one row, the last position's, that may read every
    #: token; the slices and the decoder's look-ahead proof tell it by this.
    picks_token: ClassVar[bool] = False
    #: True when the output jumps as its input crosses a tie (an argmax indicator): no
    #: value between two is reached, so intervals over the input say nothing.
    jumps: ClassVar[bool] = False
    #: The symbol a claim's equation may write this step's given target matrix with
    #: (the mse loss's ``T``: :mod:`symformer.verify.equation_bind`); None: none.
    target_symbol: ClassVar[Notation | None] = None

    # What an FFN activation declares (:mod:`symformer.ops.registry` lists them): a new
    # activation is one module, read by the example file, the blocks, the exercise
    # sheet, the matrix form, the figures and the PyTorch module alike.
    #: The example file's ``activation = "..."`` value choosing this operation as the
    #: FFN's activation; None: not an activation.
    activation_key: ClassVar[str | None] = None
    #: Where the activation sits in the lists that name them all (the example file's
    #: message, the PyTorch module's dispatch): smaller first, then by definition.
    activation_rank: ClassVar[int] = 100
    #: How an equation names the function (``\operatorname{ReLU}``; ``""``: no name,
    #: the identity); None: the operation's ``name``.
    function_name: ClassVar[str | None] = None
    #: The other names authors write the function with (``relu``, ``Swish``): a claim
    #: reads them as it reads ``function_name`` (:mod:`symformer.equations.functions`).
    function_aliases: ClassVar[tuple[str, ...]] = ()
    #: The gated FFN's name with this activation (Shazeer 2020: ``"SwiGLU"``).
    gated_name: ClassVar[str] = ""
    #: The exercise sheet's definition of the function: text and inline LaTeX in turn
    #: (``("ReLU keeps ...: ", r"\operatorname{ReLU}(x) = \max(0, x)", ".")``).
    definition: ClassVar[tuple[str, ...]] = ()
    #: The PyTorch form, an expression in the tensor ``x`` over torch's own functions
    #: (``"torch.relu(x)"``), written into the exported module's fixed dispatch; None:
    #: ``export --format torch`` refuses an example using it.
    torch_function: ClassVar[str | None] = None
    #: The Hugging Face ``hidden_act`` names that mean this activation.
    hf_names: ClassVar[tuple[str, ...]] = ()
    #: The PyTorch forms that compute this activation, which ``from_torch`` reads from a
    #: layer's ``activation``: a ``torch.nn`` module's class name (``"ReLU"``; a GELU
    #: with its ``approximate``: ``"GELU(approximate='tanh')"``) or a
    #: ``torch.nn.functional`` function's name (``"relu"``).  A form no activation
    #: declares is refused by the import (never another activation).
    torch_names: ClassVar[tuple[str, ...]] = ()
    #: True when the backward step at an input exactly 0 is a subgradient decided by a
    #: proof, the operation keeping those entries in a ``zeros`` field (ReLU: a ball
    #: around an exact 0 never decides the step).
    kinked: ClassVar[bool] = False

    # What a normalisation declares (:func:`symformer.registry.normalisations` lists
    # them): a new one is one module, read by the example file, the blocks, the block
    # diagram, the matrix form, the notes and the PyTorch module alike.  A consumer
    # asking a declaration that is missing refuses the example in one line.
    #: The example file's ``layer_norm = "..."`` values choosing this operation as the
    #: blocks' normalisation (its :meth:`add_norm` adds the stages); () : not one.
    norm_keys: ClassVar[tuple[str, ...]] = ()
    #: Where the normalisation sits in the lists that name them all (the example file's
    #: message, ``--layer-norm``'s choices): smaller first, then by definition.
    norm_rank: ClassVar[int] = 100
    #: The normalisation's short name: the block diagram's box (``Add & LayerNorm``),
    #: the matrix form's function (``\operatorname{LayerNorm}(R)``); None: both refuse.
    norm_label: ClassVar[str | None] = None
    #: Each key's name in a sentence (``{"biased": "biased LayerNorm"}``: the notes'
    #: "in place of the example's ..."); a key not listed is named by ``norm_label``.
    norm_titles: ClassVar[dict[str, str]] = {}
    #: What the matrix form says the function does, after its line (``each row less
    #: its mean, ...``); "" : nothing.
    norm_remark: ClassVar[str] = ""
    #: False when the normalisation has no shift beta (RMSNorm).
    norm_shifts: ClassVar[bool] = True
    #: The PyTorch form of each key: the body of the exported module's ``norm`` branch,
    #: statements over the tensors ``x``, ``gamma``, ``beta``, the float ``eps`` and the
    #: dict ``stats`` of named stages (``stats[f"{name}.mean"] = ...``), ending in
    #: ``return`` of the normalised rows.  A key not listed: ``export --format torch``
    #: and ``crosscheck --torch`` refuse the example (never another normalisation).
    torch_norms: ClassVar[dict[str, str]] = {}
    #: The PyTorch modules that compute this normalisation, each with the example-file
    #: key it means: a ``torch.nn`` module by its class name (``{"LayerNorm":
    #: "biased"}``), any other by its qualified name (``"mypkg.norms.DyT"``): ``from_torch``
    #: reads a layer's norm named here and refuses one no normalisation declares
    #: (:func:`symformer.registry.framework_key`), never reading it as another.
    torch_modules: ClassVar[dict[str, str]] = {}
    #: The same for the Hugging Face families: the module class their blocks use, as
    #: transformers names it (GPT-2's and BERT's ``LayerNorm``, ``LlamaRMSNorm``).
    hf_modules: ClassVar[dict[str, str]] = {}
    #: A positional encoding's Hugging Face ``position_embedding_type`` values (BERT's),
    #: each with the example's ``positional_encoding`` it means (``{"absolute":
    #: "learned"}``); a value no operation declares is refused by the import.
    hf_positions: ClassVar[dict[str, str]] = {}
    module_weights: ClassVar[dict[str, str]] = {}

    # What an attention score function declares (:func:`symformer.registry.
    # score_functions` lists them): the step giving each head's raw scores u = f(Q, K),
    # then scaled, masked and turned into weights as ever.  Built with no arguments
    # (``cls()``) from the stages Q (n x d_k) and K (m x d_k); its columns are keys.
    #: The example file's ``attention_scores = "..."`` value choosing this operation
    #: (``"dot"``: Q K^T); None: not a score function.
    score_key: ClassVar[str | None] = None
    #: A score function's PyTorch form: an expression in the tensors ``q`` (n x d_k) and
    #: ``k`` (m x d_k) giving the n x m raw scores (``"q @ k.T"``), written into the
    #: exported module's fixed dispatch; None: ``export --format torch`` refuses it.
    torch_scores: ClassVar[str | None] = None
    #: Where the score function sits in the lists that name them all: smaller first.
    score_rank: ClassVar[int] = 100

    @classmethod
    def add_norm(cls, g: Any, name: str, x: str, key: str, eps: Any, gamma: Any,
                 beta: Any, layer: int) -> str:
        """Add the stages normalising the stage ``x`` of the derivation ``g`` as the
        example file's ``layer_norm = key`` says: the last one named ``name``, each
        statistic a stage ``name.WHAT`` (LayerNorm's ``.mean``, ``.variance``, ``.std``)
        in ``layer``; ``eps``, ``gamma``, ``beta`` are the norm's exact constants (beta
        a row of zeros when the normalisation does not shift).  Returns ``name``."""
        raise NotSupportedError(f"the operation {cls.name!r} is not a normalisation")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            if cls.name in OPERATIONS:
                raise TypeError(f"two operations named {cls.name!r}")
            OPERATIONS[cls.name] = cls

    @classmethod
    def from_loss(cls, loss: Operation) -> Operation:
        """This per-position step for the loss step ``loss`` (see ``per_position_of``)."""
        raise NotSupportedError(f"the operation {cls.name!r} is not a loss's per-position form")

    @property
    def is_gradient(self) -> bool:
        """True for a step of the backward pass's gradients (of a stage, the loss's own
        dL/dL included, or of a weight): ``of_stage`` or ``of_weight``."""
        return bool(self.of_stage or self.of_weight)

    @property
    def activates(self) -> bool:
        """True for a step applying an activation function (an operation declaring its
        ``activation_key``: the FFN's, a gate's, a prediction head's transform's), or
        multiplying an activated gate by a hidden entry (``gates``)."""
        return self.activation_key is not None or bool(self.gates)

    @property
    def block_part(self) -> str | None:
        """``part_of_block`` if declared, else the part the step's other declarations
        say (see ``part_of_block``)."""
        if self.part_of_block is not None:
            return self.part_of_block
        if self.role:
            return ROLE_PARTS[self.role]
        if self.score_key is not None:
            return "head"
        if self.norm_keys or self.norm_statistic or self.residual:
            return "add_norm"
        if self.activates:
            return "ffn"
        if self.picks_token:
            return "output"
        return None

    @property
    def weight_rows(self) -> bool:
        """True when the step's rows are a weight's (a weight, its gradient, an
        optimizer's state about it): ``is_weight``, ``of_weight`` or ``optimizer_state``."""
        return bool(self.is_weight or self.of_weight or self.optimizer_state)

    @property
    def shows_mask(self) -> bool:
        """True for the steps whose masked entries tables mark and the causal variant
        shows again: scores that carry the mask (``keeps_mask``) and the attention
        weights over them (``weighs_keys``)."""
        return bool(self.keeps_mask or self.weighs_keys)

    @property
    def weighs_keys(self) -> bool:
        """True for attention weights: each row sums to 1 over the key positions (a
        softmax over a head's scores)."""
        return self.rows_sum_to_one and self.columns == "keys"

    @property
    def symbol(self) -> Notation:
        """The notation of this step (the role's, else the operation's default)."""
        return getattr(self, "notation", None) or self.default_notation

    def function(self) -> Callable[..., Any]:
        """The NumPy function this instance's float reference runs."""
        return type(self).reference_function

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation | None:
        """This step's general equation in index form, declared once
        (:mod:`symformer.equations`): every displayed format prints it and a test proves
        it equal to :meth:`sympy` at every entry.  ``shapes`` are the input stages'
        shapes (a concatenation's cases depend on them).  None: never displayed."""
        return None

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation | None:
        """The backward rule for input ``wrt`` (or parameter ``wrt``) in index form: its
        left-hand array has the role ``"result"``, ``"grad"`` is dL/d(this step) and
        ``"out"`` this step; ``shapes`` are the inputs' shapes.  Proved equal to
        :meth:`backward` at every entry."""
        return None

    @abstractmethod
    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        """The exact local formula of every entry, over the given input matrices."""

    def sympy_entry(self, args: Sequence[sympy.Matrix], i: int, j: int) -> sympy.Expr | None:
        """Entry (i, j) of :meth:`sympy` alone, for proofs that unfold a few entries of a
        large stage; None (the default): the operation has no cheaper way than the whole
        matrix, which the derivation then builds once and caches."""
        return None

    @abstractmethod
    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        """The same operation in ball arithmetic at the current ``flint.ctx.prec``."""

    @abstractmethod
    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        """The arguments :meth:`function` is called with: the input stages' floats,
        then this step's own constants (weights, eps, d_k) as ``dtype``."""

    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        """The float reference on float inputs: :meth:`function` on :meth:`arguments`."""
        result = self.function()(*self.arguments(args, dtype))
        return np.asarray(result).astype(dtype, copy=False)

    def resolve(self, entry: sympy.Expr, sign: Callable[[], int]) -> sympy.Expr:
        """An entry's local formula with data-dependent branches decided.

        ``sign()`` is the certified sign of the entry's input.  Only piecewise
        operations (ReLU) override this; the formula is returned unchanged otherwise.
        """
        return entry

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix | None:
        """f(x0 + dx) - f(x0) in balls, without subtracting close numbers (None: no rule).

        ``x0`` are the inputs' values, ``dx`` what a perturbation adds to them (a
        finite mask's exp(-1e9)-small weights, :mod:`symformer.engine.perturb`); the
        result must enclose the difference to full relative precision however small.
        """
        return None

    @property
    def finite_mask(self) -> bool:
        """True when the operation masks entries with a finite number (e.g. -1e9)."""
        return False

    def exactly_masked(self) -> Operation:
        """This operation with a finite mask replaced by the exact -inf mask."""
        return self

    def denominators(self, row: int) -> list[tuple[int, int, int]]:
        """Entries (input, row, column) that output ``row`` divides by and that may be 0.

        Only operations whose denominators are not positive by construction list any
        (LayerNorm with eps = 0 divides by the row's variance).
        """
        return []

    def undefined(self, stage: Stage, row: int) -> Exception:
        """The error for an output row whose denominator is exactly 0."""
        return undefined_error(stage, row, "it divides by 0")

    def facts(self, stage: Stage) -> list[Fact]:
        """The identities ``prove`` states about ``stage`` (none by default).

        Each is a :class:`~symformer.ops.facts.Fact` named ``STAGE.what`` (a fact
        shared by several stages, such as ``pe_bounded``, has a name of its own and
        ``prove`` merges them); a :class:`~symformer.ops.facts.Tally` is added up
        over the stages of a side.
        """
        return []

    def named_constants(self) -> dict[str, Notation]:
        """The constant fields worked lines write by name before substituting them.

        Field name -> notation of the matrix (its entries get 0-based indices); the
        worked line's formula is then :meth:`sympy` on a copy of the operation whose
        named fields hold symbols.  None by default: constants print as numbers.
        """
        return {}

    def worked_tree(self, formula: sympy.Expr, convert: Callable[[sympy.Expr], Node]
                    ) -> Node | None:
        """One entry's local formula as a worked-line tree, written the textbook way.

        ``convert`` writes a sub-expression (its input entries as their notation on
        the symbolic line, as printed numbers on the numeric line).  None by default:
        the generic conversion of the SymPy form, which SymPy has normalised
        (``(8943 h^3 + 200000 h)/200000`` for ``h + 0.044715 h^3``).
        """
        return None

    #: Symbols the backward rule names besides the stages' (GELU-tanh's ξ), for the
    #: notation table of a document with a Backward part.
    backward_symbols: ClassVar[tuple[Notation, ...]] = ()

    def backward_worked_tree(self, formula: sympy.Expr,
                             convert: Callable[[sympy.Expr], Node]) -> Node | None:
        """One entry of this operation's backward rule (the only term of a gradient)
        as a worked-line tree, written as its displayed rule is; None by default (the
        generic conversion of the SymPy form)."""
        return None

    def backward_worked_parts(self, stage: Stage, row: int,
                              formulas: Sequence[sympy.Expr]) -> list[WorkedPart]:
        """Parts of a row of this operation's backward rule (the only term of a
        gradient) worked as steps of their own (GELU's ξ); none by default."""
        return []

    def worked_parts(self, stage: Stage, row: int,
                     formulas: Sequence[sympy.Expr]) -> list[WorkedPart]:
        """Parts of a row's local formulas that worked lines show as steps of their own.

        ``formulas`` are the row's entries (masked operands already removed).  None by
        default; a softmax names its denominator.
        """
        return []

    def output_at_zero(self) -> str | None:
        """What this step outputs in every row when its input is exactly 0: the name of
        the parameter it then gives (an affine step's bias: x W + b = b at x = 0), ``""``
        for exactly 0, None when not declared.  A wholly clipped FFN outputs b_2
        (:mod:`symformer.analysis.inactive`)."""
        return None

    def parameters(self) -> dict[str, sympy.Matrix]:
        """The exact weights of this step by name (``{"W_1": W, "b_1": b}``); none by default.

        :meth:`backward` gives the loss's gradient with respect to each.
        """
        return {}

    def parameter_notation(self, name: str) -> Notation:
        """How the parameter ``name`` is written: ``gamma`` as γ, ``W_Q`` as W_Q; its
        title is what a lecturer calls it ("the query weights")."""
        title = parameter_title(name)
        greek = {"gamma": (r"\gamma", "γ"), "beta": (r"\beta", "β")}.get(name)
        if greek is not None:
            return Notation(*greek, title)
        return named(name, title)

    def for_graph(self, g: Any, rename: Callable[[str], str]) -> Operation:
        """This operation in another derivation ``g`` whose stages are this one's renamed
        by ``rename`` (a training step's copy: ``logits`` -> ``step1.logits``).  Only an
        operation that reads a graph itself (the exact argmax's tie prover) changes."""
        return self

    def staged(self) -> Operation | None:
        """This operation with its weights read from stages instead of constants.

        The same operation with ``from_stages`` set (one class: a weight is a constant
        or read from a stage): its inputs are this operation's inputs followed by one
        stage per entry of :meth:`parameters` (in that order), so a training step's
        updated weights (exact, no longer rational) are stage symbols in its local
        formula.  It declares no equation, parameters or facts of its own.  None: no
        such form (``train`` keeps these weights as they are), or already read from
        stages.
        """
        return None

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows | None:
        """The vector-Jacobian product: d loss / d (input ``wrt``, or parameter ``wrt``).

        ``args`` are the input stages, ``out`` this stage and ``grad`` = d loss / d out,
        each a list of rows; ``num`` is the arithmetic they are in (exact SymPy over
        stage symbols, balls or floats: :mod:`symformer.ops.calculus`), so the rule is
        written once and gives the exact local formula, the certified value and the
        float reference alike.  Returns a list of rows shaped like the input (or the
        parameter; the embedding table's gradient has only the rows used).  Operations
        without a rule (the argmax) raise :class:`NotSupportedError`.
        """
        raise NotSupportedError(f"the operation {self.name!r} has no backward rule "
                                f"(it is not differentiable)")

    def backward_entry(self, args: Sequence[sympy.Matrix], out: sympy.Matrix,
                       grad: sympy.Matrix, wrt: int | str, i: int, j: int
                       ) -> sympy.Expr | None:
        """Entry (i, j) of :meth:`backward`'s exact rule alone (arguments as SymPy
        matrices of stage symbols), the same expression as the whole rule's entry: a
        proof that unfolds a few entries of a large gradient stage builds only those.
        None (the default): no cheaper way than the whole rule."""
        return None

    def backward_facts(self, gradient: Stage, part: Part) -> list[Fact]:
        """The identities ``prove`` states about this operation's backward rule.

        ``gradient`` is a gradient stage (:mod:`symformer.ops.gradient`) and ``part``
        this rule's contribution to it: ``part.consumer`` is the stage of this
        operation, differentiated by input (or parameter) ``part.wrt``, and
        ``part.formula`` the contribution's local formula (the whole of
        ``gradient``'s when the input has no other consumer).  None by default; a
        softmax states that the rows of its input gradient sum to 0.
        """
        return []

    def backward_denominators(self, wrt: int | str, row: int) -> list[tuple[int, int, int]]:
        """Entries (input, row, column) that the backward rule for ``wrt`` divides by, at
        gradient row ``row``, and that may be 0 (none by default: the rules divide only by
        what the forward pass divides by)."""
        return []

    def backward_undefined(self, stage: Stage, row: int) -> Exception:
        """The error for a gradient row whose rule divides by an entry exactly 0."""
        return undefined_error(stage, row, f"the {self.name} rule divides by 0 there "
                                           f"(no derivative)")

    def backward_function(self, wrt: int | str) -> Callable[..., Any] | None:
        """The NumPy vector-Jacobian product for input ``wrt`` (or parameter ``wrt``).

        Written from the textbook formula in matrix form (``softmax_backward(alpha, g)
        = alpha * (g - sum(alpha * g))``), independently of :meth:`backward`'s row
        arithmetic: ``crosscheck`` runs it as the float64 backward reference (the
        displayed rule is :meth:`backward_equation`).  None: the operation has no
        float backward reference yet.
        """
        return None

    def backward_arguments(self, wrt: int | str, args: Sequence[np.ndarray], out: np.ndarray,
                           grad: np.ndarray, dtype: type) -> Sequence[Any]:
        """The arguments :meth:`backward_function` is called with for ``wrt``: chosen
        from the inputs' floats ``args``, this stage's ``out``, ``grad`` = dL/d out,
        and this step's own constants as ``dtype``."""
        raise NotImplementedError(f"{self.name}: no backward arguments for {wrt!r}")

    def backward_reference(self, wrt: int | str, args: Sequence[np.ndarray], out: np.ndarray,
                           grad: np.ndarray, dtype: type = np.float64) -> np.ndarray | None:
        """The float backward reference: :meth:`backward_function` on its arguments."""
        function = self.backward_function(wrt)
        if function is None:
            return None
        result = function(*self.backward_arguments(wrt, args, out, grad, dtype))
        return np.asarray(result).astype(dtype, copy=False)


#: The block part of each ``role`` (see :attr:`Operation.part_of_block`).
ROLE_PARTS = {"queries": "head", "keys": "head", "values": "head", "heads": "heads",
              "ffn_hidden": "ffn", "ffn_gate": "ffn", "ffn_output": "ffn", "transform": "ffn",
              "logits": "output", "regression": "output", "input": "input"}


@dataclass(frozen=True)
class WorkedPart:
    """A part of a row's formulas shown as its own worked step (a softmax's Σ).

    ``expr`` is a sub-expression of the row's local formulas; with ``termwise`` each
    of its terms is evaluated (and rounded) first, and the entries then read those
    rounded terms.
    """

    notation: Notation
    expr: sympy.Expr
    termwise: bool = False


def undefined_error(stage: Stage, row: int, why: str) -> InputError:
    """``STAGE: row i ('token') is undefined: WHY`` -- the error of a row that divides by 0."""
    token = stage.rows[row] if row < len(stage.rows) else str(row)
    return InputError(f"{stage.name}: row {row} ({token!r}) is undefined: {why}")


#: What a lecturer calls each named weight (the titles of their gradients' sections):
#: words, never the identifier (``W_O``), which the symbol beside them already shows.
PARAMETER_TITLES = {
    "W_Q": "the query weights", "W_K": "the key weights", "W_V": "the value weights",
    "b_Q": "the query bias", "b_K": "the key bias", "b_V": "the value bias",
    "W_O": "the output projection", "b_O": "the bias of the output projection",
    "W_1": "the first feed-forward weights", "b_1": "the first feed-forward bias",
    "W_2": "the second feed-forward weights", "b_2": "the second feed-forward bias",
    "W_gate": "the gate weights", "b_gate": "the gate bias",
    "W_router": "the router weights",
    "W_vocab": "the vocabulary projection", "b_vocab": "the vocabulary bias",
    "gamma": "the scale of the normalisation", "beta": "the shift of the normalisation",
}


def parameter_title(name: str) -> str:
    """A weight's name in words (``W_1``: "the first feed-forward weights"); an
    unknown name is called a weight (``W_x``: "a weight")."""
    if name in PARAMETER_TITLES:
        return PARAMETER_TITLES[name]
    return "a bias" if name.startswith("b_") else "a weight"
