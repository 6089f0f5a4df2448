"""CMBC's prior knowledge as negative patterns: known clusterings and negative
features (Gondek, Vaithyanathan & Garg 2005, section 3) become one pattern
code per row, and one counting pass over (pattern, positive feature) pairs
gives the pattern probabilities (A.5) and the constants of Appendix B
(:func:`infoclust_dask.objectives.cmbc.pattern_model`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import engine
from .._inputs import encode_labels, open_input
from ..kernels.cmbc import CMBC_PATTERNS
from ..kernels.stats import LABEL_VALUES
from ..objectives import cmbc as obj

#: fewer rows per distinct negative pattern than this (on average) leave most
#: patterns with a single row: the pattern probabilities (A.5), and the bounds
#: built on them, are then indicators of single rows, not estimates. The
#: paper's own session 3 with negative features (8 bits) has ~225 patterns for
#: 1000 rows (4.4 per pattern) and still works (docs/RESULTS.md, Table 3).
MIN_ROWS_PER_PATTERN = 2


def patterns(Y_minus: Any, known: Any, n: int) -> tuple[Any, int]:
    """The negative pattern of every row (codes 0..P-1, numpy or lazy) and P."""
    keys = []
    if known is not None:
        cols = known_columns(known, n)
        for col in cols:
            codes, classes = encode_labels(col, n, min_classes=1, name="known")
            keys.append((codes, len(classes)))
    if Y_minus is not None:
        Ym = open_input(Y_minus, variable="negative")
        if Ym.ndim == 1:
            Ym = Ym[:, None]
        if Ym.ndim != 2 or Ym.shape[0] != n:
            raise ValueError(f"Y_minus must have shape (n_samples, n_negative) = ({n}, ...); got {Ym.shape}.")
        if Ym.shape[1] > 62:
            raise ValueError(f"Y_minus has {Ym.shape[1]} columns; at most 62 negative features are supported "
                             "(their patterns are packed into 64-bit keys).")
        vals = (engine.map_reduce(LABEL_VALUES, Ym)["values"] if engine.is_lazy(Ym)
                else np.unique(np.asarray(Ym)))
        if not np.all(np.isin(vals, (0, 1))):
            bad = vals[~np.isin(vals, (0, 1))][:5].tolist()
            raise ValueError(f"Y_minus must be binary (0/1); found values {bad}.")
        weights = (2 ** np.arange(Ym.shape[1], dtype=np.int64))
        keys.append((Ym.astype(np.int64) @ weights, 2 ** Ym.shape[1]))
    if not keys:
        return None, 0
    key, radix = keys[0][0].astype(np.int64), keys[0][1]
    for codes, size in keys[1:]:
        if radix * size >= 2**62:
            raise ValueError("The known clusterings and negative features have too many combinations to "
                             "index; pass fewer of them.")
        key = key * size + codes.astype(np.int64)
        radix *= size
    pattern, values = encode_labels(key, n, min_classes=1, name="negative pattern")
    return pattern, len(values)

def known_columns(known: Any, n: int) -> list:
    """The known clusterings as a list of label vectors of length ``n``."""
    if isinstance(known, (list, tuple)):
        if known and np.ndim(known[0]) == 0:  # one clustering given as a list of labels
            return [np.asarray(known)]
        return list(known)
    k = open_input(known, variable="label")
    if k.ndim == 1:
        return [k]
    if k.ndim == 2 and k.shape[0] == n:
        return [k[:, j] for j in range(k.shape[1])]
    raise ValueError(f"known must be one label vector of length n_samples={n}, a list of them, or an "
                     f"(n_samples, n_known) array; got shape {k.shape}.")

def pattern_model(X: Any, Y_minus: Any, known: Any, n: int) -> tuple[Any, int]:
    """The counting pass over (negative pattern, feature) pairs and the
    :class:`~infoclust_dask.objectives.cmbc.PatternModel` built from it
    (None when there are fewer than two patterns: the constraint is then
    constant); checks that X is binary. Returns ``(model, n_patterns)``."""
    pattern, P = patterns(Y_minus, known, n)
    if pattern is None:
        pattern, P = np.zeros(n, dtype=np.int64), 1
    stats = engine.map_reduce(CMBC_PATTERNS, X, pattern, params={"n_patterns": P})
    if int(stats["nonbinary"]):
        raise ValueError(f"X must be binary (0/1): {int(stats['nonbinary'])} entries are neither 0 nor 1. "
                         "Binarize the data first, e.g. X = (X > 0).astype('uint8').")
    present = stats["count"] > 0
    P = int(present.sum())
    if P < 2:
        return None, P
    if P * MIN_ROWS_PER_PATTERN > n:
        raise ValueError(
            f"The prior knowledge has {P} distinct negative patterns for {n} samples (fewer than "
            f"{MIN_ROWS_PER_PATTERN} rows per pattern): the pattern probabilities (A.5) and the entropy "
            "bounds built on them would rest on a handful of rows each. Use fewer negative features or "
            "known clusterings with fewer labels.")
    return obj.pattern_model(stats["count"][present], stats["S"][present], stats["n1"], n), P
