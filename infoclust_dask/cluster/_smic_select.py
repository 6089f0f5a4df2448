"""SMIC's choice of the kernel parameter ``t`` by maximal LSMI (Sugiyama,
Yamada, Kimura & Hachiya 2011, §3, Fig. 1): LSMI (14) of every candidate
clustering, from ONE map-reduce pass over the rows
(:func:`infoclust_dask.metrics.lsmi_many`: the bases, folds and
``Phi^T Phi`` are shared, only the per-class sums differ), on all rows or
on a seeded sample of ``lsmi_max_rows`` of them (:func:`lsmi_sample`),
and the choice among near ties (:func:`choose_t`)."""

from __future__ import annotations

import numpy as np

from .. import engine, metrics
from .._support.progress import say
from .._support.sizes import aligned_rows, logical_rows

__all__ = ["LSMI_MAX_ROWS", "LSMI_TIE_RTOL", "candidate_lsmi", "choose_t", "lsmi_sample"]

#: the rows of SMIC's LSMI sample when ``lsmi_max_rows="auto"`` and there is one candidate ``t`` (its LSMI only
#: reports). Measured (2e6 rows of 10 blobs, d = 16, one process, 2 threads; docs/BENCHMARKS.md): all rows
#: 15.5-17.9 s, 262 144 rows 2.0-2.4 s. Separated blobs: within 0.0007 of the all-row value (4.4515), about the
#: spread of the basis draw alone on all rows (0.0009). Overlapping blobs (spread 5): the basis draw alone moves
#: the all-row value 2.92-3.04, the sample's lie within it (2.88-3.00), but one of 3 samples ranked the labels
#: with 1 % flipped above the true ones, which no all-row draw did: a choice among candidates uses all rows
LSMI_MAX_ROWS = 1 << 18
#: chunks of the LSMI sample on the workers (its pass's tasks): 262 144 rows in one task took 3.3 s on one of two
#: workers while the other idled
LSMI_SAMPLE_CHUNKS = 4
#: LSMI values within this relative distance of the largest are a tie (the smallest such t wins)
LSMI_TIE_RTOL = 1e-9


def choose_t(lsmi: dict[int, float], rtol: float = LSMI_TIE_RTOL) -> int:
    """The candidate ``t`` of maximal LSMI (Sugiyama et al. 2011, Fig. 1),
    the smallest among near ties. Two candidates whose clusterings are the
    same partition have the same LSMI in exact arithmetic (it depends only
    on the labels, the shared bases and folds), but their computed values
    differ by round-off that depends on the chunking and on the BLAS:
    values within ``rtol * max(1, |best|)`` of the best count as equal, so
    that the choice does not depend on which machine sums them."""
    top = max(lsmi.values())
    return min(t for t, v in lsmi.items() if v >= top - rtol * max(1.0, abs(top)))


def lsmi_sample(n: int, max_rows: int | None, seed: int) -> np.ndarray | None:
    """The rows LSMI is estimated on: ``None`` (all ``n``) when ``max_rows``
    is None or at least ``n``; else ``max_rows`` distinct row positions,
    ascending, drawn by ``numpy.random.default_rng([seed, 1])`` - the same
    rows for every candidate ``t`` and on every runner (they depend only on
    ``n``, ``max_rows`` and the fit's seed)."""
    if max_rows is None or n <= max_rows:
        return None
    return np.sort(np.random.default_rng([seed, 1]).choice(n, size=int(max_rows), replace=False))


def candidate_lsmi(A, labels: np.ndarray, *, est, seed: int, mean, std) -> tuple[list, int]:
    """LSMI (14) of the clusterings in the columns of ``labels`` (one per
    candidate ``t``) of the rows of ``A``, in one pass; on the seeded sample
    of :func:`lsmi_sample` when there are more than ``est.lsmi_max_rows``
    rows (``"auto"``: :data:`LSMI_MAX_ROWS` for one candidate, all rows when
    LSMI chooses among several), the features standardized by the moments
    of ALL rows, ``mean`` and ``std``. Returns the
    :class:`~infoclust_dask.objectives.lsmi.LSMIResult` of every column and
    the number of rows they were computed on."""
    n = int(A.shape[0])
    max_rows = est.lsmi_max_rows
    if max_rows == "auto":
        max_rows = LSMI_MAX_ROWS if labels.shape[1] == 1 else None
    pick = lsmi_sample(n, max_rows, seed)
    if pick is not None:  # only the row blocks that hold a sampled row are read
        lazy = engine.is_lazy(A)
        A, labels = engine.rows_at(A, pick), labels[pick]
        if lazy:  # back to the workers block by block (scattered on a cluster), not inside the pass's graph, in
            # LSMI_SAMPLE_CHUNKS chunks of whole logical blocks (the same sums): one chunk kept one of 2 workers busy
            logical = logical_rows(int(pick.size), 8 * int(np.prod(A.shape[1:], dtype=np.int64)))
            A = engine.persist(A, chunk_rows=aligned_rows(-(-int(pick.size) // LSMI_SAMPLE_CHUNKS), logical))
    if est.verbose:
        say(f"[SMIC] LSMI of {labels.shape[1]} candidate clustering(s): one pass over "
            + ("the rows" if pick is None else f"{pick.size:,} of {n:,} rows (a seeded sample)"))
    results = metrics.lsmi_many(A, labels, n_classes=est.n_clusters, n_bases=est.lsmi_n_bases, n_folds=est.n_folds,
                                random_state=seed, mean=mean, std=std, progress=est.verbose >= 1)
    return results, n if pick is None else int(pick.size)
