"""metrics.agreement (ARI and NMI from one counted table) against
scikit-learn's adjusted_rand_score and normalized_mutual_info_score on
random, degenerate and non-integer labelings."""

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from infoclust_dask.metrics import agreement


def _cases():
    rng = np.random.default_rng(0)
    t = rng.integers(0, 5, 3000)
    yield "random", t, rng.integers(0, 7, 3000)
    yield "close", t, np.where(rng.random(3000) < 0.9, t, rng.integers(0, 5, 3000))
    yield "permuted", t, (t + 2) % 5
    yield "one cluster each", np.zeros(50, int), np.zeros(50, int)
    yield "one class, many clusters", np.zeros(50, int), np.arange(50) % 4
    yield "all singletons", np.arange(40), np.arange(40)[::-1]
    yield "gaps in the codes", t * 1000, rng.integers(0, 3, 3000) * 7 + 11
    yield "negative and strings", t - 3, np.array(list("abcde"))[rng.integers(0, 5, 3000)]
    yield "two rows", np.array([0, 1]), np.array([0, 0])


@pytest.mark.parametrize("name,truth,pred", list(_cases()), ids=[c[0] for c in _cases()])
def test_agreement_equals_scikit_learn(name, truth, pred):
    got = agreement(truth, pred)
    assert got["ari"] == pytest.approx(adjusted_rand_score(truth, pred), abs=1e-12)
    assert got["nmi"] == pytest.approx(normalized_mutual_info_score(truth, pred), abs=1e-12)


def test_agreement_on_many_labels_does_not_overflow():
    """3e6 labels in two clusters: pair counts near 4.5e12, products near
    1e25 (beyond int64): the same values as scikit-learn."""
    rng = np.random.default_rng(1)
    t = rng.integers(0, 2, 3_000_000)
    p = np.where(rng.random(t.size) < 0.95, t, 1 - t)
    got = agreement(t, p)
    assert got["ari"] == pytest.approx(adjusted_rand_score(t, p), abs=1e-12)
    assert got["nmi"] == pytest.approx(normalized_mutual_info_score(t, p), abs=1e-12)


def test_agreement_needs_labelings_of_one_length():
    with pytest.raises(ValueError, match="same length"):
        agreement(np.zeros(3, int), np.zeros(4, int))
