"""The line a warning should point at: the user's, the first frame outside
the package, however many of the package's frames lie between (a fit
called directly, or from another estimator's fit)."""

from __future__ import annotations

import sys
from types import FrameType

__all__ = ["user_stacklevel"]

PACKAGE = "infoclust_dask"


def user_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` in the function that calls
    this: the first frame above it whose module is not of this package
    (2 when its caller is already outside)."""
    frame: FrameType | None = sys._getframe(2)  # the warning function's caller
    level = 2
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == PACKAGE:
        frame = frame.f_back
        level += 1
    return level
