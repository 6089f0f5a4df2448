"""scikit-learn's estimator checks on every estimator built with its
default constructor: checks run, passed, declared expected failures
(:func:`infoclust_dask.expected_failed_checks`) and seconds, as the Markdown
table of the documentation's conventions page.

    python benchmarks/estimator_checks.py > docs/_estimator_checks.md
"""

import time
import warnings

import sklearn
from sklearn.utils.estimator_checks import check_estimator

import infoclust_dask as ic

NAMES = ["KMeans", "SoftKMeans", "DiscriminativeClustering", "AssociativeClustering", "CMBC", "SMIC",
         "IsotropicGaussianMixture", "MDA2"]


def main():
    warnings.simplefilter("ignore")
    print("| estimator | checks | passed | declared expected failures | unexpected failures | seconds |")
    print("|---|---|---|---|---|---|")
    for name in NAMES:
        est = getattr(ic, name)()
        t = time.perf_counter()
        res = check_estimator(est, expected_failed_checks=ic.expected_failed_checks(est), on_fail=None)
        sec = time.perf_counter() - t
        status = [r["status"] for r in res]
        print(f"| `{name}()` | {len(res)} | {status.count('passed')} | {status.count('xfail')} | "
              f"{status.count('failed')} | {sec:.1f} |", flush=True)
    print(f"\nscikit-learn {sklearn.__version__}; skipped checks (e.g. the array-API one without "
          "SCIPY_ARRAY_API=1) are the remainder.")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
