"""An object store that answers a request with a server error (HTTP 500 /
503, S3's ``InternalError``) once in a while: the request is tried again
within the bounded attempts and the read or write succeeds
(:mod:`infoclust_dask.storage.server_errors`); a client error (403) is not
tried again. The S3 server is moto's on 127.0.0.1, behind a proxy of this
test that answers the chosen requests itself."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import numpy as np
import pytest

from infoclust_dask.storage.server_errors import is_server_error, retry_server_errors

pytest.importorskip("s3fs")

_BODY = ("<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message>"
         "<RequestId>test</RequestId></Error>")


class FailingProxy:
    """An HTTP proxy on 127.0.0.1 in front of the S3 server: the first
    ``count`` requests of method ``method`` whose path contains ``match``
    are answered with ``status`` and S3's error body for ``code``; every
    request is forwarded otherwise. ``answered`` counts the failures sent,
    ``seen`` the matching requests."""

    def __init__(self, target: str) -> None:
        self.target = urlparse(target)
        self.method, self.match, self.count, self.status, self.code = "GET", "", 0, 500, "InternalError"
        self.answered = self.seen = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _any(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    hit = self.command == proxy.method and proxy.match and proxy.match in self.path
                    if hit:
                        proxy.seen += 1
                    fail = hit and proxy.answered < proxy.count
                    if fail:
                        proxy.answered += 1
                if fail:
                    text = _BODY.format(code=proxy.code, message="We encountered an internal error. Please try "
                                        "again." if proxy.status >= 500 else "Access Denied").encode()
                    self.send_response(proxy.status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(text)))
                    self.end_headers()
                    self.wfile.write(text)
                    return
                conn = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def fail(self, method: str, match: str, count: int, status: int = 500, code: str = "InternalError") -> None:
        with self.lock:
            self.method, self.match, self.count, self.status, self.code = method, match, count, status, code
            self.answered = self.seen = 0

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(s3_server):
    p = FailingProxy(s3_server)
    yield p
    p.close()


def _store(s3_bucket, proxy, X):
    from infoclust_dask import write_dataset

    url = f"{s3_bucket}/s.zarr"
    write_dataset(url, X, chunks=50)  # straight to the server
    return url, {"endpoint_url": proxy.url}


def test_a_chunk_read_answered_500_is_read_again(s3_bucket, proxy):
    from infoclust_dask import open_dataset

    X = np.random.default_rng(0).normal(size=(200, 3))
    url, options = _store(s3_bucket, proxy, X)
    ds = open_dataset(url, storage_options=options)
    proxy.fail("GET", "/s.zarr/x/c/2/0", count=1)
    np.testing.assert_array_equal(ds["x"].values, X)
    assert proxy.answered == 1 and proxy.seen == 2  # the 500, then the read again


def test_a_503_on_a_write_is_written_again(s3_bucket, proxy):
    from infoclust_dask import open_dataset, write_dataset

    X = np.random.default_rng(1).normal(size=(120, 2))
    proxy.fail("PUT", "/w.zarr/x/c/1/0", count=1, status=503, code="ServiceUnavailable")
    write_dataset(f"{s3_bucket}/w.zarr", X, chunks=40, storage_options={"endpoint_url": proxy.url})
    assert proxy.answered == 1 and proxy.seen == 2
    np.testing.assert_array_equal(open_dataset(f"{s3_bucket}/w.zarr")["x"].values, X)


def test_without_a_second_attempt_the_500_reaches_the_reader(s3_bucket, proxy, monkeypatch):
    """The same fault with one attempt (INFOCLUST_S3_ATTEMPTS=1, s3fs's
    loop of one): the read fails, so the read again above is what passed."""
    import s3fs

    from infoclust_dask import open_dataset

    X = np.random.default_rng(2).normal(size=(200, 3))
    url, options = _store(s3_bucket, proxy, X)
    ds = open_dataset(url, storage_options=options)
    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 1)
    proxy.fail("GET", "/s.zarr/x/c/1/0", count=1)
    with pytest.raises(Exception, match="Internal|500|internal error"):
        _ = ds["x"].values
    assert proxy.answered == 1 and proxy.seen == 1


def test_a_client_error_is_not_tried_again(s3_bucket, proxy):
    from infoclust_dask import open_dataset

    X = np.random.default_rng(3).normal(size=(200, 3))
    url, options = _store(s3_bucket, proxy, X)
    ds = open_dataset(url, storage_options=options)
    proxy.fail("GET", "/s.zarr/x/c/3/0", count=1, status=403, code="AccessDenied")
    with pytest.raises(PermissionError):  # s3fs translates a 403 so
        _ = ds["x"].values
    assert proxy.answered == 1 and proxy.seen == 1


def test_the_rule_tells_server_errors_from_the_others():
    from botocore.exceptions import ClientError

    def err(status, code):
        return ClientError({"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
                           "GetObject")

    assert is_server_error(err(500, "InternalError")) and is_server_error(err(503, "SlowDown"))
    assert is_server_error(err(None, "ServiceUnavailable")) and is_server_error(err(502, "BadGateway"))
    assert not is_server_error(err(404, "NoSuchKey")) and not is_server_error(err(403, "AccessDenied"))
    assert not is_server_error(OSError("Internal Server Error")) and not is_server_error(ValueError())
    assert retry_server_errors() and retry_server_errors()  # installed once, in place after
