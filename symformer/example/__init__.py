"""Example files: the exact numbers, the schema, the TOML loader and the built-in example."""

from symformer.example.loader import builtin_text, load_example, parse_example
from symformer.example.schema import Example, Head, Layer

__all__ = ["Example", "Head", "Layer", "builtin_text", "load_example", "parse_example"]
