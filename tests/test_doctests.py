"""The examples in docstrings run as written."""

from __future__ import annotations

import doctest

import pytest

import symformer
import symformer.documents
import symformer.example.literals


@pytest.mark.parametrize("module", [symformer, symformer.documents, symformer.example.literals])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
