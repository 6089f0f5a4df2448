"""Streaming ingest: CSV, parquet and .npy read in blocks of rows. With a
tiny block size the stores must equal the frames / arrays that wrote the
files (bit for bit: CSV floats are written by repr), errors must name the right line across
blocks, and nothing is left beside the destination."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from infoclust_dask._support import sizes as _sizes
from infoclust_dask.io.ingest import IngestError, ingest
from infoclust_dask.io.store import open_dataset


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(_sizes, "READ_BLOCK_BYTES", 1)  # block_rows -> its floor of 1024 rows


def _frame(n=5000, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.normal(size=(n, 4)), columns=["a", "b", "c", "d"])
    cls = rng.choice(["oak", "ash", "elm", "yew"], n)
    cls[:1500] = rng.choice(["yew", "oak"], 1500)  # 'ash' and 'elm' first seen in a later block
    df.insert(2, "cls", cls)
    df["grp"] = rng.integers(0, 3, n)
    return df


def _no_leftovers(folder):
    return [p for p in os.listdir(folder) if p.startswith(".")] == []


def test_csv_in_blocks_equals_the_frame_that_wrote_it(tmp_path, small_blocks):
    df = _frame()
    src = tmp_path / "t.csv"
    df.to_csv(src, index=False)  # floats written by repr: read back exactly (pandas < 3 needs round_trip)
    path, rep = ingest(src, tmp_path / "s.zarr", label_column=["cls", "grp"])
    ds = open_dataset(path)
    ref = df
    np.testing.assert_array_equal(ds["x"].values, ref[["a", "b", "c", "d"]].to_numpy())
    assert ds["x"].attrs["feature_names"] == ["a", "b", "c", "d"]
    names = sorted(ref["cls"].unique())
    assert ds.attrs["class_names"] == names
    np.testing.assert_array_equal(ds["label"].values, [names.index(v) for v in ref["cls"]])
    np.testing.assert_array_equal(ds["grp"].values, ref["grp"].to_numpy())  # '0' < '1' < '2' keeps the codes
    assert rep["rows_read"] == 5000
    assert _no_leftovers(tmp_path)


def test_csv_errors_name_the_line_in_a_later_block(tmp_path, small_blocks):
    df = _frame(n=3000)
    text = df.to_csv(index=False).splitlines()
    bad = list(text)
    bad[2501] = bad[2501].replace(bad[2501].split(",")[1], "oops", 1)  # data row 2500 is line 2502
    (tmp_path / "bad.csv").write_text("\n".join(bad) + "\n")
    with pytest.raises(IngestError, match=r"line 2502, column 2 \('b'\): 'oops' is not a number"):
        ingest(tmp_path / "bad.csv", tmp_path / "s.zarr", label_column="cls")
    ragged = list(text)
    ragged[2100] += ",9"
    (tmp_path / "ragged.csv").write_text("\n".join(ragged) + "\n")
    with pytest.raises(IngestError, match=r"line 2101 has 7 fields, expected 6: the file is ragged"):
        ingest(tmp_path / "ragged.csv", tmp_path / "s.zarr", label_column="cls")
    nan = list(text)
    nan[1800] = nan[1800].replace(nan[1800].split(",")[0], "nan", 1)
    (tmp_path / "nan.csv").write_text("\n".join(nan) + "\n")
    with pytest.raises(IngestError, match=r"1 row\(s\) .* \(first at rows \[1799\], 0-based; columns \[0\]\)"):
        ingest(tmp_path / "nan.csv", tmp_path / "s.zarr", label_column="cls")
    assert not (tmp_path / "s.zarr").exists() and _no_leftovers(tmp_path)
    path, rep = ingest(tmp_path / "nan.csv", tmp_path / "s.zarr", label_column="cls", drop_nonfinite=True)
    ds = open_dataset(path)
    keep = np.ones(3000, bool)
    keep[1799] = False
    np.testing.assert_array_equal(ds["x"].values, df.drop(columns=["cls"]).to_numpy(dtype=float)[keep])
    np.testing.assert_array_equal(ds["label"].values, np.unique(df["cls"], return_inverse=True)[1][keep])
    assert rep["rows_dropped_nonfinite"] == 1 and _no_leftovers(tmp_path)


def test_parquet_in_batches_and_standardized(tmp_path, small_blocks):
    df = _frame(n=4000, seed=1)
    df.to_parquet(tmp_path / "t.parquet", row_group_size=700)
    path, _ = ingest(tmp_path / "t.parquet", tmp_path / "s.zarr", label_column="cls", standardize=True)
    ds = open_dataset(path)
    num = df.drop(columns=["cls"]).to_numpy(dtype=float)
    np.testing.assert_allclose(ds["x"].values, (num - num.mean(0)) / num.std(0), rtol=0, atol=1e-12)
    assert ds["x"].attrs["feature_names"] == ["a", "b", "c", "d", "grp"]
    np.testing.assert_array_equal(ds["label"].values, np.unique(df["cls"], return_inverse=True)[1])


@pytest.mark.parametrize("order", ["C", "F"])
def test_npy_read_in_blocks_c_and_fortran_order(tmp_path, small_blocks, order):
    x = np.asarray(np.random.default_rng(2).normal(size=(3000, 5)).astype(np.float32), order=order)
    np.save(tmp_path / "x.npy", x)
    path, rep = ingest(tmp_path / "x.npy", tmp_path / "s.zarr", pca=2, dtype="float64")
    ds = open_dataset(path)
    xc = x.astype(np.float64) - x.astype(np.float64).mean(0)
    w, v = np.linalg.eigh(xc.T @ xc / len(x))
    ref = xc @ v[:, ::-1][:, :2]
    got = ds["x"].values
    np.testing.assert_allclose(np.abs(got), np.abs(ref), rtol=0, atol=1e-8)  # axes up to sign
    # by default float32 data stay float32 on disk: the same projection, rounded to float32
    kept = open_dataset(ingest(tmp_path / "x.npy", tmp_path / "s32.zarr", pca=2)[0])["x"].values
    assert kept.dtype == np.float32
    np.testing.assert_allclose(np.abs(kept), np.abs(ref), rtol=0, atol=1e-6)
    with pytest.raises(IngestError, match=r"shape \(3000,\)"):
        np.save(tmp_path / "v.npy", x[:, 0].copy())
        ingest(tmp_path / "v.npy", tmp_path / "v.zarr")


def test_a_killed_ingest_leaves_a_scratch_folder_the_next_run_removes(tmp_path):
    from infoclust_dask.io.store import clean_stale_temporaries

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    stale = tmp_path / f".s.zarr.raw-{pid}-0123abcd"
    stale.mkdir()
    (stale / "zarr.json").write_text("{}")
    assert clean_stale_temporaries(tmp_path / "s.zarr") == [stale]
    assert not stale.exists()


@pytest.mark.parametrize("extra, want", [([], "float32"), (["--dtype", "float64"], "float64"),
                                         (["--standardize"], "float32")])
def test_float32_data_stay_float32_unless_asked(tmp_path, extra, want):
    """(issue 28) a float32 .npy was written as float64: twice the disk and
    twice the read time of every later pass."""
    from infoclust_dask import open_dataset
    from infoclust_dask.cli import main

    X = np.random.default_rng(0).normal(size=(500, 3)).astype(np.float32)
    np.save(tmp_path / "a.npy", X)
    assert main(["ingest", str(tmp_path / "a.npy"), str(tmp_path / "a.zarr"), *extra]) == 0
    x = open_dataset(tmp_path / "a.zarr")["x"]
    assert x.dtype == want
    if not extra:
        np.testing.assert_array_equal(x.values, X)  # the same bytes


def test_csv_is_float64_unless_asked(tmp_path):
    from infoclust_dask import open_dataset
    from infoclust_dask.cli import main

    (tmp_path / "a.csv").write_text("a,b\n1.5,2\n3,4.25\n")
    assert main(["ingest", str(tmp_path / "a.csv"), str(tmp_path / "a.zarr")]) == 0
    assert open_dataset(tmp_path / "a.zarr")["x"].dtype == "float64"
    assert main(["ingest", str(tmp_path / "a.csv"), str(tmp_path / "b.zarr"), "--dtype", "float32"]) == 0
    assert open_dataset(tmp_path / "b.zarr")["x"].dtype == "float32"


def _tree_peak(cmd):
    """Run ``cmd`` as a process of its own; returns (exit code, stderr, peak
    of the summed RSS of it and its children, sampled every 10 ms)."""
    import threading
    import time

    import psutil

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, done = [0], threading.Event()

    def sample():
        root = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                peak[0] = max(peak[0], sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]))
            except psutil.Error:  # a process ended between the listing and the reading
                pass
            time.sleep(0.01)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    _, err = proc.communicate(timeout=300)
    done.set()
    th.join()
    return proc.returncode, err, peak[0]


def test_a_cli_ingest_process_tree_stays_under_500_mb(tmp_path):
    """Issue 28: the whole tree of ``infoclust ingest`` (the command and its
    watchdog) stays under 500 MB on a 60 MB CSV (it peaked at 616 MB, most
    of it freed chunk buffers glibc kept; see :mod:`infoclust_dask._support.malloc`).
    The file repeats one 50 000-row block, which costs the parse the same."""
    rng = np.random.default_rng(0)
    lab = rng.integers(0, 6, 50_000)
    x = rng.normal(size=(50_000, 16)) + lab[:, None]
    block = "\n".join(",".join(f"{v:.6f}" for v in row) + f",c{c}" for row, c in zip(x, lab, strict=True)) + "\n"
    src = tmp_path / "big.csv"
    with src.open("w") as fh:
        fh.write(",".join([f"f{j}" for j in range(16)] + ["cls"]) + "\n")
        for _ in range(8):
            fh.write(block)
    assert src.stat().st_size > 55e6
    code, err, peak = _tree_peak([sys.executable, "-m", "infoclust_dask.cli", "ingest", str(src),
                                  str(tmp_path / "d.zarr"), "--label-column", "cls", "--standardize"])
    assert code == 0, err
    assert open_dataset(tmp_path / "d.zarr")["x"].shape == (400_000, 16)
    assert peak < 500e6, f"the ingest's process tree peaked at {peak / 1e6:.0f} MB"


def test_return_large_blocks_takes_effect_on_glibc():
    import platform

    expected = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    out = subprocess.run([sys.executable, "-c", "from infoclust_dask._support.malloc import return_large_blocks; "
                          "print(return_large_blocks())"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(expected)  # in a process of its own: it changes the process's malloc


def test_cli_ingest_threads_option(tmp_path, capsys):
    """``--threads`` sets the local threads of the ingest's passes and
    writes; the store is the same for 1 and 2 threads, and 0 is refused
    with the fix."""
    from infoclust_dask.cli import main

    rng = np.random.default_rng(3)
    np.save(tmp_path / "a.npy", rng.normal(size=(5000, 4)))
    for th in (1, 2):
        assert main(["ingest", str(tmp_path / "a.npy"), str(tmp_path / f"t{th}.zarr"), "--standardize",
                     "--threads", str(th)]) == 0
    a = np.asarray(open_dataset(tmp_path / "t1.zarr")["x"])
    b = np.asarray(open_dataset(tmp_path / "t2.zarr")["x"])
    np.testing.assert_array_equal(a, b)
    capsys.readouterr()
    assert main(["ingest", str(tmp_path / "a.npy"), str(tmp_path / "t0.zarr"), "--threads", "0"]) == 2
    assert "--threads must be at least 1; got 0." in capsys.readouterr().err
    assert not (tmp_path / "t0.zarr").exists()


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_columns_choose_the_features_and_mean_imputation_fills_missing_values(tmp_path, small_blocks, kind):
    """Issue 54: a table with a text column and missing values. Without
    options the text column is refused naming ``--drop-columns``;
    ``drop_columns``/``columns`` choose the features (streamed in blocks,
    names kept); missing values are refused naming ``--impute mean``, which
    fills each with its column's mean over the present values (pandas'
    ``fillna(mean())`` as the reference) and reports the counts per column."""
    df = _frame(n=3000)
    df.insert(0, "id", [f"r{i}" for i in range(len(df))])
    df.loc[[5, 2500], "a"] = np.nan
    df.loc[[7], "d"] = np.nan
    src = tmp_path / f"t.{kind}"
    df.to_csv(src, index=False) if kind == "csv" else df.to_parquet(src)
    with pytest.raises(IngestError, match="--drop-columns id"):
        ingest(src, tmp_path / "a.zarr", label_column=["cls"])
    with pytest.raises(IngestError, match="--impute mean"):
        ingest(src, tmp_path / "a.zarr", label_column=["cls"], drop_columns=["id", "grp"])
    path, rep = ingest(src, tmp_path / "a.zarr", label_column=["cls"], drop_columns=["id", "grp"], impute="mean")
    ds = open_dataset(path)
    ref = df[["a", "b", "c", "d"]]
    np.testing.assert_allclose(ds["x"].values, ref.fillna(ref.mean()).to_numpy(), rtol=1e-12)
    assert ds["x"].attrs["feature_names"] == ["a", "b", "c", "d"]
    assert rep["imputed"] == {"strategy": "mean", "values": 3, "columns": {"a": 2, "d": 1}}
    path, rep = ingest(src, tmp_path / "b.zarr", label_column=["cls"], columns=["c", "b"])
    np.testing.assert_array_equal(open_dataset(path)["x"].values, df[["c", "b"]].to_numpy())
    assert open_dataset(path)["x"].attrs["feature_names"] == ["c", "b"] and "imputed" not in rep
    with pytest.raises(IngestError, match="a column is a feature, a label"):
        ingest(src, tmp_path / "c.zarr", label_column=["cls"], columns=["cls", "b"])
    with pytest.raises(IngestError, match="no column named 'zz'"):
        ingest(src, tmp_path / "c.zarr", drop_columns=["zz"])
    with pytest.raises(IngestError, match="--impute is for a new store"):
        ingest(src, tmp_path / "b.zarr", append=True, impute="mean", columns=["c", "b"])
