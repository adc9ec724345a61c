"""Blocks as short compositions of operations: the encoder, the decoder, generation."""

from symformer.blocks.encoder import derive
from symformer.blocks.generate import Step, generate
from symformer.blocks.work import DEFAULT_MAX_WORK, check_size, estimated_work

__all__ = ["DEFAULT_MAX_WORK", "Step", "check_size", "derive", "estimated_work", "generate"]
