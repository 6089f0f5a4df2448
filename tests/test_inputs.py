"""One open_input: ``read_input`` decides once what the input is (array,
lazy array, xarray, zarr array, our store, another zarr store) and returns
the array with the feature names its source records."""

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

from infoclust_dask._inputs import open_input, read_input
from infoclust_dask.io.store import write_dataset


def test_every_kind_of_input_is_read_once_with_its_feature_names(tmp_path):
    x = np.arange(24, dtype=np.float64).reshape(8, 3)
    store = write_dataset(tmp_path / "s.zarr", x, feature_names=["a", "b", "c"])
    zarr.save_array(str(tmp_path / "plain.zarr"), x, zarr_format=3)
    cases = {
        "numpy": (x, "numpy", None),
        "lazy": (da.from_array(x, chunks=4), "lazy", None),
        "xarray": (xr.DataArray(x, dims=("sample", "feature"), attrs={"feature_names": ["p", "q", "r"]}), "xarray",
                   ["p", "q", "r"]),
        "zarr array": (zarr.open_array(str(tmp_path / "plain.zarr"), mode="r"), "zarr", None),
        "our store": (str(store), "store", ["a", "b", "c"]),
        "another zarr store": (str(tmp_path / "plain.zarr"), "zarr", None),
    }
    for what, (data, kind, names) in cases.items():
        opened = read_input(data)
        assert opened.kind == kind, what
        assert (None if opened.feature_names is None else list(opened.feature_names)) == names, what
        np.testing.assert_array_equal(np.asarray(opened.array), x, err_msg=what)
        np.testing.assert_array_equal(np.asarray(open_input(data)), x, err_msg=what)
    assert read_input(None) is None


def test_a_store_without_the_variable_names_what_it_holds(tmp_path):
    store = write_dataset(tmp_path / "s.zarr", np.ones((4, 2)))
    with pytest.raises(KeyError, match=r"no variable 'y'.*\['x'\]"):
        read_input(str(store), variable="y")
