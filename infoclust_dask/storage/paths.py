"""Paths and URLs. Stores (:mod:`._location`), run folders, model files,
model versions and the cross-validation cache may live at fsspec URLs
(``s3://``, ``gs://``, ``az://``, ``memory://``, ...):
:func:`infoclust_dask.storage.location.run_path`
gives a :class:`pathlib.Path` for a local path and a ``UPath``
(universal_pathlib: the pathlib interface over fsspec) for a URL. Source
files (what ``ingest`` reads) are local: there a ``scheme://`` string is
refused by :func:`local_path` with a message that says so. A URL is never
taken for a relative path (which would create a folder called ``s3:`` in
the working directory); ``file://`` URLs are local paths.

Every path that may be a URL passes :func:`check_path` first: credentials
written into a URL (``s3://KEY:SECRET@bucket/...``) are refused with the URL
shown redacted, and a known fsspec protocol followed by one slash or none
(``s3:/bucket/x.zarr``) is refused rather than taken for a local folder
named ``s3:``. :func:`redact` removes URL credentials and the values of
credential environment variables from any text shown to a user (the CLI's
error lines and warnings)."""

from __future__ import annotations

from typing import Any

import os
import re
from pathlib import Path

__all__ = ["URLNotSupported", "url_protocol", "local_path", "is_url", "check_path", "redact", "CREDENTIAL_QUERY_WORDS", "SECRET_ENV",
           "absolute_or_url"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
#: ``scheme:`` with one slash or none (``s3:/b/x``, ``s3:b/x``): a mistyped URL, never a folder name
_SHORT_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):(?!//)")
# the redaction rules live in _support (the messages of every layer use them; storage imports nothing above it)
from .._support.redact import CREDENTIAL_QUERY_WORDS, SECRET_ENV, has_query_secret, redact  # noqa: E402

class URLNotSupported(ValueError):
    """A URL where this version takes a local path only."""


def url_protocol(path: Any) -> str | None:
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


def is_url(path: Any) -> bool:
    """True for a ``scheme://`` string (other than ``file://``) or a remote ``UPath``."""
    proto = url_protocol(path)
    return proto is not None and proto != "file"


def _known_protocol(name: str) -> bool:
    try:
        import fsspec
    except ImportError:  # pragma: no cover - fsspec is a dependency
        return name.lower() in ("s3", "s3a", "gs", "gcs", "az", "abfs", "memory", "http", "https", "file")
    return name.lower() in fsspec.available_protocols()


def check_path(path: Any, what: str = "path") -> Any:
    """Refuse what must never be taken as written: a URL carrying
    credentials (shown redacted; credentials come from the environment of
    each process, see :mod:`infoclust_dask.storage.location`) and a known fsspec
    protocol followed by one slash or none (a mistyped URL that would
    otherwise become a local folder named ``s3:``). Returns ``path``."""
    if isinstance(path, os.PathLike) and _upath_protocol(path) is None:
        return path
    text = str(path)
    m = _SCHEME.match(text)
    if m:
        if "@" in text[m.end():]:  # USER:SECRET@ (a secret may hold '/'); '@' in a store's folder name is refused too
            raise ValueError(
                f"The {what} '{redact(text)}' carries credentials in the URL (USER:SECRET@ or KEY@); they are "
                "refused (a URL is shown in logs, run summaries and task graphs). Remove them and give them the "
                "standard way (S3: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or ~/.aws/credentials; GCS: "
                "GOOGLE_APPLICATION_CREDENTIALS). A folder whose name holds '@' needs another name.")
        if has_query_secret(text):
            raise ValueError(
                f"The {what} '{redact(text)}' carries credentials in its query string (a signature, token, "
                "secret or key); they are refused (a URL is shown in logs, run summaries and task graphs). Remove "
                "the query string and give credentials the standard way (S3: AWS_ACCESS_KEY_ID / "
                "AWS_SECRET_ACCESS_KEY or ~/.aws/credentials; GCS: GOOGLE_APPLICATION_CREDENTIALS).")
        return path
    short = _SHORT_SCHEME.match(text)
    if short and _known_protocol(short.group(1)):
        proto = short.group(1)
        rest = text[short.end():]
        if proto.lower() == "file":  # a local path: file:///abs/path (three slashes), or the path itself
            local = "/" + rest.lstrip("/") if rest.startswith("/") else rest
            url = (f" (or 'file://{redact(local)}' as a URL: 'file://' and the absolute path's own slash)"
                   if local.startswith("/") else "")
            raise ValueError(f"The {what} '{redact(text)}' starts with 'file:' but not 'file://': write "
                             f"'{redact(local)}'{url}. Nothing was created.")
        fixed = f"{proto}://{rest.lstrip('/')}"
        raise ValueError(
            f"The {what} '{redact(text)}' starts with the protocol '{proto}:' but not '{proto}://': write "
            f"'{redact(fixed)}' for a URL, or './{redact(text)}' for a local path. Nothing was created.")
    return path


def absolute_or_url(path: Any) -> str:
    """A local path made absolute, or a URL as given (without a trailing slash): how run summaries and
    label attributes name a store or a model."""
    return str(path).rstrip("/") if is_url(path) else str(Path(path).resolve())


def local_path(path: Any, what: str = "path") -> Path:
    """``path`` as a local :class:`~pathlib.Path`; ``file://`` URLs become
    paths; any other URL raises :class:`URLNotSupported` naming it (and the
    package fsspec needs for its protocol when that is not installed)."""
    check_path(path, what)
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
        f"The {what} '{redact(path)}' is a {proto}:// URL{missing}. infoclust_dask reads source files from local or "
        "shared file systems (stores, run folders, models and caches may be URLs): pass a local path. Nothing "
        "was created.")
