"""Fast start (issue 25): importing the package, the command's --version and
--help, and the child-watching helper load none of the heavy dependencies."""

import json
import subprocess
import sys

import numpy as np
import pytest

HEAVY = ("dask", "distributed", "sklearn", "numba", "scipy", "pandas", "xarray", "zarr", "prefect")


#: prefix of the numba tests' processes: pydata's ``sparse`` (installed with the benchmarks' dask-ml, through
#: dask-glm) imports numba when dask.array registers its chunk type, whatever this package does; it is made
#: unimportable there (dask skips a missing ``sparse``), so the tests see this package's own imports
WITHOUT_PYDATA_SPARSE = "import sys\nsys.modules.setdefault('sparse', None)\n"


def _loaded(code):
    out = subprocess.run([sys.executable, "-c", code + "\nimport json, sys\n"
                          "print(json.dumps(sorted(m for m in sys.modules)))"],
                         capture_output=True, text=True, check=True)
    mods = json.loads(out.stdout.strip().splitlines()[-1])
    return {m.split(".")[0] for m in mods}, mods


def test_import_loads_no_heavy_dependency():
    top, _ = _loaded("import infoclust_dask")
    assert not top & set(HEAVY), sorted(top & set(HEAVY))
    assert "numpy" not in top


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_version_and_help_load_no_heavy_dependency(argv):
    code = ("import contextlib, io, sys\nfrom infoclust_dask import cli\n"
            f"with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            f"    cli.main({argv!r})")
    top, _ = _loaded(code)
    assert not top & set(HEAVY), sorted(top & set(HEAVY))


def test_watchdog_imports_nothing_else_of_the_package():
    top, mods = _loaded("import infoclust_dask._support.watchdog")
    ours = sorted(m for m in mods if m.startswith("infoclust_dask"))
    # (the package's __init__ installs the import hook of the moved modules' old names: standard library only)
    assert ours == ["infoclust_dask", "infoclust_dask._support", "infoclust_dask._support.moved",
                    "infoclust_dask._support.watchdog"]
    assert "numpy" not in top


def test_public_names_and_submodules_resolve_on_first_use():
    code = ("import infoclust_dask as ic\n"
            "assert ic.KMeans is ic.cluster.KMeans and ic.map_reduce is ic.engine.map_reduce\n"
            "assert set(ic.__all__) <= set(dir(ic))\n"
            "from infoclust_dask import SMIC, open_dataset, write_dataset\n"
            "try:\n    ic.no_such_name\nexcept AttributeError as e:\n    assert 'no_such_name' in str(e)\n"
            "else:\n    raise SystemExit('no AttributeError')")
    _loaded(code)


def _peak_mb(code):
    out = subprocess.run([sys.executable, "-c", code + "\nimport resource\n"
                          "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024  # ru_maxrss is in KiB on Linux


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB is Linux's unit")
def test_importing_an_estimator_costs_about_what_sklearn_cluster_does():
    """The first estimator import loads what that estimator needs, not numba
    and the compiled kernels (they load at the first fit): its peak memory
    stays within 1.15x of ``import sklearn.cluster`` (measured 177 MB against
    193 MB; 278 MB before the kernels were imported lazily)."""
    ref = _peak_mb("import sklearn.cluster")
    ours = _peak_mb("from infoclust_dask import KMeans")
    assert ours <= 1.15 * ref, (ours, ref)
    top, _ = _loaded("from infoclust_dask import KMeans")
    assert "numba" not in top
    fitted, _ = _loaded("from infoclust_dask import KMeans\nimport numpy as np\n"
                        "KMeans(2, random_state=0).fit(np.arange(200_000.0).reshape(-1, 2))")
    assert "numba" in fitted  # the first fit compiles / loads the kernels


def test_kmeans_on_tiny_data_never_loads_numba(tmp_path):
    """K-means on data of at most 1 MiB runs Lloyd's step and the moments in
    their numpy forms (numba's start-up, 0.35-0.45 s, is longer than such a
    fit): from numpy and from a store, in one fresh process; soft K-means on
    the same rows then loads it (the test above: so does K-means on 3.2 MB)."""
    from infoclust_dask import write_dataset

    write_dataset(tmp_path / "s.zarr", np.random.default_rng(0).normal(size=(150, 4)))
    top, _ = _loaded(WITHOUT_PYDATA_SPARSE + "from infoclust_dask import KMeans, SoftKMeans\nimport numpy as np\n"
                     "x = np.random.default_rng(0).normal(size=(150, 4))\n"
                     f"KMeans(3, random_state=0).fit(x)\nKMeans(3, random_state=0).fit({str(tmp_path / 's.zarr')!r})\n"
                     "assert 'numba' not in sys.modules, 'a tiny K-means fit loaded numba'\n"
                     "SoftKMeans(3, random_state=0).fit(x)")
    assert "numba" in top

def test_cli_ingest_with_standardize_does_not_load_the_compiled_kernels(tmp_path):
    """`infoclust ingest --standardize` makes one moments pass: numpy's
    form, so the process never imports numba (~150 MB of its peak)."""
    import subprocess
    import sys

    import numpy as np

    rng = np.random.default_rng(0)
    rows = "\n".join(",".join(f"{v:.4f}" for v in r) + f",c{i % 3}" for i, r in enumerate(rng.normal(size=(5000, 6))))
    (tmp_path / "d.csv").write_text("a,b,c,d,e,f,cls\n" + rows + "\n")
    code = (WITHOUT_PYDATA_SPARSE + "from infoclust_dask.cli import main\n"
            "try:\n    main(['ingest', 'd.csv', 'd.zarr', '--label-column', 'cls', '--standardize'])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "print('NUMBA', 'numba' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "NUMBA False" in r.stdout, r.stdout[-500:]
    from infoclust_dask import open_dataset

    ds = open_dataset(tmp_path / "d.zarr")
    x = np.asarray(ds["x"])
    np.testing.assert_allclose(x.mean(axis=0), 0, atol=1e-10)  # standardized by the numpy moments
    np.testing.assert_allclose(x.std(axis=0), 1, atol=1e-6)
