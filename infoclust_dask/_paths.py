"""Paths and URLs. Stores may live at fsspec URLs (:mod:`._location`);
run folders, models, caches and source files live on local (or shared) file
systems in this version: there a string with a ``scheme://`` prefix
(``s3://``, ``gs://``, ``az://``, ``memory://``, ...) is refused with a
message that says so, naming the file-system package when it is not
installed either, and is never taken for a relative path (which would
create a folder called ``s3:`` in the working directory). ``file://`` URLs
are local paths."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["URLNotSupported", "url_protocol", "local_path"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


class URLNotSupported(ValueError):
    """A URL where this version takes a local path only."""


def url_protocol(path) -> str | None:
    """The scheme of a ``scheme://...`` string (lower case), else None."""
    if isinstance(path, os.PathLike):
        return None
    m = _SCHEME.match(str(path)) if isinstance(path, str) else None
    return m.group(1).lower() if m else None


def local_path(path, what: str = "path") -> Path:
    """``path`` as a local :class:`~pathlib.Path`; ``file://`` URLs become
    paths; any other URL raises :class:`URLNotSupported` naming it (and the
    package fsspec needs for its protocol when that is not installed)."""
    proto = url_protocol(path)
    if proto is None:
        return Path(path)
    if proto == "file":
        return Path(str(path)[len("file://"):])
    missing = ""
    try:
        import fsspec

        fsspec.get_filesystem_class(proto)
    except ImportError as exc:
        missing = f" (and no file system for {proto}:// is installed: {exc})"
    except ValueError:
        missing = f" (fsspec knows no protocol {proto!r})"
    raise URLNotSupported(
        f"The {what} '{path}' is a {proto}:// URL{missing}. This version of infoclust_dask keeps run folders, "
        "models, caches and source files on local or shared file systems (dataset stores may be URLs): pass a "
        "local path. Nothing was created.")
