"""Feedback on long work: log lines and progress bars on stderr.

Estimators take ``verbose`` (scikit-learn's convention: 0 is silent). With
``verbose >= 1`` their stages report through the ``infoclust_dask`` logger
(INFO) and a tqdm progress bar counts the steps of the long loops (DC's
width search, the stiffness schedule of soft K-means, SMIC's candidate
``t``, cross-validation cells); ``verbose >= 2`` also logs every
evaluation. Bars are drawn only on a terminal (tqdm's ``disable=None``) and
log lines are written through ``tqdm.write`` so that they do not break a bar.
The library never prints to stdout: stdout stays for results (the CLI's JSON).

tqdm is the ecosystem's usual progress bar (dask-ml, pynndescent, umap):
pure Python, no dependencies of its own.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

LOGGER = logging.getLogger("infoclust_dask")


class _TqdmHandler(logging.Handler):
    def emit(self, record):
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # a log line must never break a fit
            self.handleError(record)


def console(force: bool = False):
    """A stderr handler on the package logger, once: when nobody configured
    logging (an application's own handlers are left alone), or always with
    ``force`` (the ``infoclust`` command, which is the application)."""
    if any(isinstance(h, _TqdmHandler) for h in LOGGER.handlers):
        return
    if not force and (LOGGER.handlers or logging.getLogger().handlers):
        if LOGGER.level == logging.NOTSET or LOGGER.level > logging.INFO:
            LOGGER.setLevel(logging.INFO)
        return
    h = _TqdmHandler()
    h.setFormatter(logging.Formatter("%(message)s"))
    LOGGER.addHandler(h)
    LOGGER.setLevel(logging.INFO)


def verbosity(est) -> int:
    """``est.verbose`` (0 when it has none, or is not a number); a number is its own verbosity."""
    v = est if isinstance(est, (int, bool)) else getattr(est, "verbose", 0)
    return int(v) if isinstance(v, (int, bool)) else 0


def say(message: str):
    """``message`` at INFO on the package logger (callers check ``verbose``)."""
    console()
    LOGGER.info(message)


def log(est, message: str, level: int = 1):
    """``message`` at INFO when ``est.verbose >= level``."""
    if verbosity(est) >= level:
        console()
        LOGGER.info(message)


class Steps:
    """Progress of ``total`` steps named ``desc`` (``total`` None: unknown),
    shown when ``est.verbose >= 1``; a context manager.

    On a terminal: a tqdm bar (count, total, rate and ETA; the postfix, e.g.
    the current beta and its passes). Otherwise (a log file, a CI job): one
    plain line at most every ``every`` seconds (default
    :data:`PLAIN_EVERY`), ``"desc: 3/40 beta, 12 s, ETA 2.6 min, passes=7"``,
    so long work is never silent and the log has no carriage returns.
    ``update`` advances by steps, ``to`` moves to a position (e.g. along the
    log-beta range of an annealing in percent), ``tick`` only refreshes the
    postfix (work inside one step, e.g. the passes at one beta)."""

    def __init__(self, est, total, desc, unit="step", out=None, every: float | None = None):
        import time

        self.on = verbosity(est) >= 1
        self.bar = None
        self.total, self.desc, self.unit, self.n = total, desc, unit, 0
        self.postfix: dict[str, object] = {}
        self.out = sys.stderr if out is None else out
        self.every = PLAIN_EVERY if every is None else float(every)
        self.t0 = self.last = time.monotonic()
        self.plain = self.on and not _is_terminal(self.out)
        if self.on and not self.plain:
            from tqdm import tqdm

            console()
            self.bar = tqdm(total=total, desc=desc, unit=unit, file=self.out, leave=False, dynamic_ncols=True)

    def update(self, n=1, **postfix):
        self.to(self.n + n, **postfix)

    def to(self, position, **postfix):
        """Move to ``position`` (of ``total``), with a new postfix."""
        self.postfix.update(postfix)
        step, self.n = position - self.n, position
        if self.bar is not None:
            if postfix:
                self.bar.set_postfix(self.postfix, refresh=False)
            self.bar.update(step)
        self._plain_line()

    def tick(self, **postfix):
        """Work inside the current step: refresh the postfix (and a plain line when one is due)."""
        self.postfix.update(postfix)
        if self.bar is not None:
            self.bar.set_postfix(self.postfix)
        self._plain_line()

    def _plain_line(self, final=False):
        import time

        if not self.plain:
            return
        now = time.monotonic()
        if not final and now - self.last < self.every:
            return
        self.last = now
        elapsed = now - self.t0
        done = f"{self.n:g}/{self.total:g} {self.unit}" if self.total else f"{self.n:g} {self.unit}"
        eta = ""
        if self.total and 0 < self.n < self.total:
            eta = f", ETA {_seconds(elapsed * (self.total - self.n) / self.n)}"
        extra = "".join(f", {k}={v}" for k, v in self.postfix.items())
        self.out.write(f"{self.desc}: {done}, {_seconds(elapsed)}{eta}{extra}{' (done)' if final else ''}\n")
        self.out.flush()

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.plain and self.last > self.t0:  # a long one said something: say it ended
            self._plain_line(final=True)
        self.plain = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _is_terminal(out) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


def _seconds(t: float) -> str:
    return f"{t:.0f} s" if t < 120 else f"{t / 60:.1f} min" if t < 7200 else f"{t / 3600:.1f} h"


#: seconds between two plain progress lines of a dask computation when stderr is not a terminal
PLAIN_EVERY = 10.0


def futures_progress(work: Any, out=None, every: float | None = None, graph_of: Any = None) -> None:
    """Wait for the futures of ``work`` (futures, or collections persisted
    on a distributed scheduler), showing their progress: distributed's
    text bar when ``out`` (default stderr) is a terminal; otherwise one
    plain line every ``every`` seconds (default :data:`PLAIN_EVERY`) -
    "infoclust: 3/20 tasks, 30 s" - instead of the bar's ten
    carriage-return fragments a second in a log file (a 2e6-row SMIC fit
    wrote ~700 of them in its neighbour search).

    ``graph_of``: the collections ``work`` was computed from (before
    ``persist``/``compute``). With them the line counts every task of their
    graph, not only the results awaited, and each name's finished tasks out
    of its total - "infoclust: 33/95 tasks, 30 s; finished: knn_cells-build
    3/10, knn_cells-split 20/20" - so a pass whose results all wait on a few
    long tasks still shows how far it is."""
    import contextlib
    import time

    from distributed import futures_of

    out = sys.stderr if out is None else out
    futures = futures_of(work)
    if not futures:
        return
    if _is_terminal(out):
        from distributed import progress

        with contextlib.redirect_stdout(out):  # its text bar writes to stdout, which is for results
            # the futures' own scheduler: the client need not be the default one (set_as_default=False)
            progress(futures, scheduler=futures[0].client.scheduler.address)
        return
    every = PLAIN_EVERY if every is None else float(every)
    client = futures[0].client
    stream = _TaskStream(client, None if graph_of is None else graph_keys(graph_of))
    t0 = last = time.perf_counter()
    while True:  # polled: distributed.wait needs the default client, which the futures' need not be
        done = sum(f.done() for f in futures)
        if done == len(futures):
            return
        time.sleep(POLL_SECONDS)
        now = time.perf_counter()
        if now - last >= every:
            last = now
            names = stream.finished()  # first: it reads the finished tasks that line() counts
            print(f"infoclust: {stream.line(done, len(futures))}, {now - t0:.0f} s{names}", file=out, flush=True)


def graph_keys(collections: Any) -> set:
    """The keys of the tasks the dask collections ``collections`` (one, or
    a list, tuple or dict of them) would run: their graphs' keys, less the
    results already held on a cluster (futures of earlier persists)."""
    from dask import is_dask_collection
    from distributed import Future

    keys: set = set()
    todo = [collections]
    while todo:
        c = todo.pop()
        if isinstance(c, (list, tuple)):
            todo.extend(c)
        elif isinstance(c, dict):
            todo.extend(c.values())
        elif is_dask_collection(c):
            keys.update(k for k, v in dict(c.__dask_graph__()).items() if not isinstance(v, Future))
    return keys


class _TaskStream:
    """The tasks the cluster finished since this was made, by name
    (distributed's public ``Client.get_task_stream``, started here): the
    results awaited may all come from a last task (the 1e7-row SMIC
    neighbour search's 40 results waited on its 10 cells' builds and its
    lines read "0/40 tasks" for over 5 minutes); this says which tasks before
    them are done, e.g. "; finished: knn_cells-split 20, knn_cells-build 3".
    With ``keys`` (the computation's tasks, :func:`graph_keys`) only those
    count, out of their totals ("knn_cells-build 3/10"); without, tasks of
    other clients of the same cluster count too (each key once). Quiet when
    the scheduler does not answer. Finished keys are kept between looks:
    the scheduler keeps only its last records
    (``distributed.scheduler.dashboard.status.task-stream-length``)."""

    def __init__(self, client: Any, keys: set | None = None) -> None:
        import time
        from collections import Counter

        from dask.utils import key_split

        self.client, self.since, self.keys = client, time.time(), keys
        self.done: set = set()  # the keys seen finished (of ``keys`` when given)
        self.totals = Counter(key_split(k) for k in keys or ())
        try:
            client.get_task_stream(start=self.since)  # starts the scheduler's recording
        except Exception:  # noqa: BLE001 - a progress line must never fail the computation
            self.client = None

    def line(self, done: int, total: int) -> str:
        """The tasks done out of all: of the whole graph when its keys are
        known (as read at the last :meth:`finished`), else of the results
        awaited (``done`` of ``total``)."""
        if self.keys and self.client is not None:
            return f"{len(self.done)}/{len(self.keys)} tasks"
        return f"{done}/{total} tasks"

    def finished(self) -> str:
        if self.client is None:
            return ""
        from collections import Counter

        from dask.utils import key_split

        try:
            records = self.client.get_task_stream(start=self.since)
        except Exception:  # noqa: BLE001 - a progress line must never fail the computation
            records = []
        for rec in records:
            key = rec.get("key", "")
            if rec.get("status", "OK") == "OK" and (self.keys is None or key in self.keys):
                self.done.add(key)
        if not self.done:
            return ""
        counts = Counter(key_split(k) for k in self.done)
        return "; finished: " + ", ".join(f"{k} {v}" + (f"/{self.totals[k]}" if k in self.totals else "")
                                          for k, v in sorted(counts.items()))


#: seconds between two looks at the futures of :func:`futures_progress` off a terminal
POLL_SECONDS = 0.05


def dask_progress(out=None, every: float | None = None):
    """A context manager showing the progress of the dask computations run
    inside it (local schedulers): dask's progress bar when ``out`` (default
    stderr) is a terminal; otherwise one plain line every ``every`` seconds
    (default :data:`PLAIN_EVERY`) - "infoclust: 1200/4800 tasks, 30 s" -
    instead of a bar's carriage-return fragments in a log file."""
    import time

    out = sys.stderr if out is None else out
    if getattr(out, "isatty", lambda: False)():
        from dask.diagnostics import ProgressBar

        return ProgressBar(out=out)
    from dask.callbacks import Callback

    every = PLAIN_EVERY if every is None else float(every)
    clock = {"t0": 0.0, "last": 0.0, "total": 0, "done": 0}

    def start(dsk):
        clock["t0"] = clock["last"] = time.perf_counter()
        clock["total"], clock["done"] = len(dsk), 0

    def posttask(key, result, dsk, state, worker_id):
        clock["done"] += 1
        now = time.perf_counter()
        if now - clock["last"] >= every:
            clock["last"] = now
            print(f"infoclust: {clock['done']}/{clock['total']} tasks, {now - clock['t0']:.0f} s", file=out,
                  flush=True)

    return Callback(start=start, posttask=posttask)
