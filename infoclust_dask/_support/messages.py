"""An exception as one line for a user of the CLI: what happened, where,
and what to do - a silent or unreachable object store, missing
credentials, a damaged chunk, a bare system error of a write - with URL
credentials and credential environment values redacted
(:func:`infoclust_dask.storage.paths.redact`)."""

from __future__ import annotations

import errno
import os

__all__ = ["message", "is_connection_error", "StorageUnreachable", "NoWorkerReachesStorage"]

#: exception class names of unreachable or silent object-store endpoints (botocore, aiohttp, requests)
_UNREACHABLE = ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectTimeout",
                "ReadTimeout", "ClientConnectorError", "ServerTimeoutError", "ConnectionClosedError",
                "ServerDisconnectedError", "ClientPayloadError", "ClientOSError", "ContentLengthError")


def is_connection_error(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it was raised from) says the
    object store could not be reached, did not answer or dropped the
    connection (botocore's, aiohttp's and requests' names for it)."""
    return any(type(e).__name__ in _UNREACHABLE for e in _causes(exc))


class StorageUnreachable(ConnectionError):
    """A dask worker could not reach the object store (its read of a chunk
    failed with a connection error after the configured attempts): raised in
    the worker's task, with the worker's address, so that the engine can run
    that worker's reads on the others (:mod:`infoclust_dask.engine.execute`)
    instead of failing a fit the other workers could finish."""

    def __init__(self, worker: str, text: str) -> None:
        super().__init__(worker, text)

    @property
    def worker(self) -> str:
        return str(self.args[0])

    def __str__(self) -> str:
        return f"dask worker {self.args[0]} could not read the store: {self.args[1]}"


class NoWorkerReachesStorage(StorageUnreachable):
    """Every worker tried failed as :class:`StorageUnreachable` (``worker``:
    their addresses, comma-separated): the store is down or unreachable
    from the cluster, not from one worker."""

    def __str__(self) -> str:
        return str(self.args[1])


def _endpoint() -> str:
    """The S3 endpoint this process uses, as configured (for messages)."""
    return (os.environ.get("FSSPEC_S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL") or "the provider's default endpoint")


def message(exc: BaseException) -> str:
    """One line for the user, with URL credentials and credential
    environment values redacted (:func:`infoclust_dask.storage.paths.redact`)."""
    from ..storage.paths import redact

    return redact(" ".join(_explain(exc).split()))


def _explain(exc: BaseException) -> str:
    """The error, and a hint where a bare library error would send the user
    the wrong way."""
    if isinstance(exc, StorageUnreachable):  # already explained, on the worker
        return str(exc)
    text = str(exc) or type(exc).__name__
    low = text.lower()
    chain = [type(e).__name__ for e in _causes(exc)]
    if any(name in _UNREACHABLE for name in chain) or isinstance(exc, TimeoutError) and "endpoint" in low:
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





def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from (``__cause__`` /
    ``__context__``), at most 10."""
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(out) < 10 and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


#: system errors of a write explained when nothing more specific did
_WRITE_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted",
                 errno.EPERM: "the folder or file is not writable (read-only or immutable)",
                 errno.EACCES: "permission denied", errno.EROFS: "a read-only file system"}
