"""Old import paths of modules that moved (the fourth shape step put the
store's layout in ``storage/``, reading and writing stores in ``io/``, the
solvers in ``solvers/``; the fifth, the engine's ``runners`` and the
root's ``_scheduler`` in ``engine/choose.py`` and ``engine/clients.py``): for one release ``import infoclust_dask.store`` and
``from infoclust_dask.store import open_dataset`` still work, give the module
at its new place (the same object: patching one patches the other) and warn
once with a :class:`DeprecationWarning` that names the new path.

An import hook (a meta path finder), installed by the
package's ``__init__``, answers only for the names in :data:`MOVED`; no file
stands at the old paths.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from types import FrameType

__all__ = ["MOVED", "install"]

#: old module name -> where it lives now (removed in the release after 0.1.0)
MOVED = {
    "infoclust_dask.store": "infoclust_dask.io.store",
    "infoclust_dask.store_open": "infoclust_dask.storage.reading",
    "infoclust_dask.append": "infoclust_dask.io.append",
    "infoclust_dask.ingest": "infoclust_dask.io.ingest",
    "infoclust_dask.ingest_pairs": "infoclust_dask.io.ingest_pairs",
    "infoclust_dask.sources": "infoclust_dask.io.sources",
    "infoclust_dask.folds": "infoclust_dask.io.folds",
    "infoclust_dask.eigen": "infoclust_dask.solvers.eigen",
    "infoclust_dask.optimize": "infoclust_dask.solvers.optimize",
    # the fifth shape step (issue 66): where a fit runs is decided in engine/choose.py, connections in engine/clients.py
    "infoclust_dask.engine.runners": "infoclust_dask.engine.choose",
    "infoclust_dask._scheduler": "infoclust_dask.engine.clients",
}


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points ``warnings.warn`` (called from
    :meth:`_OldName.exec_module`) at the first frame outside this package and
    the import machinery: the user's import line, not ours. Frames of
    ``importlib._bootstrap`` are skipped by ``warnings`` itself and are not
    counted."""
    frame: FrameType | None = sys._getframe(2)  # exec_module's caller
    level = 1
    while frame is not None:
        name = frame.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name
        if not internal:
            level += 1
            if str(frame.f_globals.get("__name__", "")).split(".")[0] not in ("infoclust_dask", "importlib"):
                return level
        frame = frame.f_back
    return level


class _OldName:
    """Finds the names of :data:`MOVED`; loading one puts the module of its
    new name in its place in ``sys.modules`` (the import system then hands
    that module to the importer and binds it on the parent package). The
    finder and loader protocols of :mod:`importlib.abc`, without importing
    it (6 ms of ``import infoclust_dask``)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)  # type: ignore[arg-type]  # a Loader by protocol

    def create_module(self, spec):
        return None  # a throwaway module: exec_module replaces it

    def exec_module(self, module):
        old = module.__name__
        new = MOVED[old]
        warnings.warn(f"The module {old!r} moved to {new!r}; import it from there (the old name goes in the "
                      f"release after 0.1.0).", DeprecationWarning, stacklevel=_caller_stacklevel())
        sys.modules[old] = importlib.import_module(new)


_FINDER = _OldName()


def install() -> None:
    """Put the hook on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _OldName) for f in sys.meta_path):
        sys.meta_path.append(_FINDER)
