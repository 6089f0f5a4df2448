"""Unclear cases of the second integrity round (issue 38), each now one
line naming the value and the fix."""

import subprocess
import sys

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from infoclust_dask import KMeans, open_dataset, write_dataset


def test_text_input_is_refused_not_parsed():
    X = np.random.default_rng(0).normal(size=(50, 3))
    for text in (X.astype(str), X.astype(str).tolist()):
        with pytest.raises(ValueError, match=r"X holds text \(dtype <U\d+\); clustering needs numbers"):
            KMeans(2, scheduler="sync").fit(text)


def test_an_unfitted_init_is_named():
    X = np.random.default_rng(0).normal(size=(50, 3))
    with pytest.raises(NotFittedError, match="init= is an unfitted KMeans"):
        KMeans(2, scheduler="sync").fit(X, init=KMeans(2))


def test_a_closed_pipe_ends_quietly(tmp_path):
    store = write_dataset(tmp_path / "s.zarr", np.zeros((10, 2)))
    p = subprocess.Popen([sys.executable, "-c", "import sys, time; from infoclust_dask.cli import main; "
                          "time.sleep(2); sys.exit(main(sys.argv[1:]))", "info", str(store)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader went away (`| head`) before anything was written
    err = p.stderr.read().decode()
    assert p.wait(60) == 141 and err == "", err


def test_a_missing_bucket_and_an_http_url_are_named(s3_server):
    with pytest.raises(FileNotFoundError, match=r"the bucket 'no-such-bucket-38' does not exist at this endpoint"):
        open_dataset("s3://no-such-bucket-38/x.zarr")
    with pytest.raises(FileNotFoundError, match=r"http\(s\) URLs are read-only"):
        open_dataset("http://127.0.0.1:9/x.zarr")


def test_write_labels_into_a_url_store_says_why_before_predicting(tmp_path, capsys):
    from infoclust_dask import cli
    from infoclust_dask.io.labels import add_labels
    from infoclust_dask.storage.paths import URLNotSupported

    assert cli.main(["predict", str(tmp_path / "model.json"), "s3://b/s.zarr", "--write-labels", "km"]) == 2
    assert "--write-labels adds a variable to a store on a local or shared file system" in capsys.readouterr().err
    with pytest.raises(URLNotSupported, match="add_labels writes into a store on a local or shared file system"):
        add_labels("s3://b/s.zarr", "km", np.zeros(3, int))


@pytest.mark.parametrize("code, says", [(28, "the disk is full"), (1, "not writable (read-only or immutable)"),
                                        (13, "permission denied"), (30, "a read-only file system")])
def test_a_bare_system_write_error_is_explained(code, says):
    """`[Errno 28]` / `[Errno 1]` with nothing else (as an ingest into an
    immutable folder gave) becomes one line naming the file and the fix."""
    import os

    from infoclust_dask import cli

    err = OSError(code, os.strerror(code), "store/.s.zarr.raw-1-abc")
    msg = cli._message(err)
    assert msg.startswith("cannot write 'store/.s.zarr.raw-1-abc': ") and says in msg and "[Errno" not in msg
    assert "Choose a writable destination" in msg
    named = OSError(28, "No space left for the store 's': it needs 2 GiB")  # our own message stays as it is
    assert cli._message(named) == "[Errno 28] No space left for the store 's': it needs 2 GiB"


@pytest.mark.parametrize("dtype,factor", [(np.float64, 1e-300), (np.float32, 1e-20)])
def test_data_too_small_for_squared_distances_are_refused(dtype, factor):
    """Two blobs times 1e-300: the squared distances underflow to zero and
    K-means put every row in one cluster at cost 0 (issue 53); such data
    are refused, naming the scale and the fix. Data just above the limit
    and all-zero data still fit."""
    from infoclust_dask import IsotropicGaussianMixture, KMeans, SoftKMeans

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(30, 2)), rng.normal(size=(30, 2)) + 8]).astype(dtype)
    for est in (KMeans(2, random_state=0, scheduler="sync"), SoftKMeans(2, random_state=0, scheduler="sync"),
                IsotropicGaussianMixture(2, random_state=0, scheduler="sync")):
        with pytest.raises(ValueError, match="too small for squared distances.*Rescale"):
            est.fit(X * dtype(factor))
    ok = KMeans(2, random_state=0, scheduler="sync").fit(X * dtype(1e-140 if dtype == np.float64 else 1e-15))
    assert sorted(np.bincount(ok.labels_)) == [30, 30]


def test_the_silent_and_unclear_inputs_of_issue_53_get_one_line_each():
    """Each named the wrong thing or nothing: KMeans(3).fit(None) said
    "array=nan"; DC on constant rows blamed sigma_grid, a parameter never
    set; SMIC split 60 identical rows into three clusters; MDA2 took a y of
    one class (DC refuses it); CMBC's known as a plain list said "got shape
    ()"; datetime64 data gave numpy's buffer error."""
    import warnings

    from infoclust_dask import CMBC, MDA2, SMIC, DiscriminativeClustering, KMeans

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    cases = [
        (lambda: KMeans(3, scheduler="sync").fit(None), "X is None; pass the data"),
        (lambda: DiscriminativeClustering(3, scheduler="sync").fit(np.ones((60, 3)), np.repeat([0, 1, 2], 20)),
         "every feature is constant"),
        (lambda: SMIC(3, scheduler="sync").fit(np.ones((60, 3))), "every feature is constant"),
        (lambda: MDA2(2, scheduler="sync").fit(X, np.zeros(60, int)), "at least 2 classes"),
        (lambda: KMeans(2, scheduler="sync").fit(np.zeros((5, 2), dtype="datetime64[D]")),
         r"dtype datetime64\[D\]; clustering needs numbers"),
    ]
    for fit, message in cases:
        with pytest.raises(ValueError, match=message):
            fit()
    Y = (X > 0).astype(np.uint8)
    known = np.repeat([0, 1], 30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = CMBC(2, random_state=0, scheduler="sync").fit(Y.tolist(), known=known.tolist())
        b = CMBC(2, random_state=0, scheduler="sync").fit(Y, known=known)
    np.testing.assert_array_equal(a.labels_, b.labels_)
