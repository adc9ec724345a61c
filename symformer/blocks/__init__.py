"""Blocks as short compositions of operations: the encoder, the decoder, generation."""

from symformer.blocks.encoder import DEFAULT_MAX_WORK, check_size, derive, estimated_work
from symformer.blocks.generate import Step, generate

__all__ = ["DEFAULT_MAX_WORK", "Step", "check_size", "derive", "estimated_work", "generate"]
