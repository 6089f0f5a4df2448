"""Where a store lives: a local path or an fsspec URL (``s3://``, ``gs://``,
``az://``, ``memory://``, ...), as one :class:`Location` that the store layer
reads, writes and lists through.

Credentials never travel with a location. They come the standard way of
each file system - for S3 the ``AWS_*`` environment variables,
``~/.aws/credentials`` or an instance role; for GCS
``GOOGLE_APPLICATION_CREDENTIALS`` - and every process (this one, each
worker) reads them itself. ``storage_options`` hold only what is not secret
(``endpoint_url``, ``region``, ``anon``): they are pickled into the task
graphs that read the store, so keys that look like secrets are refused.
fsspec's own configuration applies too: ``FSSPEC_S3_ENDPOINT_URL=http://...``
in the environment (or a file in ``~/.config/fsspec/``) sets the S3
endpoint of every process that inherits it, with nothing in any graph.

Every S3 request has deadlines (:func:`object_store_defaults`): a connect
timeout (``INFOCLUST_S3_CONNECT_TIMEOUT``, default 5 s), a read timeout -
the longest silence while a response is awaited or read, not a limit on a
whole transfer (``INFOCLUST_S3_READ_TIMEOUT``, default 15 s) - and a
bounded number of attempts (``INFOCLUST_S3_ATTEMPTS``, default 2: s3fs's
own retry loop, the public class attribute ``S3FileSystem.retries``, when it
is still s3fs's default; botocore makes one attempt per try), so an
endpoint that accepts connections and never answers fails after attempts x
the read timeout per request (``infoclust info`` on such an endpoint: about
a minute with the defaults, two requests) instead of hanging. An answer of
HTTP 500-504 (the server's own transient failure) is tried again within
those attempts (:mod:`infoclust_dask.storage.server_errors`).
``storage_options`` or fsspec's configuration that set ``config_kwargs``
themselves win. The file system objects carry botocore's settings into the
task graphs (fsspec pickles them with their options), so the workers keep
the same timeouts; a worker process keeps s3fs's own 5 tries.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

from .paths import URLNotSupported, _upath_protocol, check_path, is_url, url_protocol
from .._support.settings import env_number

__all__ = ["Location", "absolute", "pinned", "resolve", "run_path", "write_whole", "check_storage_options", "SECRET_OPTION"]

#: option names that carry credentials (refused in storage_options, at any depth)
SECRET_OPTION = re.compile(r"(^key$|secret|token|passw|credential|account_key|sas|access_key|private)", re.I)

#: extra of this package that installs (and tests) the file system of a protocol
_EXTRAS = {"s3": "s3", "s3a": "s3"}


def check_storage_options(options: dict | None) -> dict:
    """``options`` as a plain dict, refusing credentials (module notes)."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"storage_options must be a dict; got {type(options).__name__}.")

    def walk(d, where):
        for k, v in d.items():
            if SECRET_OPTION.search(str(k)):
                raise ValueError(
                    f"storage_options{where}[{k!r}] looks like a credential. Credentials are never passed as "
                    "options: they would travel inside every task graph that reads the store. Give them the "
                    "standard way instead (S3: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or ~/.aws/credentials; "
                    "GCS: GOOGLE_APPLICATION_CREDENTIALS), where every worker reads them itself.")
            if isinstance(v, dict):
                walk(v, f"{where}[{k!r}]")

    walk(options, "")
    return dict(options)


#: defaults of the S3 deadlines (module notes); the environment variables override them
S3_CONNECT_TIMEOUT, S3_READ_TIMEOUT, S3_ATTEMPTS = 5.0, 15.0, 2


def object_store_defaults() -> dict:
    """The S3 options every store and run folder at an ``s3://`` URL is
    opened with, unless the caller's options or fsspec's configuration set
    them: botocore's ``connect_timeout``, ``read_timeout`` and attempts
    (module notes)."""
    return {"config_kwargs": {"connect_timeout": env_number("INFOCLUST_S3_CONNECT_TIMEOUT", S3_CONNECT_TIMEOUT, seconds=True),
                              "read_timeout": env_number("INFOCLUST_S3_READ_TIMEOUT", S3_READ_TIMEOUT, seconds=True),
                              # one botocore attempt per s3fs try: s3fs's own loop retries (S3FileSystem.retries)
                              "retries": {"total_max_attempts": 1, "mode": "standard"}}}


def _install_object_store_defaults() -> None:
    """Put :func:`object_store_defaults` into fsspec's configuration for
    ``s3`` where nothing set them (every S3 file system made afterwards in
    this process - by us, xarray, zarr or universal_pathlib - gets them)."""
    import fsspec.config

    conf = fsspec.config.conf.setdefault("s3", {})
    for key, value in object_store_defaults().items():
        conf.setdefault(key, value)
    try:
        import s3fs
    except ImportError:  # no S3 support installed: nothing to bound
        return
    if s3fs.S3FileSystem.retries == _S3FS_RETRIES:  # s3fs's default: bound it too (not a value someone set)
        s3fs.S3FileSystem.retries = env_number("INFOCLUST_S3_ATTEMPTS", S3_ATTEMPTS, kind=int)
    from .server_errors import retry_server_errors

    retry_server_errors()  # a 500 from the server is tried again within those attempts


#: s3fs's own default number of retries of a request
_S3FS_RETRIES = 5


def _filesystem(proto: str, what: str, path: Any, options: dict):
    """``(file system, path inside it)`` of the URL ``path``."""
    from fsspec.core import url_to_fs

    _install_object_store_defaults()
    try:
        return url_to_fs(str(path), **options)
    except ImportError as exc:
        extra = _EXTRAS.get(proto)
        hint = f"pip install 'infoclust_dask[{extra}]'" if extra else \
            "install the package fsspec names above (e.g. gcsfs for gs://, adlfs for az://)"
        raise URLNotSupported(f"The {what} '{path}' is a {proto}:// URL, but its file system is not installed "
                              f"({exc}). Install it: {hint}. Nothing was created.") from None
    except ValueError:
        raise URLNotSupported(f"The {what} '{path}' is a {proto}:// URL, and fsspec knows no protocol "
                              f"{proto!r}. Use a local path or an fsspec URL (s3://, gs://, az://, memory://). "
                              "Nothing was created.") from None


class Location:
    """A folder-like place: ``local`` (a :class:`~pathlib.Path`) for local
    paths and ``file://`` URLs, else an fsspec file system ``fs`` and the
    path ``fspath`` inside it. ``url`` is what the user gave (normalised);
    ``storage_options`` what xarray/zarr need to open it."""

    def __init__(self, url: str, *, local: Path | None = None, fs: Any = None, fspath: str = "",
                 storage_options: dict | None = None) -> None:
        self.url, self.local, self.fs, self.fspath = url, local, fs, fspath
        self.storage_options = dict(storage_options or {})

    @property
    def protocol(self) -> str:
        return "file" if self.local is not None else str(url_protocol(self.url))

    def __str__(self) -> str:
        return str(self.local) if self.local is not None else self.url

    def __repr__(self) -> str:
        return f"Location({str(self)!r})"

    # -- names ----------------------------------------------------------
    def full_path(self, rel: str) -> str:
        """The path of ``rel`` inside the file system (URLs) or as a string."""
        if self.local is not None:
            return str(self.local / rel) if rel else str(self.local)
        return f"{self.fspath}/{rel}" if rel else self.fspath

    def child(self, rel: str) -> Location:
        """The location ``rel`` (slash-separated) below this one."""
        if self.local is not None:
            return Location(str(self.local / rel), local=self.local / rel)
        return Location(f"{self.url}/{rel}", fs=self.fs, fspath=self.full_path(rel),
                        storage_options=self.storage_options)

    @property
    def name(self) -> str:
        return self.local.name if self.local is not None else self.fspath.rstrip("/").rsplit("/", 1)[-1]

    def zarr_target(self) -> Any:
        """What ``xarray.open_zarr`` / ``Dataset.to_zarr`` take for it (with
        ``storage_options=self.storage_options`` for URLs)."""
        return self.local if self.local is not None else self.url

    # -- reading --------------------------------------------------------
    def exists(self, rel: str = "") -> bool:
        if self.local is not None:
            p = self.local / rel if rel else self.local
            return p.exists() or p.is_symlink()
        self.fs.invalidate_cache(self.full_path(rel))  # workers write behind this process's listing cache
        return bool(self.fs.exists(self.full_path(rel)))

    def isfile(self, rel: str) -> bool:
        if self.local is not None:
            return (self.local / rel).is_file()
        return bool(self.fs.isfile(self.full_path(rel)))

    def read_bytes(self, rel: str) -> bytes:
        if self.local is not None:
            return (self.local / rel).read_bytes()
        try:
            return self.fs.cat_file(self.full_path(rel))
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.url}/{rel}") from None

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8")

    def size(self, rel: str) -> int | None:
        """Size in bytes of the object ``rel``, or None when it is missing."""
        if self.local is not None:
            try:
                return (self.local / rel).stat().st_size
            except FileNotFoundError:
                return None
        self.fs.invalidate_cache(self.full_path(rel))
        try:
            return int(self.fs.info(self.full_path(rel))["size"])
        except FileNotFoundError:
            return None

    def refresh(self) -> None:
        """Forget this process's cached listings of everything below this
        location (fsspec's ``dircache``): another process - a writer, one
        killed mid-write - changed it. ``invalidate_cache(path)`` drops a
        path and its parents only, not the folders below it."""
        if self.fs is None:
            return
        base = self.fspath.rstrip("/")
        cache = getattr(self.fs, "dircache", None)
        if cache is not None:
            for key in [k for k in list(cache) if k == base or k.startswith(base + "/")]:
                cache.pop(key, None)
        self.fs.invalidate_cache(self.full_path(""))

    def find(self, rel: str = "") -> dict[str, int]:
        """Every object below ``rel``: path relative to this location -> size."""
        if self.local is not None:
            base = self.local / rel if rel else self.local
            out = {}
            for dirpath, _, files in os.walk(base):
                for f in files:
                    full = os.path.join(dirpath, f)
                    out[os.path.relpath(full, self.local).replace(os.sep, "/")] = os.path.getsize(full)
            return out
        root = self.fspath.rstrip("/") + "/"
        self.fs.invalidate_cache(self.full_path(rel))
        found = self.fs.find(self.full_path(rel), detail=True)
        return {k[len(root):] if k.startswith(root) else k: int(v.get("size") or 0) for k, v in found.items()}

    # -- writing --------------------------------------------------------
    def write_bytes(self, rel: str, data: bytes) -> None:
        """One object written whole: a single PUT on an object store (which
        readers see complete or not at all), write-beside-and-rename on a
        local disk."""
        if self.local is not None:
            from .atomic import atomic_write_bytes

            atomic_write_bytes(self.local / rel, data, overwrite=True)
            return
        self.fs.pipe_file(self.full_path(rel), data)

    def write_text(self, rel: str, text: str) -> None:
        self.write_bytes(rel, text.encode("utf-8"))

    def move_to(self, rel: str, dest: Location, target: str) -> None:
        """Move the object ``rel`` to ``target`` inside ``dest``: a rename on
        a local disk, a server-side copy and delete within one object store,
        else a copy through this process."""
        if self.local is not None and dest.local is not None:
            path = dest.local / target
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.local / rel, path)
            return
        if self.fs is not None and dest.fs is not None and self.fs.protocol == dest.fs.protocol:
            self.fs.mv(self.full_path(rel), dest.full_path(target))
            return
        dest.write_bytes(target, self.read_bytes(rel))
        self.remove(rel, recursive=False)

    def remove(self, rel: str = "", recursive: bool = True) -> None:
        """Remove ``rel`` (everything below it with ``recursive``); missing is fine."""
        if self.local is not None:
            import shutil

            p = self.local / rel if rel else self.local
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            elif p.exists() or p.is_symlink():
                p.unlink()
            return
        with contextlib.suppress(FileNotFoundError):  # already gone: nothing to remove
            self.fs.rm(self.full_path(rel), recursive=recursive)


def absolute(path: Any) -> Path:
    """A local path made absolute against this process's working folder
    (``~`` expanded, ``..`` kept as written: no symbolic link is followed).

    Every local path is made absolute here, where the user typed it, before
    it reaches a task graph, a flow parameter or a deployment: a dask worker
    resolves a relative path in its own working folder, which on a real
    cluster (and with ``deploy/local/up.sh``) is not the client's. A
    ``file://`` URL becomes its path."""
    text = os.fspath(path)
    if isinstance(text, str) and url_protocol(text) == "file":
        text = text[len("file://"):]
    return Path(os.path.expanduser(text)).absolute()


def pinned(value: Any) -> Any:
    """``value`` unchanged unless it is a local path (a ``str`` or
    ``os.PathLike`` that is not a URL): then the same path made absolute
    (:func:`absolute`; a ``file://`` URL becomes its path), of the same
    kind (``str`` stays ``str``). For arguments that may travel to a worker
    as they are - a fit's ``X`` or checkpoint folder when the whole fit runs
    on one."""
    if value is None or isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or is_url(value):
        return value
    text = os.fspath(value)
    if not isinstance(text, str):
        return value
    check_path(text)
    local = absolute(text)
    return str(local) if isinstance(value, str) else local


def resolve(path: Any, what: str = "store", storage_options: dict | None = None) -> Location:
    """``path`` (a local path, ``file://`` URL or fsspec URL) as a
    :class:`Location`. A URL whose protocol is not installed is refused with
    the package to install; ``storage_options`` may not carry credentials
    (module notes). Nothing is created."""
    if isinstance(path, Location):
        return path
    check_path(path, what)
    options = check_storage_options(storage_options)
    proto = url_protocol(path)
    if proto is None or proto == "file":
        p = absolute(path)
        if options:
            raise ValueError(f"storage_options apply to URLs; '{path}' is a local path.")
        return Location(str(p), local=p)
    url = str(path).rstrip("/")
    fs, fspath = _filesystem(proto, what, url, options)
    if not fspath.strip("/") or "/" not in fspath.strip("/") and proto not in ("memory",):
        raise ValueError(f"The {what} '{path}' names a bucket, not a folder inside one; use "
                         f"{proto}://BUCKET/NAME.zarr.")
    return Location(url, fs=fs, fspath=fspath, storage_options=options)


#: roles of :func:`run_path` that hold what the package writes: refused inside a store
WRITTEN_ROLES = ("run folder", "storage root", "output file", "plot file", "cross-validation cache", "model folder",
                 "checkpoint folder", "model file (written)", "file")


def refuse_inside_store(path: Path, what: str) -> None:
    """Refuse a local ``path`` that is a store or lies inside one (a folder
    up the tree holds a ``zarr.json``): files written there would be taken
    for damage by ``infoclust verify`` (and could be read as the store's
    arrays)."""
    for parent in (path, *path.parents):
        if (parent / "zarr.json").is_file():
            raise ValueError(
                f"The {what} '{path}' is {'a' if parent == path else 'inside the'} zarr store '{parent}': files "
                "written there would be reported as damage by `infoclust verify` (or read as the store's "
                "arrays). Choose a folder outside the store. Nothing was written.")


def run_path(path: Any, what: str = "run folder") -> Any:
    """``path`` as a :class:`~pathlib.Path` (local paths, ``file://``) or,
    for a URL, a ``UPath`` whose file system is installed (else
    :class:`URLNotSupported` naming the package; see
    :func:`resolve`). Credentials come from the
    environment of each process, never from the path. A local path in one
    of the :data:`WRITTEN_ROLES` inside a store is refused
    (:func:`refuse_inside_store`)."""
    check_path(path, what)
    if not is_url(path):
        where = absolute(path)
        if what.startswith(WRITTEN_ROLES):
            refuse_inside_store(where, what.removesuffix(" (written)"))
        return where
    if _upath_protocol(path) is not None:
        _install_object_store_defaults()
        return path
    from upath import UPath

    loc = resolve(str(path), what)  # the protocol's file system is installed; a bucket alone is refused
    return UPath(loc.url)


def write_whole(path: Any, data: bytes, *, overwrite: bool = False) -> Any:
    """Write a small file whole: on a local disk a temporary file beside it,
    then a rename; at a URL (:func:`run_path`) one PUT of the whole object,
    which readers of an object store see complete or not at all. An
    existing file is replaced only with ``overwrite``."""
    from .atomic import atomic_write_bytes

    if not is_url(path):
        return atomic_write_bytes(run_path(path, "file"), data, overwrite=overwrite)
    target = run_path(path, "file")
    if not overwrite and target.exists():
        raise FileExistsError(f"'{target}' exists; pass overwrite=True to replace it.")
    target.write_bytes(data)
    return target
