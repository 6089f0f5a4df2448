"""A request the object store answered with a server error (HTTP 500, 502,
503 or 504; S3's ``InternalError``, ``ServiceUnavailable``, ...) is tried
again, within s3fs's own bounded loop of attempts (``S3FileSystem.retries``:
``INFOCLUST_S3_ATTEMPTS`` in a process that opened a store,
:mod:`infoclust_dask.storage.location`). S3 documents these answers as
transient - retry the request - and botocore's "standard" mode retries them,
but this package makes one botocore attempt per s3fs try (the deadlines stay
bounded), and s3fs retries only "SlowDown"-type answers by itself. A client
error (4xx: a missing key, a refused credential) is never retried.

The rule reaches s3fs through its public hook,
:func:`s3fs.set_custom_error_handler`, installed once per process
(:func:`retry_server_errors`): where a store is opened, and on each dask
worker in its first read of a chunk (:func:`infoclust_dask.storage.bound.read_rows`).
A handler someone installed before is kept and asked too. Retrying an S3
PUT is safe: the same bytes under the same key."""

from __future__ import annotations

import sys
import threading
from typing import Any

__all__ = ["retry_server_errors", "is_server_error", "SERVER_ERROR_CODES"]

#: error codes S3 and S3-compatible servers answer a transient failure of their own with
SERVER_ERROR_CODES = frozenset({"InternalError", "InternalFailure", "ServiceUnavailable", "ServiceUnavailableException",
                                "InternalServerError", "500", "502", "503", "504"})

_LOCK = threading.Lock()
_INSTALLED: list = []  # the handler installed in this process (at most one)


def is_server_error(exc: BaseException) -> bool:
    """True when ``exc`` is botocore's error for an answer of the server
    about itself: an HTTP status of 500 or more, or one of
    :data:`SERVER_ERROR_CODES`."""
    response: Any = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return False
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    code = str((response.get("Error") or {}).get("Code", ""))
    return (isinstance(status, int) and status >= 500) or code in SERVER_ERROR_CODES


def retry_server_errors() -> bool:
    """Make s3fs try a request again after a server error (module notes);
    once per process, and only where s3fs is imported already (a process
    that reads no S3 store never imports it). Returns whether the rule is
    in place."""
    if _INSTALLED:
        return True
    if "s3fs" not in sys.modules:
        return False
    import s3fs

    hook = getattr(s3fs, "set_custom_error_handler", None)
    if hook is None:  # an s3fs without the public hook: its own rules only
        return False
    with _LOCK:
        if _INSTALLED:
            return True
        before = getattr(sys.modules.get("s3fs.core"), "CUSTOM_ERROR_HANDLER", None)

        def handler(exc: BaseException) -> bool:
            return is_server_error(exc) or bool(before is not None and before(exc))

        hook(handler)
        _INSTALLED.append(handler)
    return True
