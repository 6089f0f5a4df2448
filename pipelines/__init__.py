"""Prefect flows that orchestrate infoclust_dask library calls (no maths here).

Importing this package sets Prefect's offline defaults (see ``_env``) before
Prefect itself is imported.
"""

from . import _env  # noqa: F401
