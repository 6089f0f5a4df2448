"""The manifest is checked data (issue 38): a format this version does not
read, a committed row count that is negative, too large or inconsistent, a
missing or malformed entry, a manifest reached through a symlink, and files
no manifest names are each refused (open) or reported (verify), by name."""

import json
import os

import numpy as np
import pytest

from infoclust_dask import cli, open_dataset, write_dataset
from infoclust_dask.io.verify import verify_store
from infoclust_dask.storage.atomic import StoreError
from infoclust_dask.storage.manifest import MANIFEST


@pytest.fixture
def store(tmp_path):
    X = np.random.default_rng(0).normal(size=(3000, 3))
    return write_dataset(tmp_path / "s.zarr", X, label=np.arange(3000) % 3, chunks=500)


def _edit(store, change, var="x"):
    man = store / var / MANIFEST
    doc = json.loads(man.read_text())
    change(doc)
    man.write_text(json.dumps(doc))


@pytest.mark.parametrize("rows, message", [
    (-5, r"commits rows=-5, not a non-negative integer"),
    (2000, r"commits 2000 rows but the metadata it records declares 3000: the manifest was edited"),
    (10**12, r"commits 1000000000000 rows but the metadata it records declares 3000"),
    ("3000", r"commits rows='3000', not a non-negative integer"),
])
def test_committed_rows_must_agree_with_the_array(store, rows, message):
    _edit(store, lambda d: d.update(rows=rows))
    with pytest.raises(StoreError, match=message):
        open_dataset(store)
    assert any(__import__("re").search(message, p) for p in verify_store(store)["problems"])


def test_a_chunk_missing_from_the_table_and_an_unknown_version_are_refused(store):
    _edit(store, lambda d: d["chunks"].pop("x/c/2/0"))
    with pytest.raises(StoreError, match=r"no entry for 1 of the 6 chunks of its 3000 committed rows "
                                         r"\(first: 'x/c/2/0'\)"):
        open_dataset(store)
    _edit(store, lambda d: d.update(manifest_version=999), var="label")
    with pytest.raises(StoreError, match=r"array 'label': its manifest has manifest_version 999, which this version "
                                         r"reads only from 1 to 3"):
        open_dataset(store)


def test_a_malformed_crc_is_named_malformed_not_different_bytes(store):
    _edit(store, lambda d: d["chunks"]["x/c/0/0"].__setitem__(1, "abc"))
    problems = verify_store(store)["problems"]
    assert problems == ["manifest entry 'x/c/0/0' is malformed ([" + str(json.loads(
        (store / "x" / MANIFEST).read_text())["chunks"]["x/c/0/0"][0]) + ", 'abc', " + str(json.loads(
        (store / "x" / MANIFEST).read_text())["chunks"]["x/c/0/0"][2]) + "]; expected [size >= 0, CRC-32 or null, "
        "CRC-32C trailer or null] as integers)"], problems
    with pytest.raises(StoreError, match="is malformed"):
        open_dataset(store)


def test_a_manifest_through_a_symlink_is_refused(store, tmp_path):
    outside = tmp_path / "elsewhere.json"
    (store / "x" / MANIFEST).rename(outside)
    os.symlink(outside, store / "x" / MANIFEST)
    with pytest.raises(StoreError, match=r"infoclust-manifest.json' is a symbolic link"):
        open_dataset(store)


def test_verify_names_files_no_manifest_lists(store):
    (store / "x" / "c" / "0" / "0.bak").write_bytes(b"old")
    (store / "x" / "copy").mkdir()
    (store / "x" / "copy" / "zarr.json").write_text("{}")
    report = verify_store(store)
    assert sorted(report["problems"]) == [
        "'x/c/0/0.bak' is in array 'x''s folder but no manifest names it (an extra or copied chunk, a backup, "
        "another array's files): remove it, or re-ingest",
        "'x/copy/zarr.json' is in array 'x''s folder but no manifest names it (an extra or copied chunk, a "
        "backup, another array's files): remove it, or re-ingest"]
    (store / "x" / "c" / "0" / "0.bak").unlink()
    import shutil

    shutil.rmtree(store / "x" / "copy")
    (store / "x" / "c" / "9").mkdir()
    (store / "x" / "c" / "9" / "0").write_bytes(b"beyond")  # as an interrupted append leaves it
    report = verify_store(store)
    assert report["problems"] == [] and "1 chunk files beyond the committed rows" in report["notes"][0]


def test_verify_prints_the_first_20_problems_and_counts_them(store, capsys):
    _edit(store, lambda d: d["chunks"].update({f"x/c/{i}/0": [10, 1, 2] for i in range(6, 20_006)}))
    assert cli.main(["verify", str(store)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["n_problems"] == 20_000 and len(report["problems"]) == 21
    assert report["problems"][-1] == "... and 19980 more"
