"""Paths and URLs. Stores (:mod:`._location`), run folders, model files,
model versions and the cross-validation cache may live at fsspec URLs
(``s3://``, ``gs://``, ``az://``, ``memory://``, ...):
:func:`infoclust_dask._location.run_path`
gives a :class:`pathlib.Path` for a local path and a ``UPath``
(universal_pathlib: the pathlib interface over fsspec) for a URL. Source
files (what ``ingest`` reads) are local: there a ``scheme://`` string is
refused by :func:`local_path` with a message that says so. A URL is never
taken for a relative path (which would create a folder called ``s3:`` in
the working directory); ``file://`` URLs are local paths."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["URLNotSupported", "url_protocol", "local_path", "is_url"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


class URLNotSupported(ValueError):
    """A URL where this version takes a local path only."""


def url_protocol(path) -> str | None:
    """The scheme of a ``scheme://...`` string or of a remote ``UPath``
    (lower case), else None."""
    proto = _upath_protocol(path)
    if proto is not None:
        return proto
    if isinstance(path, os.PathLike):
        return None
    m = _SCHEME.match(str(path)) if isinstance(path, str) else None
    return m.group(1).lower() if m else None


def _upath_protocol(path) -> str | None:
    """The protocol of a ``UPath`` that is not a local one, else None."""
    if type(path).__module__.startswith("upath") and not isinstance(path, Path):
        protocol = getattr(path, "protocol", "") or ""
        return protocol.lower() if protocol not in ("", "file", "local") else None
    return None


def is_url(path) -> bool:
    """True for a ``scheme://`` string (other than ``file://``) or a remote ``UPath``."""
    proto = url_protocol(path)
    return proto is not None and proto != "file"


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
        f"The {what} '{path}' is a {proto}:// URL{missing}. infoclust_dask reads source files from local or "
        "shared file systems (stores, run folders, models and caches may be URLs): pass a local path. Nothing "
        "was created.")
