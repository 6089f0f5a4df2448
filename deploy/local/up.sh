#!/usr/bin/env bash
# Start a real Prefect server, a dask scheduler and 2 dask workers on 127.0.0.1.
# Usage: deploy/local/up.sh [--state-dir DIR] [--workers N] [--memory-limit 2GB] [--no-prefect] [--no-ui]
#                           [--pool infoclust-pool] [--s3 [--bucket B]] [--no-dask]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-$here/../../.venv/bin/python}"
exec "$py" "$here/services.py" up "$@"
