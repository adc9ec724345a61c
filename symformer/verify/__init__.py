"""Verification: claims checked against certified values, float cross-checks, identities.

* :mod:`~symformer.verify.claims` reads an author's claimed numbers;
* :mod:`~symformer.verify.check` decides them and explains the wrong ones;
* :mod:`~symformer.verify.chain` recomputes steps from printed or rounded values
  (and :func:`~symformer.verify.chain.reader_rounding` for ``derive``);
* :mod:`~symformer.verify.crosscheck` compares the NumPy reference with the exact values;
* :mod:`~symformer.verify.prove` proves the identities lecture notes state.
"""
