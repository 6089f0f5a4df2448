"""An object store that does not answer, told apart from other errors: the
exception names botocore, aiohttp and requests use for it
(:func:`is_connection_error`), and :class:`StorageUnreachable`, which a
dask worker's read raises with its address
(:func:`infoclust_dask.storage.bound.read_rows`) so that the engine runs that
worker's reads on the others
(:func:`infoclust_dask.engine.execute.around_unreachable`). Imports nothing:
the storage layer, the engine and the messages all use it."""

from __future__ import annotations

__all__ = ["UNREACHABLE_ERRORS", "causes", "is_connection_error", "StorageUnreachable", "NoWorkerReachesStorage"]

#: exception class names of unreachable or silent object-store endpoints (botocore, aiohttp, requests)
UNREACHABLE_ERRORS = ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectTimeout",
                      "ReadTimeout", "ClientConnectorError", "ServerTimeoutError", "ConnectionClosedError",
                      "ServerDisconnectedError", "ClientPayloadError", "ClientOSError", "ContentLengthError")


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from (``__cause__`` /
    ``__context__``), at most 10."""
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(out) < 10 and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def is_connection_error(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it was raised from) says the
    object store could not be reached, did not answer or dropped the
    connection (botocore's, aiohttp's and requests' names for it)."""
    return any(type(e).__name__ in UNREACHABLE_ERRORS for e in causes(exc))


class StorageUnreachable(ConnectionError):
    """A dask worker could not reach the object store (its read of a chunk
    failed with a connection error after the configured attempts): raised by
    :func:`~infoclust_dask.storage.bound.read_rows` in the worker's task, with the worker's address, so that
    the engine can run that worker's reads on the others
    (:func:`infoclust_dask.engine.execute.around_unreachable`) instead of
    failing a fit the other workers could finish."""

    def __init__(self, worker: str, text: str) -> None:
        super().__init__(worker, text)

    @property
    def worker(self) -> str:
        return str(self.args[0])

    def __str__(self) -> str:
        return (f"dask worker {self.args[0]} could not reach the object store ({self.args[1]}); check that the "
                "server runs and that this worker reaches it, and the workers' endpoint setting "
                "(FSSPEC_S3_ENDPOINT_URL or AWS_ENDPOINT_URL)")


class NoWorkerReachesStorage(StorageUnreachable):
    """Every worker tried failed as :class:`StorageUnreachable` (``worker``:
    their addresses, comma-separated): the store is down or unreachable
    from the cluster, not from one worker."""

    def __str__(self) -> str:
        return str(self.args[1])
