"""Store metadata edited at random (Hypothesis): every field of an array's
``zarr.json`` and every attribute of the group. Each edit is refused by
``verify`` and by opening the store for a fit, with a message naming the
field that changed; an edit that leaves the document equal (the same JSON)
is harmless and the store reads the numbers written. The manifests written
with the store hold each array's metadata and the group's attributes (and
their hashes): the reference the edits are checked against."""

import json
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infoclust_dask.io import store as store_mod
from infoclust_dask.io.store import StoreError, open_dataset, verify_store, write_dataset

X = np.random.default_rng(0).normal(size=(60, 3))
Z = np.arange(60) % 3

json_values = st.one_of(st.none(), st.booleans(), st.integers(-10**16, 10**16), st.floats(allow_nan=False),
                        st.text(max_size=6), st.lists(st.integers(-3, 10**6), max_size=3),
                        st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("meta") / "s.zarr", X, label=Z, chunks=20,
                         feature_names=["a", "b", "c"])


def _paths(doc, prefix=()):
    """Every key path of a JSON document (nested dicts and lists followed)."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for k, v in items:
        out.append((*prefix, k))
        out += _paths(v, (*prefix, k))
    return out


def _set(doc, path, value):
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


def _check(pristine, tmp, rel, mutate):
    """Copy the store, edit ``rel`` with ``mutate`` (doc -> named field), and
    check verify and open. Returns the field name, or None when unchanged."""
    target = tmp / "s.zarr"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(pristine, target)
    meta = target / rel
    before = json.loads(meta.read_text())
    doc = json.loads(meta.read_text())
    field = mutate(doc)
    meta.write_text(json.dumps(doc))
    store_mod.forget_opened()
    if doc == before:  # the same values (60 written as 60.0, ...): refused as other bytes, or read unchanged
        try:
            np.testing.assert_array_equal(open_dataset(target)["x"].values, X)
        except StoreError:
            assert verify_store(target)["problems"]
        return None
    problems = verify_store(target)["problems"]
    assert problems and any(field in p for p in problems), (field, problems)
    with pytest.raises(StoreError, match="damaged|differs|newer than|schema_version") as err:
        open_dataset(target)
    named = field.rpartition(".")[2]  # the attribute's name: validation names it as 'class_names', the hash check
    assert named in str(err.value), (field, str(err.value))  # as attributes.class_names
    return field


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), array=st.sampled_from(["x", "label"]))
def test_every_edit_of_an_arrays_metadata_is_refused_naming_the_field(pristine, tmp_path, data, array):
    doc = json.loads((pristine / array / "zarr.json").read_text())
    path = data.draw(st.sampled_from(_paths(doc)))
    value = data.draw(json_values)

    def mutate(d):
        _set(d, path, value)
        return str(path[0])

    _check(pristine, tmp_path, f"{array}/zarr.json", mutate)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_edit_of_the_groups_attributes_is_refused_naming_the_attribute(pristine, tmp_path, data):
    doc = json.loads((pristine / "zarr.json").read_text())
    path = data.draw(st.sampled_from(_paths(doc["attributes"])))
    value = data.draw(json_values)

    def mutate(d):
        _set(d["attributes"], path, value)
        return f"attributes.{path[0]}" if not isinstance(path[0], int) else "attributes"

    field = _check(pristine, tmp_path, "zarr.json", mutate)
    assert field is None or field.startswith("attributes")


def test_a_deleted_array_metadata_and_a_garbage_group_are_refused(pristine, tmp_path):
    for rel, edit in (("x/zarr.json", None), ("zarr.json", b"{garbage")):
        target = tmp_path / rel.replace("/", "-")
        shutil.copytree(pristine, target)
        if edit is None:
            (target / rel).unlink()
        else:
            (target / rel).write_bytes(edit)
        store_mod.forget_opened()
        problems = verify_store(target)["problems"]
        assert problems, rel
        with pytest.raises(StoreError):
            open_dataset(target)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 1e300])
def test_a_row_count_edited_to_a_non_finite_or_huge_number_is_refused_naming_the_shape(pristine, tmp_path, value):
    """JSON's Infinity / NaN in an array's shape (found by the fuzz test above:
    ``int(inf)`` raised OverflowError out of the check instead of a problem
    naming the field)."""

    def mutate(d):
        d["shape"][0] = value
        return "shape"

    assert _check(pristine, tmp_path, "x/zarr.json", mutate) == "shape"
