"""An exception as one line for a user of the CLI: what happened, where,
and what to do - a silent or unreachable object store, missing
credentials, a damaged chunk, a bare system error of a write - with URL
credentials and credential environment values redacted
(:func:`infoclust_dask._support.redact.redact`)."""

from __future__ import annotations

import errno
import os

from .redact import redact
from .unreachable import is_connection_error  # re-exported: one check for the library and its messages

__all__ = ["message", "is_connection_error"]


def _endpoint() -> str:
    """The S3 endpoint this process uses, as configured (for messages)."""
    return (os.environ.get("FSSPEC_S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL") or "the provider's default endpoint")


def message(exc: BaseException) -> str:
    """One line for the user, with URL credentials and credential
    environment values redacted (:func:`infoclust_dask._support.redact.redact`)."""
    return redact(" ".join(_explain(exc).split()))


def _explain(exc: BaseException) -> str:
    """The error, and a hint where a bare library error would send the user
    the wrong way."""
    from .unreachable import UNREACHABLE_ERRORS, StorageUnreachable, causes

    if isinstance(exc, StorageUnreachable):  # explained where it was raised (a worker's read)
        return str(exc)
    text = str(exc) or type(exc).__name__
    low = text.lower()
    chain = [type(e).__name__ for e in causes(exc)]
    if any(name in UNREACHABLE_ERRORS for name in chain) or isinstance(exc, TimeoutError) and "endpoint" in low:
        return (f"the object store at {_endpoint()} could not be reached, did not answer or dropped the connection "
                f"({type(exc).__name__}: {text}); check that the server runs and is reachable, and the endpoint "
                "setting (FSSPEC_S3_ENDPOINT_URL or AWS_ENDPOINT_URL); the deadlines are "
                "INFOCLUST_S3_CONNECT_TIMEOUT, INFOCLUST_S3_READ_TIMEOUT (seconds) and INFOCLUST_S3_ATTEMPTS. A write "
                "or an append it interrupted committed all of its rows or none: run it again.")
    if "NoCredentialsError" in chain:
        return (f"no credentials for the object store at {_endpoint()} ({text}): set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, ~/.aws/credentials, an instance role) in the environment "
                "of this process and of the workers; for a public bucket pass storage_options={'anon': True} "
                "from Python.")
    if isinstance(exc, RuntimeError) and ("decompress" in low or "codec" in low or "blosc" in low):
        return (f"a chunk of the store could not be decoded ({text}); the store is damaged: "
                "run `infoclust verify STORE` to list the damaged chunks, then re-ingest it.")
    if isinstance(exc, MemoryError):
        return f"out of memory ({text or 'MemoryError'}); use a smaller chunk size or a cluster with more memory."
    if (isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS and exc.strerror == os.strerror(exc.errno)
            and text.startswith("[Errno")):
        # a bare system error (no message of ours names it): say which file, and what to do
        where = f" '{exc.filename}'" if exc.filename else ""
        return (f"cannot write{where}: {exc.strerror} ({_WRITE_ERRNOS[exc.errno]}); nothing half-written was kept. "
                "Choose a writable destination with free space, or fix that folder.")
    if isinstance(exc, OSError) and exc.filename and exc.filename not in text:
        return f"{text} ('{exc.filename}')"
    return text





#: system errors of a write explained when nothing more specific did
_WRITE_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted",
                 errno.EPERM: "the folder or file is not writable (read-only or immutable)",
                 errno.EACCES: "permission denied", errno.EROFS: "a read-only file system"}
