"""Numbers read from the environment (``INFOCLUST_*`` settings), parsed
and checked one way: a bad value is one error naming the variable and the
value, never a bare ``float()`` failure or a silent default."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["env_number"]


def env_number(name: str, default: Any, *, kind: type = float, seconds: bool = False,
               allow_zero: bool = False) -> Any:
    """``$name`` as a ``kind`` (``int`` also takes ``1e9``), or ``default``
    when unset or empty. With ``seconds`` a trailing ``s`` is allowed
    (``30s``). Must be > 0 (>= 0 with ``allow_zero``)."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    text = raw.strip().lower()
    if seconds:
        text = text.removesuffix("s")
    example = f"e.g. {name}={default}" if default is not None else f"a number, e.g. {name}=1e9"
    try:
        number = float(text)
        finite = number == number and number not in (float("inf"), float("-inf"))
        value: Any = (int(number) if kind is int else kind(text)) if finite else 0
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number{' of seconds' if seconds else ''}; unset it or give "
                         f"{example}.") from None
    if not finite:
        raise ValueError(f"{name}={raw!r} is not a finite number{' of seconds' if seconds else ''}; unset it (the "
                         f"default) or give {example}.")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name}={raw!r} must be {'>= 0' if allow_zero else '> 0'}.")
    return value
