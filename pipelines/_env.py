"""Prefect settings for running without a server (measured settings: see deploy/README.md).

Only defaults: anything already set in the environment wins.

- ``PREFECT_HOME`` inside the storage root, so importing prefect does not
  write to ``~/.prefect`` and the temporary API's SQLite stays with the data
  (when the storage root is a URL - ``s3://...`` - Prefect's SQLite needs a
  local disk: ``~/.cache/infoclust/prefect``);
- analytics off (the sandbox has no internet; Prefect would log an error);
- a 120 s start-up timeout for the temporary local API, which on a loaded
  2-core machine needs more than the default 20 s.
"""

import os
from pathlib import Path

_storage = os.environ.get("INFOCLUST_STORAGE", "storage")
if "://" in _storage and not _storage.startswith("file://"):
    _home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "infoclust" / "prefect"
else:
    _home = Path(_storage.removeprefix("file://")).resolve() / ".prefect"
os.environ.setdefault("PREFECT_HOME", str(_home))
# Prefect's temporary server needs its home to exist: without it, it timed out starting in a fresh folder
Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")


from infoclust_dask.engine.clients import run_default as default_scheduler  # noqa: E402,F401  (the flows' default)
