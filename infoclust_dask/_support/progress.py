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
    v = getattr(est, "verbose", 0)
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
    """A progress bar of ``total`` steps named ``desc``, shown when
    ``est.verbose >= 1`` and stderr is a terminal; a context manager."""

    def __init__(self, est, total, desc, unit="step"):
        self.on = verbosity(est) >= 1
        self.bar = None
        if self.on:
            from tqdm import tqdm

            console()
            self.bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=None, leave=False,
                            dynamic_ncols=True)

    def update(self, n=1, **postfix):
        if self.bar is not None:
            if postfix:
                self.bar.set_postfix(postfix, refresh=False)
            self.bar.update(n)

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


#: seconds between two plain progress lines of a dask computation when stderr is not a terminal
PLAIN_EVERY = 10.0


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
