"""Where numba may cache the compiled kernels of
:mod:`infoclust_dask.kernels._loops` (the folders numba itself tries),
so that a read-only install run by a user without a writable home
compiles without a cache instead of failing."""

from __future__ import annotations

import os

__all__ = ["can_cache"]


def _writable(folder: str) -> bool:
    """``folder`` exists (or can be created) and this user may write in it."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def can_cache() -> bool:
    """Whether numba can cache these kernels somewhere (the folders numba
    itself tries, in its order): ``$NUMBA_CACHE_DIR``, ``__pycache__``
    beside this file, numba's user cache folder."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return _writable(os.environ["NUMBA_CACHE_DIR"])
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.join(here, "__pycache__")
    if os.access(tree if os.path.isdir(tree) else here, os.W_OK | os.X_OK):
        return True
    user = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return _writable(os.path.join(user, "numba"))
