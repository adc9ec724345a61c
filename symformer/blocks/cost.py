"""What each command costs, estimated from the example's shapes and the options alone.

One function per command, in *operations*: units of about 2 µs of CPU on the
project's machine, so that the default limit (:data:`~symformer.blocks.work.
DEFAULT_MAX_WORK`, 5,000,000) is about 10 s.  The constants below were measured
(process CPU time, user + sys) with ``benchmarks/bench_estimate.py``, which prints
estimate against measured CPU for every command on every shipped example and on
imported GPT-2 and Llama models 32 to 768 wide (within 1/2 and 2 there);
``tests/test_work_estimate.py`` keeps a sample within a looser band.

The estimates are built from a few counts of the example (:class:`Shape`):

* ``forward``: multiply-adds of one forward pass (ball arithmetic; cheap per term);
* ``formulas``: terms of every stage's local SymPy formulas, with each softmax row
  brought over a common denominator (n² per row of n keys) and each LayerNorm row's
  squared deviations (d² per row): what tables, equations, worked lines, proofs and
  substitutions cost (SymPy, expensive per term);
* ``entries``: numbers printed over all stages;
* ``cells``: cells of the attention maps (each a patch and a written value in a
  figure);
* ``figures``: how many figures ``symformer figures`` draws;
* ``products``/``weights``: whole-matrix products (``arb_mat``: cheap per term, but a
  formula term that reads a float32 weight is expensive to render) and the weights
  made balls;
* ``sublayers``, ``bar_pairs``: what the inactive analysis examines, and the bar
  charts' label placement (quadratic in a chart's bars).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from symformer.blocks.work import PER_SECOND, estimated_work, weight_products
from symformer.example.decoding import Decoding
from symformer.example.schema import Example

__all__ = ["EXERCISE_START", "PER_SECOND", "Shape", "derivation_work", "estimate", "shape"]
#: Starting a command: Python, the imports, parsing the example, the graph (0.6 s).
_START = 300_000
#: Importing what a command that writes formulas needs (SymPy, the notation, the
#: rules): ``trace``.
_SYMPY = 250_000
#: A forward pass's multiply-add in ball arithmetic, and one printed number.
_FORWARD = 2
_ENTRY = 5
#: A multiply-add of a product with constant weights (one ``arb_mat`` product of a
#: whole stage: about 10 ns), and one weight made a ball (NumPy's exponents, python-
#: flint's integer matrix: about 0.3 µs); measured on GPT-2 configurations 256 and 768
#: wide, 8 tokens (2026-12-04).
_PRODUCT = 0.005
_WEIGHT = 0.15
#: A greedy step (``generate``: its graph, the certified argmax) and its multiply-add
#: (the products with constant weights at ``_PRODUCT``).
_STEP_START = 5_000
_STEP = 1
#: Of a step: the share of the weights made balls again, and one vocabulary entry of
#: the certified argmax.
_STEP_WEIGHTS = 0.3
_ARGMAX = 80
#: A decoding rule's decisions (temperature, top-k, top-p, min-p, a draw): a step's
#: stages and notes, then per pair of vocabulary entries (their certified order, the
#: masses above each, the margins printed); measured on imported GPT-2s of 50 to 1,000
#: tokens (2026-12-07).
_DECISION = 20_000
_DECISION_PAIR = 5
#: ``check`` on a generation run's stages: a step's stages renamed into the run's
#: derivation (each operation rebuilt for the run's graph), per formula term; measured
#: with ``check`` on ``step4.*`` claims against ``generate`` alone on imported GPT-2s
#: 64 and 256 wide, vocabulary 1,000 (2026-12-07).
_RUN_STAGE = 0.1
#: ``generate --kv-cache``: the proof cached = uncached, per step but the last (its
#: stages walked) and per printed entry of those steps (a row-local stage's rows are
#: proved by structure, a dictionary look-up an entry; attention's by formula);
#: measured on the shipped decoders and imported GPT-2s 64 and 256 wide, vocabulary
#: 100 to 1,000, 4 to 8 tokens (2026-12-07: 0.7 to 2 times the estimate).
_KV_PROOF_STEP = 150_000
_KV_PROOF = 40
#: Rendering's start (SymPy, the notation, the templates), one term of a stage-local
#: SymPy formula built and substituted (tables' exact values, equations, worked
#: lines), and one rendered number.
_RENDER_START = 350_000
_FORMULA = 30
#: A formula term of a whole-matrix product (measured: `export --format json` of an
#: imported 32-wide GPT-2, vocabulary 100, 8 tokens: 50 s of CPU for 128,000 terms).
_FORMULA_PRODUCT = 180
_RENDER_ENTRY = 100
#: The inactive analysis's decisions, one a head or sub-layer (its ball checks and a
#: few exact proofs: about 10 ms).
_INACTIVE = 5_000
#: One formula term of ``trace`` (one token's formulas, each substituted once).
_TRACE_FORMULA = 15
#: One product term of ``trace`` (measured: an imported 32-wide GPT-2, vocabulary 100,
#: 8 tokens: 11 s of CPU for 128,000 terms).
_TRACE_PRODUCT = 40
#: --reader-rounding: each stage again from the rounded ones, per multiply-add, after
#: its start (SymPy's rationals).
_READER_START = 300_000
_READER = 60
#: matplotlib's start, one figure drawn with it (svg, png, pdf), one attention-map
#: cell (a patch and its written value).
_MATPLOTLIB = 500_000
_MPL_FIGURE = 100_000
_MPL_CELL = 3_000
#: The TikZ figures' start (their values), a figure and one of its cells (text only).
_TIKZ_START = 200_000
_TIKZ_FIGURE = 5_000
_TIKZ_CELL = 100
#: A pair of bars whose labels are kept apart (measured: 27 s of CPU for 8 charts of
#: 1,000 bars, an imported GPT-2's next-token probabilities; 2026-12-07).
_BAR_PAIR = 1.7
#: The NumPy reference of ``crosscheck`` (its import and float pass).
_REFERENCE = 200_000
#: ``crosscheck``'s exact values in forward passes: one evaluation (at the precision
#: the next token is decided at) and each entry compared with its float; measured on
#: GPT-2 and Llama configurations 64 to 768 wide and the shipped examples (2026-12-07).
_COMPARED = 1.25
#: ``crosscheck DIR``: importing torch and transformers and loading the model.
_MODEL_LOAD = 2_500_000
#: ``prove``'s start (SymPy, the facts' rules) and one term of the formulas it proves
#: facts of (softmax rows, LayerNorm rows, the mask's zeros).
_PROOF_START = 150_000
_PROOF = 125
#: One claim checked (its stage located, its numbers rounded and compared), after
#: ``check``'s start (the alternative conventions' rules, the explanations).
_CLAIM = 3_500
_CHECK_START = 200_000
#: A character of a claimed equation's LaTeX, read and evaluated, and per entry of a
#: sentence's row by d_model (measured: a 330-link chain, 2,000 characters, 2.5 s of
#: CPU on the built-in example; 2026-12-07).
_EQUATION_CHAR = 300
_EQUATION_CHAR_ENTRY = 20
#: ``exercise``'s start (the template derived, the sheets' rendering imported), before
#: its draws and each variant's sheets (:mod:`symformer.exercise.generate`'s own
#: per-draw and per-variant costs, in these operations).
EXERCISE_START = _START + 300_000
#: ``grade``'s start (the key, the grader's rules) and each answer file graded (its
#: entries' verdicts, follow-through proofs and feedback).
_GRADE_START = 150_000
_GRADE_FILE = 20_000
#: The backward pass's start (the loss, its SymPy rules) and its cost in forward
#: passes (gradients of every stage and weight).
_BACKWARD_START = 250_000
_BACKWARD = 6


@dataclass(frozen=True)
class Shape:
    """The counts a command's cost grows with (see the module's docstring)."""

    forward: int
    formulas: int
    #: Of ``forward``: the products with constant weights, and the weights they read.
    products: int
    weights: int
    entries: int
    cells: int
    figures: int
    #: Attention heads and sub-layers (residual and norm), each examined by the header's
    #: analysis of what the example leaves inactive (:mod:`symformer.analysis.inactive`).
    sublayers: int = 0
    #: The bar charts' bars, squared and summed (each LayerNorm's input and output over
    #: d_model, each position's next-token probabilities over the vocabulary): their
    #: value labels are placed clear of every other bar and label, pair by pair
    #: (:func:`symformer.figures.layout.place_labels`).
    bar_pairs: int = 0


def shape(example: Example) -> Shape:
    """The counts of ``example``, from its shapes alone (nothing is derived)."""
    n, d = len(example.tokens), example.d_model
    forward = estimated_work(example)
    # figures: the positional encoding's and the block diagram
    formulas, entries, cells, figures = forward, 3 * n * d, 0, 2
    if example.attention is not None:  # given Q, K, V: one head's stages
        m = example.attention.K.rows
        formulas += n * m * m
        entries += m * (d + example.attention.V.cols) + 4 * n * m
        cells, figures = n * m, 3
    for layer in example.layers:
        heads = len(layer.heads)
        formulas += heads * n ** 3 + 2 * n * d * d
        entries += sum(n * (2 * h.d_k + 2 * h.d_v) + 3 * n * n for h in layer.heads)
        entries += n * (6 * d + 2 * layer.d_ff + 8)
        cells += heads * n * n
        figures += heads + 2
    norms = [layer.layer_norm for layer in example.layers if layer.norm != "none"] * 2
    norms += [f.layer_norm for f in (example.final_norm, example.embedding_norm) if f]
    if example.lm_head is not None:
        entries += 2 * n * len(example.vocab)
        figures += n - 1  # one figure a position (and the norm's, counted above)
    bars = n * len(example.vocab) ** 2 if example.lm_head is not None else 0
    if example.decoder is not None:
        dec = example.decoder
        m = len(dec.tokens)
        entries += 3 * m * d
        for layer in dec.layers:
            for heads, keys in ((layer.self_heads, m), (layer.cross_heads, n)):
                formulas += len(heads) * m * keys * keys
                entries += sum(m * (h.d_k + 2 * h.d_v) + keys * (h.d_k + h.d_v)
                               + 3 * m * keys for h in heads)
                cells += len(heads) * m * keys
                figures += len(heads)
            formulas += 3 * m * d * d
            entries += m * (9 * d + 2 * layer.d_ff + 12)
            figures += 3
            norms += [layer.layer_norm] * 3 if layer.norm != "none" else []
        if dec.W_vocab is not None:
            entries += 2 * m * len(dec.vocab)
            figures += m
            bars += m * len(dec.vocab) ** 2
    bars += sum((2 * d) ** 2 for kind in norms if kind != "rms")  # RMSNorm: not drawn
    extra = _lesson_entries(example)  # [stages]: Jacobians, dot-product terms, ...
    products, weights = weight_products(example)
    sublayers = sum(len(layer.heads) + 2 for layer in example.layers)
    if example.decoder is not None:
        sublayers += sum(len(layer.self_heads) + len(layer.cross_heads) + 3
                         for layer in example.decoder.layers)
    return Shape(forward + extra, formulas + extra, products, weights, entries + extra, cells,
                 figures, sublayers, bars)


def _lesson_entries(example: Example) -> int:
    """Entries of the stages an example's ``[stages]`` asks for, bounded from above
    (a Jacobian row is at most k x k, k the longest row of a softmax; a query's products
    at most keys x d_model; LayerNorm moments 2 per row of each norm)."""
    asked = example.stages
    if asked is None:
        return 0
    rows = max(len(example.tokens), len(example.decoder.tokens) if example.decoder else 0)
    vocab = max(len(example.vocab), len(example.decoder.vocab) if example.decoder else 0)
    k = max(rows, vocab if example.lm_head or example.decoder else 0)
    width = max((example.d_model, *(h.d_k for layer in example.layers for h in layer.heads)))
    if example.attention is not None:  # given Q, K, V: as many keys as K has rows
        k = rows = max(rows, example.attention.K.rows)
    count = sum((rows if r.row is None else 1) * k * k for r in asked.jacobian)
    count += sum((rows if r.row is None else 1) * rows * width for r in asked.products)
    norms = 2 * len(example.layers) + 1 + (3 * len(example.decoder.layers)
                                            if example.decoder else 0)
    return count + (4 * rows * norms if asked.output_moments else 0) + rows


def _derived(s: Shape, passes: float = 1) -> int:
    """Deriving the example ``passes`` times and printing every stage once."""
    forward = _FORWARD * (s.forward - s.products) + _PRODUCT * s.products + _WEIGHT * s.weights
    return int(_START + passes * forward + _ENTRY * s.entries)


def _inactive(s: Shape) -> int:
    """The header's analysis of what the example leaves inactive (``derive``,
    ``backward``, the notes): a head's pattern, a sub-layer's identity, decided once
    each.  A simple term: the analysis's own bound (its exact proofs, e.g. a
    near-identity at eps = 1e-100) is :mod:`symformer.analysis.inactive`'s."""
    return _INACTIVE * s.sublayers


def derivation_work(example: Example) -> int:
    """Deriving ``example`` once, nothing printed (the Python API's :func:`~symformer.
    blocks.encoder.derive`: what it checks against ``max_work``)."""
    s = shape(example)
    return _derived(s) - _START - _ENTRY * s.entries


def derive_work(example: Example, *, reader_rounding: bool = False,
                gradients: bool = False, shown: float = 1.0) -> int:
    """``derive``: a forward pass and its tables (--reader-rounding: every stage again
    from rounded ones); the backward pass too when gradients are asked for.  ``shown``:
    the share of the entries printed (a slice: ``--positions``, ``--heads``, ``--dims``;
    ``example`` is then the sentence the slice reads, :mod:`symformer.blocks.slices`)."""
    s = shape(example)
    s = replace(s, entries=int(s.entries * min(1.0, max(0.0, shown))))
    work = _derived(s) + _inactive(s) + (_READER_START + _READER * s.forward
                                         if reader_rounding else 0)
    return work + (backward_work(example) - _START if gradients else 0)


def crosscheck_work(example: Example, model: bool = False) -> int:
    """``crosscheck``: the derivation and a float pass compared entry by entry (the
    NumPy reference; ``model``: the user's model directory, loaded by transformers and
    run with hooks, :func:`model_load_work`)."""
    if model:
        return _derived(shape(example)) + model_load_work()
    return _derived(shape(example), _COMPARED) + _REFERENCE


def model_load_work() -> int:
    """Loading a model directory with transformers (its import, the model built)."""
    return _MODEL_LOAD


def prompts_work(examples: list[Example], loads: int = 1) -> int:
    """``crosscheck DIR --prompts``: each prompt's derivation and comparison (a task:
    no start of its own), the model loaded ``loads`` times (once a process)."""
    tasks = sum(prompt_work(e) for e in examples)
    return _START + loads * _MODEL_LOAD + tasks


def prompt_work(example: Example) -> int:
    """One prompt's task of ``crosscheck DIR --prompts`` in a process that has loaded
    the model: its derivation and its comparison."""
    return _derived(shape(example)) - _START


def generate_work(example: Example, steps: int, kv_cache: bool = False,
                  decoding: Decoding | None = None) -> int:
    """``generate --steps N``: a forward pass per greedy step, each one token longer (the
    target, or a language model's own sentence): its products, part of its weights
    made balls again (the longer sentence is a new example), the next token's certified
    argmax over the vocabulary (measured on imported GPT-2 and Llama models 64 to 768
    wide: a flat distribution, every probability about 1/1000, costs the most).
    ``decoding`` (default: the example's ``[decoding]``): a rule's decisions each step;
    ``kv_cache``: the proof that the cached run equals the uncached one."""
    if example.lm_head is not None and example.positional_embeddings is not None:
        # it stops when the learned positional table has no row for another token
        steps = min(steps, example.positional_embeddings.rows - len(example.tokens) + 1)
    grown = [shape(_grown(example, k)) for k in range(steps)]
    vocab = len(example.vocab if example.lm_head is not None or example.decoder is None
                else example.decoder.vocab)
    rule = decoding if decoding is not None else example.decoding
    decided = _decisions(rule, vocab) * steps
    proof = sum(_KV_PROOF_STEP + _KV_PROOF * s.entries for s in grown[:-1]) if kv_cache \
        else 0
    return int(_START + _WEIGHT * shape(example).weights + decided + proof
               + sum(_STEP_START + _STEP * (s.forward - s.products) + _PRODUCT * s.products
                     + _STEP_WEIGHTS * _WEIGHT * s.weights + _ARGMAX * vocab for s in grown))


def _decisions(rule: Decoding | None, vocab: int) -> int:
    """One step's decisions under a decoding rule that warps or samples (each pair of
    tokens ordered exactly, the masses and margins): 0 for greedy, a penalty or bans."""
    if rule is None or not (rule.sampling or any(
            x is not None for x in (rule.temperature, rule.top_k, rule.top_p, rule.min_p))):
        return 0
    return _DECISION + _DECISION_PAIR * vocab * vocab


def _grown(example: Example, k: int) -> Example:
    """``example`` after ``k`` greedy steps (only its shapes matter here)."""
    if not k:
        return example
    if example.decoder is not None and example.lm_head is None:
        decoder = replace(example.decoder, tokens=example.decoder.tokens + ("",) * k)
        return replace(example, decoder=decoder)
    return replace(example, tokens=example.tokens + ("",) * k)


def backward_work(example: Example, steps: int = 0) -> int:
    """``backward`` (``steps`` = 0) or ``train --steps N``: a forward and a backward pass
    per step, and the final one."""
    s = shape(example)
    one = (1 + _BACKWARD) * _FORWARD * s.forward + 2 * _ENTRY * s.entries
    return _START + _BACKWARD_START + _inactive(s) + (steps + 1) * one


def fill_work(example: Example) -> int:
    """``fill``: the derivation and the template's values (a template is bounded in
    tags, steps and output by :mod:`symformer.fill`: its rendering is a constant)."""
    return _derived(shape(example))


def render_work(example: Example, *, formulas: float = 1) -> int:
    """Tables, equations and worked lines of every stage (``export``, ``slides``,
    ``fill``): every stage's formulas built and substituted, every number printed.
    ``formulas`` scales the formula part (``export --exact``: closed forms too)."""
    s = shape(example)
    return int(_derived(s) + _inactive(s) + _RENDER_START + formulas * _formulas(s)
               + _RENDER_ENTRY * s.entries)


def _formulas(s: Shape) -> float:
    """Building and substituting every stage's SymPy formulas: a product's term reads a
    weight (an imported model's a float32 weight, p/2^k with k about 30: SymPy's
    rationals cost more), the others (softmax, LayerNorm) computed values."""
    return _FORMULA * (s.formulas - s.products) + _FORMULA_PRODUCT * s.products


def figures_work(example: Example, fmt: str = "tikz") -> int:
    """``figures --format FMT``: the derivation and each figure (matplotlib for svg, png,
    pdf: expensive per figure and per attention-map cell)."""
    s = shape(example)
    if fmt == "tikz":
        drawing = _TIKZ_START + _tikz(s)
    else:
        drawing = _MATPLOTLIB + s.figures * _MPL_FIGURE + s.cells * _MPL_CELL + _bars(s)
    return _derived(s) + drawing


def export_work(example: Example, *, figures: bool = False, steps: int = 0,
                exact: bool = False) -> int:
    """``export``: every stage rendered (:func:`render_work`; LaTeX, Markdown and JSON
    cost about the same, measured), the TikZ figures with --figures, the greedy steps
    with --steps."""
    work = render_work(example, formulas=2 if exact else 1) + _decoding_part(example, steps)
    if figures:
        work += _tikz(shape(example))
    if steps:
        work += generate_work(example, steps) - _START
    return work


def slides_work(example: Example) -> int:
    """``slides``: every stage rendered, three overlays each, and the TikZ figures."""
    return render_work(example) + _tikz(shape(example)) + _decoding_part(example)


def _decoding_part(example: Example, steps: int = 0) -> int:
    """The notes' and slides' decoding sections (an example with ``[decoding]``): its
    rule's run (``[decoding] steps``, else ``steps``, else 3) and the cache's proof."""
    rule = example.decoding
    if rule is None:
        return 0
    return generate_work(example, steps or rule.steps or 3, kv_cache=True) - _START


def _tikz(s: Shape) -> int:
    """The TikZ figures of a document that renders its stages anyway (its start is
    rendering's)."""
    return s.figures * _TIKZ_FIGURE + s.cells * _TIKZ_CELL + _bars(s)


def _bars(s: Shape) -> int:
    """Placing the bar charts' value labels (quadratic in a chart's bars)."""
    return int(_BAR_PAIR * s.bar_pairs)


def prove_work(example: Example) -> int:
    """``prove``: exact proofs on every stage's formulas, with and without the mask;
    with a [loss], on the gradients' too (a backward pass each way)."""
    s = shape(example)
    work = _derived(s, 2) + _PROOF_START + 2 * _PROOF * s.formulas
    if example.loss is not None:
        work += backward_work(example, steps=1) - _START + 2 * _PROOF * s.formulas
    return work


def trace_work(example: Example, *, backward: bool = False) -> int:
    """``trace``: one token's formulas and substitutions through every stage (the
    backward pass's too with --backward)."""
    s = shape(example)
    work = int(_derived(s) + _SYMPY + _TRACE_FORMULA * (s.formulas - s.products)
               + _TRACE_PRODUCT * s.products)
    return work + (backward_work(example) - _START if backward else 0)


def check_work(example: Example, claims: int = 0, numbers: int = 0, gradients: bool = False,
               train_steps: int | None = None, equations: int = 0,
               random_examples: int = 0, equation_chars: int = 0,
               generated_steps: int = 0, decoding: Decoding | None = None) -> int:
    """``check``: the derivation and the other conventions that might explain a wrong
    number, then each claim (located, rounded, compared) and each claimed number; with
    claims on gradients, a backward pass under the example's conventions and each
    alternative one (5); with claims on a training run of ``train_steps`` steps, the run
    twice (the check and reader rounding).  ``equations`` claimed equations: each
    evaluated at every entry of the example, of its variants and of
    ``random_examples`` random examples (each a forward and backward pass, derived once
    for all equations), up to three precisions each; and each character of their LaTeX
    (``equation_chars``: a chain's links, a sum's terms, a definition's uses are each
    read and evaluated, more of them the longer the text).  ``generated_steps``: claims
    on a generation run's stages (``step2.kept``, ``step2.layer1.head1.K_cache``) under
    ``decoding`` (default: the example's ``[decoding]``): the run generated that many
    steps, then every step's stages gathered into one derivation and evaluated
    (:func:`generation_run_work`)."""
    s = shape(example)
    work = _derived(s, 6) + _CHECK_START + claims * _CLAIM + numbers * _ENTRY
    if equations:  # the backward pass's start once; each random example's own passes
        one = backward_work(example) - _START - _BACKWARD_START
        work += _BACKWARD_START + random_examples * one + equations * (
            1 + random_examples + 5) * (_CLAIM + 3 * _ENTRY * s.entries)
    n, d = len(example.tokens), example.d_model
    work += equation_chars * (_EQUATION_CHAR + _EQUATION_CHAR_ENTRY * n * d)
    if gradients:
        work += 5 * (backward_work(example) - _START)
    if train_steps is not None:
        work += 2 * (backward_work(example, train_steps) - _START)
    if generated_steps:
        work += generation_run_work(example, generated_steps, decoding) - _START
    return work


def generation_run_work(example: Example, steps: int, decoding: Decoding | None = None
                        ) -> int:
    """The generation run ``check`` judges claims on ``stepT.*`` against
    (:func:`symformer.blocks.generate.generation_run`): ``steps`` steps generated
    (:func:`generate_work`, the rule's decisions included), then every step's stages
    renamed into one derivation with the KV cache's stages and evaluated once more at
    the precision claims are judged at (a forward pass of each step's sentence)."""
    grown = [shape(_grown(example, k)) for k in range(steps)]
    gathered = sum(_RUN_STAGE * s.formulas + _FORWARD * (s.forward - s.products)
                   + _PRODUCT * s.products + _WEIGHT * s.weights for s in grown)
    return int(generate_work(example, steps, decoding=decoding) + gathered)


def grade_work(example: Example, variants: int, files: int) -> int:
    """``grade``: each variant (``example`` the first) derived once, each answer file
    graded."""
    return _START + _GRADE_START + variants * derivation_work(example) + files * _GRADE_FILE


#: The estimate of each command, by name.
ESTIMATES = {"derive": derive_work, "crosscheck": crosscheck_work, "generate": generate_work,
             "backward": backward_work, "train": backward_work, "export": export_work,
             "slides": slides_work, "fill": fill_work, "figures": figures_work,
             "prove": prove_work, "trace": trace_work, "check": check_work,
             "grade": grade_work}


def estimate(command: str, example: Example, **options: object) -> int:
    """The operations ``symformer COMMAND`` will do on ``example`` with ``options``
    (the keyword arguments of that command's function above)."""
    return ESTIMATES[command](example, **options)
