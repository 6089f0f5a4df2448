"""Re-run the cases of the hostile-user probe (issue 27) on this checkout and
print one markdown row per case: what happened (the CLI's exit code and
first line of stderr, or the Python exception and its first line, or the
result when the input was accepted). docs/RELIABILITY.md holds the table
with the outcome reported before the fixes.

    python benchmarks/reliability_probe.py            # all cases, about a minute
    python benchmarks/reliability_probe.py --only ingest

Every server touched is on 127.0.0.1 and started here (a listener that
sends garbage); nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import socket
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

import infoclust_dask as ic
from infoclust_dask.cli import main as cli

CASES: list = []


def case(group, text):
    def deco(fn):
        CASES.append((group, text, fn))
        return fn
    return deco


def run_cli(*args):
    err = io.StringIO()
    out = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = cli([str(a) for a in args])
    lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("infoclust: error")]
    return f"exit {rc}" + (f": {lines[0][len('infoclust: error: '):]}" if lines else "")


def py(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = fn()
        return f"accepted: {out}"
    except Exception as exc:  # noqa: BLE001 - the probe reports whatever happens
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def blobs(n=2000, d=3):
    X, z, _ = ic.datasets.make_blobs(n, d, centers=2, random_state=0, lazy=False)
    return X, z


def store(tmp, name="s.zarr", **kw):
    X, z = blobs()
    return ic.write_dataset(tmp / name, X, label=z, chunks=500, **kw)


def edit_json(path, fn):
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


# -- security --------------------------------------------------------------
@case("security", "model.json with centres wider than the data")
def _(tmp):
    X, _ = blobs()
    m = ic.KMeans(2, random_state=0, scheduler="sync").fit(X)
    p = ic.save_model(m, tmp / "m.json")
    edit_json(p, lambda d: d["fitted"]["cluster_centers_"].update(
        __ndarray__=[r + [0.0] * 50 for r in d["fitted"]["cluster_centers_"]["__ndarray__"]]))
    return py(lambda: ic.load_model(p).predict(X))


@case("security", "model.json with 2 000 000 centres")
def _(tmp):
    X, _ = blobs()
    m = ic.KMeans(2, random_state=0, scheduler="sync").fit(X)
    p = ic.save_model(m, tmp / "m.json")
    edit_json(p, lambda d: (d["params"].update(n_clusters=2_000_000), d["fitted"]["cluster_centers_"].update(
        __ndarray__=[[0.0, 0.0, 0.0]] * 2_000_000)))
    return py(lambda: ic.load_model(p))


@case("security", "manifest entry ../../../../etc/passwd")
def _(tmp):
    s = store(tmp)
    man = s / "x" / "infoclust-manifest.json"
    edit_json(man, lambda d: d["chunks"].update({"../../../../../../etc/passwd": [1, 0]}))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli(["verify", str(s)])
    return f"exit {code}: " + "; ".join(json.loads(out.getvalue())["problems"])


# -- metadata ---------------------------------------------------------------
def _meta_case(edit):
    def fn(tmp):
        s = store(tmp)
        edit(s)
        return f"verify {run_cli('verify', s)}; fit {run_cli('fit', 'kmeans', s, '-k', '2', '--scheduler', 'sync', '--storage', tmp / 'st')}"
    return fn


for text, edit in {
    "x/zarr.json deleted": lambda s: (s / "x" / "zarr.json").unlink(),
    "x shape edited bigger": lambda s: edit_json(s / "x" / "zarr.json", lambda d: d.update(shape=[4000, 3])),
    "x shape 10^15": lambda s: edit_json(s / "x" / "zarr.json", lambda d: d.update(shape=[10**15, 3])),
    "x shape negative": lambda s: edit_json(s / "x" / "zarr.json", lambda d: d.update(shape=[-5, 3])),
    "x features 7 where the chunks hold 3": lambda s: edit_json(s / "x" / "zarr.json",
                                                                 lambda d: d.update(shape=[2000, 7])),
    "x data_type float32 over float64 bytes": lambda s: edit_json(s / "x" / "zarr.json",
                                                                   lambda d: d.update(data_type="float32")),
    "x chunk_shape [0, 3]": lambda s: edit_json(s / "x" / "zarr.json", lambda d: d["chunk_grid"]["configuration"]
                                                .update(chunk_shape=[0, 3])),
    "unknown codec 'evilcodec'": lambda s: edit_json(s / "x" / "zarr.json",
                                                     lambda d: d["codecs"].append({"name": "evilcodec"})),
    "compressor removed": lambda s: edit_json(s / "x" / "zarr.json", lambda d: d.update(
        codecs=[c for c in d["codecs"] if c["name"] not in ("blosc", "zstd", "lz4", "gzip")])),
    "endianness flipped": lambda s: edit_json(s / "x" / "zarr.json", lambda d: [
        c["configuration"].update(endian="big") for c in d["codecs"] if c["name"] == "bytes"]),
    "root zarr.json garbage": lambda s: (s / "zarr.json").write_text("{garbage"),
    "schema_version 999": lambda s: edit_json(s / "zarr.json", lambda d: d["attributes"].update(schema_version=999)),
    "label shape edited": lambda s: edit_json(s / "label" / "zarr.json", lambda d: d.update(shape=[1500])),
    "class_names a number": lambda s: edit_json(s / "zarr.json", lambda d: d["attributes"].update(class_names=7)),
    "feature_std a string": lambda s: edit_json(s / "zarr.json", lambda d: d["attributes"].update(feature_std="x")),
}.items():
    case("store metadata", text)(_meta_case(edit))


@case("store bytes", "one byte flipped inside a chunk of x")
def _(tmp):
    s = store(tmp)
    c = sorted((s / "x" / "c").rglob("*"))
    c = [p for p in c if p.is_file()][0]
    b = bytearray(c.read_bytes())
    b[len(b) // 2] ^= 0x40
    c.write_bytes(bytes(b))
    return run_cli("fit", "kmeans", s, "-k", "2", "--scheduler", "sync", "--storage", tmp / "st")


@case("store bytes", "manifest and one chunk of x deleted")
def _(tmp):
    s = store(tmp)
    (s / "x" / "infoclust-manifest.json").unlink()
    [p for p in sorted((s / "x" / "c").rglob("*")) if p.is_file()][0].unlink()
    return run_cli("fit", "kmeans", s, "-k", "2", "--scheduler", "sync", "--storage", tmp / "st")


@case("store bytes", "manifest of x deleted (chunks intact)")
def _(tmp):
    s = store(tmp)
    (s / "x" / "infoclust-manifest.json").unlink()
    return (f"fit {run_cli('fit', 'kmeans', s, '-k', '2', '--scheduler', 'sync', '--storage', tmp / 'st')}; "
            f"with --trust {run_cli('fit', 'kmeans', s, '-k', '2', '--scheduler', 'sync', '--storage', tmp / 'st', '--trust')}")


@case("store bytes", "label chunk and label manifest deleted, then fit dc")
def _(tmp):
    s = store(tmp)
    (s / "label" / "infoclust-manifest.json").unlink()
    [p for p in sorted((s / "label" / "c").rglob("*")) if p.is_file()][0].unlink()
    return run_cli("fit", "dc", s, "-k", "2", "--scheduler", "sync", "--storage", tmp / "st")


# -- inputs -----------------------------------------------------------------
@case("inputs", ".npy whose header claims 10^11 rows")
def _(tmp):
    p = tmp / "big.npy"
    np.save(p, np.zeros((10, 3)))
    raw = p.read_bytes().replace(b"(10, 3)", b"(100000000000, 3)")
    p.write_bytes(raw)
    t0 = time.perf_counter()
    out = run_cli("ingest", p, tmp / "big.zarr")
    return f"{out} ({time.perf_counter() - t0:.1f} s)"


@case("inputs", "KMeans(2).fit(X * 1e300)")
def _(tmp):
    X, _ = blobs()
    return py(lambda: ic.KMeans(2, random_state=0, scheduler="sync").fit(X * 1e300).inertia_)


@case("inputs", "SoftKMeans(2).fit(X * 1e300)")
def _(tmp):
    X, _ = blobs()
    return py(lambda: ic.SoftKMeans(2, random_state=0, scheduler="sync").fit(X * 1e300).cluster_centers_[0])


@case("inputs", "ingest --standardize of a CSV with 1e300 values")
def _(tmp):
    X, _ = blobs()
    np.savetxt(tmp / "h.csv", X * 1e300, delimiter=",", header="a,b,c", comments="")
    return run_cli("ingest", tmp / "h.csv", tmp / "h.zarr", "--standardize")


@case("inputs", "DC with y a permutation of X's sample coordinate (xarray)")
def _(tmp):
    import xarray as xr

    X, z = blobs(600)
    Xa = xr.DataArray(X, dims=("sample", "feature"), coords={"sample": np.arange(600)})
    perm = np.random.default_rng(0).permutation(600)
    ya = xr.DataArray(z[perm], dims=("sample",), coords={"sample": perm})
    return py(lambda: ic.DiscriminativeClustering(2, random_state=0, scheduler="sync", max_iter=5)
              .fit(Xa, ya).contingency_.tolist())


@case("inputs", "DC with y over disjoint sample coordinates (xarray)")
def _(tmp):
    import xarray as xr

    X, z = blobs(600)
    Xa = xr.DataArray(X, dims=("sample", "feature"), coords={"sample": np.arange(600)})
    ya = xr.DataArray(z, dims=("sample",), coords={"sample": np.arange(600) + 10_000})
    return py(lambda: ic.DiscriminativeClustering(2, random_state=0, scheduler="sync", max_iter=5).fit(Xa, ya))


@case("inputs", "a 3-D DataArray")
def _(tmp):
    import xarray as xr

    return py(lambda: ic.KMeans(2, scheduler="sync").fit(xr.DataArray(np.zeros((4, 3, 2)))))


@case("inputs", "DC y with 600 distinct continuous floats")
def _(tmp):
    X, _ = blobs(600)
    return py(lambda: ic.DiscriminativeClustering(2, random_state=0, scheduler="sync", max_iter=3)
              .fit(X, np.random.default_rng(0).normal(size=600)).n_classes_)


@case("inputs", "SMIC class_prior not summing to 1")
def _(tmp):
    X, _ = blobs(300)
    return py(lambda: ic.SMIC(2, t=5, class_prior=[0.2, 0.2], scheduler="sync").fit(X))


@case("inputs", "CMBC predict on non-binary rows")
def _(tmp):
    Y, Q, _ = ic.datasets.make_cmbc_data(500, random_state=0)
    m = ic.CMBC(2, random_state=0, scheduler="sync").fit(Y, known=Q[:, 0])
    return py(lambda: m.predict(np.full((3, Y.shape[1]), 0.5)))


@case("inputs", "CMBC on all-zero data")
def _(tmp):
    return py(lambda: ic.CMBC(2, random_state=0, scheduler="sync").fit(np.zeros((200, 6)), known=np.zeros(200)))


for text, make in {
    "KMeans(tol=nan)": lambda: ic.KMeans(2, tol=float("nan")),
    "SoftKMeans(perturbation=nan)": lambda: ic.SoftKMeans(2, perturbation=float("nan")),
    "DC(sigma=nan)": lambda: ic.DiscriminativeClustering(2, sigma=float("nan")),
    "CMBC(gamma=nan)": lambda: ic.CMBC(2, gamma=float("nan")),
    "SoftKMeans(beta=inf)": lambda: ic.SoftKMeans(2, beta=float("inf")),
}.items():
    case("parameters", text)(lambda tmp, make=make, text=text: py(
        lambda: make().set_params(scheduler="sync").fit(blobs(200)[0], *([blobs(200)[1]] if "DC" in text else []))))


@case("parameters", "CLI --tol nan, dc --sigma nan, cmbc --gamma nan")
def _(tmp):
    s = store(tmp)
    return "; ".join(run_cli("fit", *a, "--scheduler", "sync", "--storage", tmp / "st") for a in (
        ("kmeans", s, "-k", "2", "--tol", "nan"), ("dc", s, "-k", "2", "--sigma", "nan"),
        ("cmbc", s, "-k", "2", "--gamma", "nan")))


# -- CLI ingest -------------------------------------------------------------
def _csv(tmp, text, name="c.csv"):
    (tmp / name).write_text(text)
    return tmp / name


for text, (content, extra) in {
    "ingest --folds 0": ("a,b\n1,2\n3,4\n5,6\n", ("--folds", "0")),
    "an empty label cell": ("a,b,cls\n1,2,x\n3,4,\n5,6,y\n", ("--label-column", "cls")),
    "duplicate headers a,a": ("a,a\n1,2\n3,4\n", ()),
    "a UTF-8 BOM before the first header, --label-column cls": ("\ufeffcls,a\nx,1\ny,2\nx,3\n",
                                                               ("--label-column", "cls")),
    "a short ragged row": ("a,b,c\n1,2,3\n4,5\n6,7,8\n", ()),
    "a trailing comma on every line": ("a,b,c,\n1,2,3,\n4,5,6,\n", ()),
    "a 20 MB cell": ("a,b\n1," + "9" * 20_000_000 + "\n3,4\n", ()),
}.items():
    case("ingest", text)(lambda tmp, content=content, extra=extra: run_cli(
        "ingest", _csv(tmp, content), tmp / "o.zarr", *extra))


@case("ingest", "a destination inside the source store")
def _(tmp):
    s = store(tmp)
    np.save(tmp / "a.npy", np.ones((10, 2)))
    return (f"cli {run_cli('ingest', tmp / 'a.npy', s / 'x' / 'inner.zarr')}; "
            f"python {py(lambda: ic.write_dataset(s / 'x' / 'inner.zarr', np.ones((10, 2))))}")


@case("ingest", "--write-labels ''")
def _(tmp):
    s = store(tmp)
    return run_cli("fit", "kmeans", s, "-k", "2", "--scheduler", "sync", "--storage", tmp / "st", "--write-labels", "")


@case("ingest", "write_dataset(fold=-1 everywhere)")
def _(tmp):
    return py(lambda: ic.write_dataset(tmp / "f.zarr", np.ones((10, 2)), fold=np.full(10, -1)))


@case("ingest", "a read-only destination folder")
def _(tmp):
    ro = tmp / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    np.save(tmp / "a.npy", np.ones((10, 2)))
    try:
        if os.geteuid() == 0:
            return "(skipped: root ignores permissions)"
        return run_cli("ingest", tmp / "a.npy", ro / "d.zarr")
    finally:
        os.chmod(ro, 0o700)


@case("model files", "load_model with n_clusters 'two' / -3 / no cluster_centers_")
def _(tmp):
    X, _ = blobs()
    m = ic.KMeans(2, random_state=0, scheduler="sync").fit(X)
    out = []
    for edit in (lambda d: d["params"].update(n_clusters="two"), lambda d: d["params"].update(n_clusters=-3),
                 lambda d: d["fitted"].pop("cluster_centers_")):
        p = ic.save_model(m, tmp / "m.json", overwrite=True)
        edit_json(p, edit)
        out.append(py(lambda p=p: ic.load_model(p)))
    return " | ".join(out)


# -- schedulers -------------------------------------------------------------
def _garbage_listener(payload: bytes):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            with contextlib.suppress(OSError):
                c.sendall(payload)
                time.sleep(0.5)
                c.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv


for text, payload in {"a listener that sends garbage": b"\x00garbage\xff" * 100,
                      "an HTTP server": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                      "a frame announcing 2^62 bytes": (2**62).to_bytes(8, "little") * 4,
                      "a silent listener": b""}.items():
    def fn(tmp, payload=payload):
        srv = _garbage_listener(payload)
        try:
            s = store(tmp)
            t0 = time.perf_counter()
            out = run_cli("fit", "kmeans", s, "-k", "2", "--scheduler", f"tcp://127.0.0.1:{srv.getsockname()[1]}",
                          "--storage", tmp / "st")
            return f"{out} ({time.perf_counter() - t0:.0f} s)"
        finally:
            srv.close()
    case("schedulers", f"--scheduler at {text}")(fn)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", default=None, help="run only the cases of this group")
    a = p.parse_args()
    print("| group | case | outcome now |")
    print("|---|---|---|")
    for group, text, fn in CASES:
        if a.only and a.only != group:
            continue
        tmp = Path(tempfile.mkdtemp(prefix="probe-"))
        try:
            out = fn(tmp)
        except Exception as exc:  # noqa: BLE001
            out = f"PROBE CRASHED: {type(exc).__name__}: {exc}"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        out = " ".join(str(out).split())[:260].replace("|", "/")
        print(f"| {group} | {text} | {out} |", flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
