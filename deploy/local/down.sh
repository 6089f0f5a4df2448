#!/usr/bin/env bash
# Stop the services started by up.sh (by PID, recorded in the state folder).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-$here/../../.venv/bin/python}"
exec "$py" "$here/services.py" down "$@"
