"""The operations a Transformer is composed of: one module each, owning everything about it.

See :mod:`symformer.ops.base` for what an operation provides, and
``docs/architecture.md`` for how to add one.
"""

from symformer.notation_types import Notation
from symformer.ops.adam import AdamMoment, AdamStep
from symformer.ops.add import Add
from symformer.ops.alibi import ALiBi
from symformer.ops.argmax import ArgmaxIndicator
from symformer.ops.base import OPERATIONS, Operation
from symformer.ops.binary_cross_entropy import (
    BinaryCrossEntropy,
    PositionBinaryCrossEntropy,
)
from symformer.ops.concat import Concat
from symformer.ops.decoding_ban import BanTokens
from symformer.ops.decoding_cache import AppendRow
from symformer.ops.decoding_draw import Cumulative, Draw
from symformer.ops.decoding_greedy import GreedyChoice
from symformer.ops.decoding_kept import Kept
from symformer.ops.decoding_min_p import RatioToTop
from symformer.ops.decoding_penalty import RepetitionPenalty
from symformer.ops.decoding_renormalize import Renormalize
from symformer.ops.decoding_temperature import Temperature
from symformer.ops.decoding_top_k import RankAbove
from symformer.ops.decoding_top_p import MassAbove, NucleusMass
from symformer.ops.dot_products import DotProducts
from symformer.ops.dot_scores import DotScores
from symformer.ops.dropout import Dropout
from symformer.ops.embedding import Embedding
from symformer.ops.gated import GatedProduct
from symformer.ops.gelu import GELU
from symformer.ops.gelu_tanh import GELUTanh
from symformer.ops.gradient import Gradient, Seed, Term
from symformer.ops.identity import Identity
from symformer.ops.learned_positional import LearnedPositional
from symformer.ops.loss import (
    CrossEntropy,
    MeanSquaredError,
    PositionSquaredError,
    UpstreamGradient,
)
from symformer.ops.mean import RowMean
from symformer.ops.moe import ExpertMask, Gates, MixtureSum, RoutingMargin
from symformer.ops.normalize import Normalize
from symformer.ops.objective import Objective
from symformer.ops.parameter import Parameter
from symformer.ops.pooling import Pool
from symformer.ops.position_losses import PositionCrossEntropy, PositionSquaredErrors
from symformer.ops.positional import PositionalEncoding, positional_encoding
from symformer.ops.projection import Projection
from symformer.ops.relu import ReLU
from symformer.ops.rms_norm import RMSNormalize, RowMeanSquare
from symformer.ops.rope import RoPE
from symformer.ops.scale_mask import ScaleMask
from symformer.ops.sgd import SgdStep
from symformer.ops.side_terms import AdamPart, ConstantTable, Exponentials, ExpSums, Squares
from symformer.ops.sigmoid import Sigmoid
from symformer.ops.silu import SiLU
from symformer.ops.softmax import Softmax
from symformer.ops.softmax_jacobian import SoftmaxJacobian
from symformer.ops.std_dev import StdDev
from symformer.ops.table_sum import TableSum
from symformer.ops.transpose import Transpose
from symformer.ops.variance import RowVariance
from symformer.ops.weighted_sum import WeightedSum
from symformer.ops.whole_matrix import WholeMean, WholeVariance

__all__ = [
    "ALiBi", "AdamMoment", "AppendRow", "BanTokens", "Cumulative", "Draw", "GreedyChoice",
    "Dropout", "ExpertMask", "Gates", "MixtureSum", "RoutingMargin",
    "Kept", "MassAbove", "NucleusMass", "RankAbove", "RatioToTop", "Renormalize",
    "RepetitionPenalty", "Temperature", "AdamPart", "AdamStep", "Add", "ArgmaxIndicator",
    "BinaryCrossEntropy", "Concat",
    "ConstantTable", "CrossEntropy", "ExpSums", "Exponentials", "Squares",
    "DotProducts", "DotScores", "Embedding", "GELU", "GELUTanh", "GatedProduct", "Gradient",
    "Identity",
    "LearnedPositional", "MeanSquaredError", "Normalize", "Notation", "OPERATIONS",
    "Objective", "Operation", "Parameter", "Pool", "PositionBinaryCrossEntropy",
    "PositionCrossEntropy", "PositionSquaredError",
    "PositionSquaredErrors", "PositionalEncoding", "Projection",
    "RMSNormalize", "ReLU", "RoPE", "RowMean", "RowMeanSquare", "RowVariance", "ScaleMask",
    "Seed", "SgdStep", "SiLU", "Sigmoid", "Softmax", "SoftmaxJacobian", "StdDev", "TableSum",
    "Term",
    "Transpose", "UpstreamGradient", "WeightedSum", "WholeMean", "WholeVariance",
    "positional_encoding",
]
