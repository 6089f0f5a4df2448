"""The layers of docs/ARCHITECTURE.md, checked on the source: no import
cycles between modules, kernels import no dask (nor anything above them),
only the engine and the scheduler module compute or build task graphs by
hand, the CLI does not import pipelines and pipelines do not import the CLI."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "infoclust_dask"
#: modules at the package root: the public entry points and the few helpers every layer reaches
ROOT_MODULES_MAX = 16


def _module_name(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path):
    """Absolute names of every module ``path`` imports (anywhere in it)."""
    out = set()
    for node, target in _import_nodes(path):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        else:
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)
    return out


def _import_nodes(path):
    """``(node, absolute module name)`` of every import statement in ``path``
    (``from`` imports resolved against the module's package; ``None`` for a
    plain ``import``)."""
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield node, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                yield node, ".".join(base + ([node.module] if node.module else []))
            else:
                yield node, node.module


def _sources(*dirs):
    return [p for d in dirs for p in sorted((ROOT / d).rglob("*.py"))]


MODULES = {_module_name(p): p for p in _sources("infoclust_dask")}


def _internal(path):
    return {m for m in _imports(path) if m in MODULES}


def test_no_module_imports_one_that_imports_it_back():
    graph = {name: _internal(p) - {name} for name, p in MODULES.items()}
    # packages re-export their modules; an __init__ importing its own children is not a cycle
    for name in graph:
        graph[name] = {m for m in graph[name] if not m.startswith(name + ".")}
    cycles = [(a, b) for a in graph for b in graph[a] if a in graph.get(b, ()) and a < b]
    assert not cycles, cycles


def _edges(path):
    """The package's modules ``path`` imports, anywhere in it (function-level
    imports too): ``from X import a`` is an edge to ``X.a`` when that is a
    module, else to ``X`` (so a module naming its package only to reach a
    sibling, ``from . import execute``, is an edge to the sibling)."""
    out = set()
    for node, target in _import_nodes(path):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in MODULES)
        else:
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in MODULES else target)
    return {m for m in out if m in MODULES and m != _module_name(path)}


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_of_any_length():
    """No chain of imports, function-level ones included, leads back to
    where it started (runs -> cluster -> _base -> runs was one: a warm
    start now reads its model file through ``_models`` with its own class)."""
    graph = {name: _edges(p) for name, p in MODULES.items()}
    assert graph["infoclust_dask.runs"] and graph["infoclust_dask.cluster._base"]  # the edges are seen
    assert not _cycles(graph), _cycles(graph)


def _package(module):
    """The package a module belongs to: ``infoclust_dask.io.store`` -> ``io``,
    a module at the root is its own package (``preprocess``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph():
    """The packages' import graph (function-level imports included), with
    the module imports behind each edge."""
    graph, why = {}, {}
    for name, path in MODULES.items():
        for target in _edges(path):
            a, b = _package(name), _package(target)
            if a != b:
                graph.setdefault(a, set()).add(b)
                why.setdefault((a, b), []).append(f"{name} -> {target}")
    return graph, why


def test_no_import_cycle_between_packages():
    """No package imports one that imports it back, at any depth and inside
    functions too (issue 66: ``io`` imported ``preprocess`` inside ingest's
    functions while ``preprocess`` imported ``io``; ``_support.messages``
    imported ``storage.paths`` while ``storage`` imports ``_support``). Where
    a cycle appears, the message names the module imports behind its edges."""
    graph, why = package_graph()
    assert "preprocess" in graph["io"] and "_support" in graph["storage"]  # the edges are seen
    cycles = _cycles(graph)
    detail = [e for comp in cycles for a in comp for b in comp if (a, b) in why for e in why[(a, b)]]
    assert not cycles, (cycles, detail)


#: imports of another package's private module or name that are allowed, each with its reason
PRIVATE_CROSSINGS = {
    # extend.py is the public face of the estimators' building blocks for user-written estimators (its purpose):
    # it re-exports what cluster/_base.py and cluster/_xarray.py define for the package's own estimators
    ("infoclust_dask.extend", "infoclust_dask.cluster._base"): "the extension API re-exports the base class",
    ("infoclust_dask.extend", "infoclust_dask.cluster._xarray"): "the extension API re-exports data_method",
}


def private_crossings():
    """``(importer, module, name)`` of every import (function-level too) of
    another package's private module (a part after the package starting
    with ``_``) or private name (``_x``). ``_support/`` and the root's
    private modules (``_inputs.py``, ``_models.py``) are the library's shared
    helpers, private to the library, not to a package."""
    found = []
    for name, path in MODULES.items():
        for node, target in _import_nodes(path):
            if not isinstance(node, ast.ImportFrom) or not (target or "").startswith("infoclust_dask"):
                continue
            for a in node.names:
                module = f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target
                if _package(module) == _package(name) or _package(module) == "_support":
                    continue
                inner = module.split(".")[2:]  # the parts below the package
                private_module = any(p.startswith("_") for p in inner)
                private_name = a.name.startswith("_") and not a.name.startswith("__") and module == target
                if (private_module or private_name) and (name, module) not in PRIVATE_CROSSINGS:
                    found.append(f"{name} imports {a.name} from {module}")
    return found


def test_no_private_name_crosses_packages():
    """Each package's private modules and names are its own (issue 66: the
    ingest side reached into the store's ``_WriteLock``, ``_temp_name``,
    ``_write_manifest``...; the engine into ``kernels._compiled`` and the
    root's ``_scheduler``): the store, the kernels and the engine are used
    through their public names (``storage.atomic.WriteLock``,
    ``kernels.numpy_form``, ``engine.clients``). The exceptions, each with
    its reason, are :data:`PRIVATE_CROSSINGS`."""
    assert not private_crossings(), private_crossings()


def test_the_cycle_finder_finds_a_long_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


@pytest.mark.parametrize("path", _sources("infoclust_dask/kernels"), ids=lambda p: p.name)
def test_kernels_import_no_dask_and_nothing_above_them(path):
    names = _imports(path)
    assert not {n for n in names if n.split(".")[0] in ("dask", "distributed", "xarray", "zarr")}, names
    above = {n for n in names if n.startswith("infoclust_dask") and not n.startswith("infoclust_dask.kernels")}
    assert not above, above


COMPUTE_CALLS = {"compute", "persist", "to_delayed", "from_delayed", "delayed"}


@pytest.mark.parametrize("path", [p for p in _sources("infoclust_dask", "pipelines")
                                  if p.parent.name != "engine"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_engine_computes_or_builds_task_graphs(path):
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            via_engine = isinstance(owner, ast.Name) and owner.id == "engine"
            if node.func.attr in COMPUTE_CALLS and not via_engine:
                bad.append(f"line {node.lineno}: .{node.func.attr}(")
            if node.func.attr == "to_zarr" and not any(k.arg == "compute" for k in node.keywords):
                bad.append(f"line {node.lineno}: to_zarr without compute=False")
        if isinstance(node, ast.Attribute) and node.attr == "values" and isinstance(node.value, ast.Subscript):
            # ds["x"].values computes on dask's local scheduler, whatever scheduler the user chose
            bad.append(f"line {node.lineno}: DataArray .values")
    assert not bad, bad


def test_engine_and_store_do_not_import_each_other():
    for p in _sources("infoclust_dask/engine"):
        assert not {m for m in _imports(p) if m.startswith(("infoclust_dask.storage", "infoclust_dask.io"))}, p
    # the clients module is the engine's lowest: it imports nothing of the package but settings
    assert all(m.startswith("infoclust_dask._support.settings")
               for m in _imports(PKG / "engine" / "clients.py") if m.startswith("infoclust_dask"))


# settings: environment numbers; unreachable: the object-store errors a worker's read raises (issue 64), which
# the engine catches: a module of _support that imports nothing, so that neither layer imports the other;
# redact: credentials out of messages, which every layer's messages (and the store's path checks) use
STORAGE_MAY_IMPORT = {"infoclust_dask.storage", "infoclust_dask._support.settings", "infoclust_dask._support.unreachable",
                      "infoclust_dask._support.redact"}


@pytest.mark.parametrize("path", _sources("infoclust_dask/storage"), ids=lambda p: p.name)
def test_storage_imports_nothing_above_it(path):
    """The storage package holds no compute: it imports neither the engine
    nor the ingest side (``io``), the estimators or the kernels, anywhere in
    it (function-level imports included)."""
    ours = {m for m in _imports(path) if m.startswith("infoclust_dask")}
    above = {m for m in ours if not any(m == a or m.startswith(a + ".") for a in STORAGE_MAY_IMPORT)}
    assert not above, above


def test_the_root_holds_the_entry_points():
    """At most ~15 modules at the package root (public entry points and a
    few shared helpers); the store's layout and the ingest side are their
    own packages."""
    root = sorted(p.name for p in PKG.glob("*.py"))
    assert len(root) <= ROOT_MODULES_MAX, root
    assert (PKG / "storage").is_dir() and (PKG / "io").is_dir()


def test_cli_and_pipelines_do_not_import_each_other():
    assert not {m for m in _imports(PKG / "cli.py") if m.split(".")[0] == "infoclust_pipelines"}
    for p in _sources("pipelines"):
        assert not {m for m in _imports(p) if m.startswith("infoclust_dask.cli")}, p


def test_estimators_and_ingest_import_no_extra(tmp_path):
    """`pip install infoclust_dask` (no extras) is enough for the estimators,
    CSV/.npy ingest, `info` and `fit`, run here with Prefect, matplotlib,
    pyarrow and fastapi made unimportable."""
    import subprocess
    import sys

    code = f"""
import sys
for name in ('prefect', 'matplotlib', 'pyarrow', 'fastapi'):
    sys.modules[name] = None  # as if not installed: importing it raises ImportError
import numpy as np
from infoclust_dask import KMeans, DiscriminativeClustering
from infoclust_dask.cli import main
x = np.random.default_rng(0).normal(size=(200, 3))
KMeans(2, n_init=1, scheduler='sync').fit(x)
DiscriminativeClustering(2, sigma=1.0, max_iter=3, scheduler='sync').fit(x, (x[:, 0] > 0).astype(int))
open({str(tmp_path / 't.csv')!r}, 'w').write('a,b,c\\n' + '\\n'.join(f'{{r[0]}},{{r[1]}},{{r[2]}}' for r in x))
assert main(['ingest', {str(tmp_path / 't.csv')!r}, {str(tmp_path / 's.zarr')!r}]) == 0
assert main(['info', {str(tmp_path / 's.zarr')!r}]) == 0
assert main(['fit', 'kmeans', {str(tmp_path / 's.zarr')!r}, '-k', '2', '--scheduler', 'sync',
             '--storage', {str(tmp_path / 'st')!r}]) == 0
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]


def test_every_package_folder_is_installed():
    """pyproject lists the packages by hand (the flows' folder is mapped to
    another name): a new subpackage must be added there, or it would be
    missing from a wheel."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in PKG.rglob("__init__.py")}
    assert set(conf["packages"]) == folders | {"infoclust_pipelines"}
    assert conf["package-dir"] == {"infoclust_pipelines": "pipelines"}
    assert (ROOT / "pipelines" / "__init__.py").exists()


def _reexported():
    """Names a public package re-exports from its private modules (``from
    ._dc import dc_objective`` in ``cluster/__init__.py``): public wherever
    they are defined."""
    names = set()
    for init in PKG.rglob("__init__.py"):
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.level == 1 and (node.module or "").startswith("_"):
                names.update(a.asname or a.name for a in node.names)
    return names


def _public_functions():
    """Every public function and method (and ``__init__``) of the public
    modules (modules and packages whose names do not start with ``_``), and
    the functions a public package re-exports from its private modules."""
    reexported = _reexported()
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(PKG).parts
        private = any(p.startswith("_") and p != "__init__.py" for p in parts)
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if private:
                if isinstance(node, ast.FunctionDef) and node.name in reexported:
                    yield path, node
                continue
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                yield path, node
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                for f in node.body:
                    if isinstance(f, ast.FunctionDef) and (not f.name.startswith("_") or f.name == "__init__"):
                        yield path, f


def test_every_public_function_has_type_hints():
    """Arguments and return values of the public API are annotated (mypy in
    ``make lint`` then checks their bodies)."""
    found, missing = 0, []
    for path, f in _public_functions():
        found += 1
        args = [a for a in f.args.posonlyargs + f.args.args + f.args.kwonlyargs if a.arg not in ("self", "cls")]
        if any(a.annotation is None for a in args) or (f.returns is None and f.name != "__init__"):
            missing.append(f"{path.relative_to(ROOT)}:{f.lineno} {f.name}")
    assert found > 200
    assert not missing, f"{len(missing)} public functions without type hints:\n" + "\n".join(missing)


def test_every_module_has_a_line_in_the_architecture():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    listed = set(re.findall(r"^\| `([\w/]+\.py)` \|", text, re.M))
    modules = {str(p.relative_to(PKG)) for p in _sources("infoclust_dask")} | {
        f"pipelines/{p.relative_to(ROOT / 'pipelines')}" for p in _sources("pipelines")}
    assert modules == listed, (sorted(modules - listed), sorted(listed - modules))


def test_no_module_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in _sources("infoclust_dask", "pipelines")
            if (n := len(p.read_text().splitlines())) > 600}
    assert not long, long


def _code_lines(f):
    """Lines of code of a function: from its first statement after the
    docstring to the end of its last."""
    body = f.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0


def test_no_function_over_100_lines_of_code():
    """Long work is cut into named steps at its seams (write and append of a
    store, the annealing path of soft K-means)."""
    long = {f"{p.relative_to(ROOT)}:{f.lineno} {f.name}": n for p in _sources("infoclust_dask", "pipelines")
            for f in ast.walk(ast.parse(p.read_text()))
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and (n := _code_lines(f)) > 100}
    assert not long, long


def test_the_function_measure_counts_code_not_docstrings():
    src = "def f():\n    \"\"\"doc\n\n    more\"\"\"\n    a = 1\n\n    return a\n"
    assert _code_lines(ast.parse(src).body[0]) == 3


def test_no_scheduler_carried_between_internal_functions():
    """The runner is installed once, at public entry points
    (``engine.entry_point``, ``engine.installed``); below them nothing hands
    ``scheduler=`` on: no private function takes one, and no call outside
    the engine (which resolves it) passes a variable as ``scheduler=``."""
    bad = []
    for p in _sources("infoclust_dask", "pipelines"):
        if p.parent.name == "engine":
            continue
        for f in ast.walk(ast.parse(p.read_text())):
            if isinstance(f, ast.FunctionDef) and f.name.startswith("_") and f.name != "__init__" and \
                    "scheduler" in [a.arg for a in f.args.args + f.args.kwonlyargs]:
                bad.append(f"{p.relative_to(ROOT)}:{f.lineno} def {f.name}(..., scheduler)")
            # the command hands the user's --scheduler to the estimator it builds (the fit is the entry point);
            # a flow hands its scheduler parameter to its tasks (each an entry point)
            if isinstance(f, ast.keyword) and f.arg == "scheduler" and isinstance(f.value, ast.Name) \
                    and p.parent.name != "pipelines" and p.name != "cli.py":
                bad.append(f"{p.relative_to(ROOT)}:{f.value.lineno} scheduler={f.value.id}")
    assert not bad, bad
