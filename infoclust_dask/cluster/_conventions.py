"""Which of scikit-learn's estimator checks an estimator of this package is
expected to fail, and why - scikit-learn's own way of declaring them: pass
the result as ``expected_failed_checks`` to
:func:`sklearn.utils.estimator_checks.check_estimator` or
:func:`~sklearn.utils.estimator_checks.parametrize_with_checks`::

    from sklearn.utils.estimator_checks import check_estimator
    from infoclust_dask import KMeans, expected_failed_checks

    est = KMeans()
    check_estimator(est, expected_failed_checks=expected_failed_checks(est))

Each estimator class declares its own in ``_expected_failed_checks`` (the
reasons are worded here). Every other check passes with each estimator's
default constructor (the test suite runs them all and fails when a declared
failure starts passing).
"""

from __future__ import annotations

from typing import Any

__all__ = ["expected_failed_checks", "supervised_by_classes", "WEIGHTS", "BINARY", "COMPONENT_PROBA", "CMBC_DATA_CHECKS"]

WEIGHTS = (
    "a weight of k is not k repeated rows for the seeding: k-means++ draws its candidates with a random stream "
    "that depends on the number of rows, so weighted and repeated data start (and may end) in different local "
    "optima; scikit-learn's own KMeans declares the same expected failure"
)

BINARY = (
    "CMBC models binary rows (a Bernoulli mixture, Gondek, Vaithyanathan & Garg 2005, section 3) and refuses "
    "the random floats this check feeds it, with an error that names the fix (binarize); the same property is "
    "tested on binary data in the package's tests"
)

COMPONENT_PROBA = (
    "MDA2's predict_proba gives the posterior of each mixture component given x (n_clusters columns, as "
    "GaussianMixture.predict_proba), not of each class; the check expects one column per class of a classifier"
)

#: checks that fit CMBC on non-binary data (scikit-learn 1.6-1.9)
CMBC_DATA_CHECKS = (
    "check_clustering", "check_dict_unchanged", "check_dont_overwrite_parameters", "check_dtype_object",
    "check_estimator_sparse_array", "check_estimator_sparse_matrix", "check_estimator_sparse_tag",
    "check_estimators_dtypes", "check_estimators_fit_returns_self", "check_estimators_nan_inf",
    "check_estimators_overwrite_params", "check_estimators_pickle", "check_f_contiguous_array_estimator",
    "check_fit2d_1feature", "check_fit2d_1sample", "check_fit2d_predict1d", "check_fit_check_is_fitted",
    "check_fit_idempotent", "check_fit_score_takes_y", "check_methods_sample_order_invariance",
    "check_methods_subset_invariance", "check_n_features_in", "check_n_features_in_after_fitting",
    "check_non_transformer_estimators_n_iter", "check_pipeline_consistency", "check_positive_only_tag_during_fit",
    "check_readonly_memmap_input",
)


def expected_failed_checks(estimator: Any) -> dict[str, str]:
    """``{check name: reason}`` of the scikit-learn checks ``estimator`` is
    expected to fail (empty for an estimator that passes them all)."""
    return dict(getattr(type(estimator), "_expected_failed_checks", {}))


def supervised_by_classes(tags: Any) -> Any:
    """Tag an estimator fitted on ``(X, y)`` with class labels ``y`` (DC,
    MDA2) as a classifier, so scikit-learn's model selection stratifies its
    folds by ``y`` (``check_cv`` asks ``is_classifier``): a fold without a
    class would give DC a different set of classes. ``predict`` still returns
    clusters (the clusters are what is fitted); ``score`` is the held-out
    criterion, defined on classes unseen in training."""
    from sklearn.utils import ClassifierTags

    tags.estimator_type = "classifier"
    # predict returns clusters, not the classes: their agreement with y is what DC and MDA2 trade against
    # the clusters' fit to X, so scikit-learn's training-accuracy bar (0.83) is not theirs to meet
    tags.classifier_tags = ClassifierTags(poor_score=True)
    return tags
