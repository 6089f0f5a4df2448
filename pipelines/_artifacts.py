"""Plots as Prefect artifacts: a markdown artifact per plot with the PNG
embedded (a base64 data URI), so the figure is seen in the Prefect UI next
to the flow run, not only as a file in the run folder.

``create_image_artifact`` needs an http(s) URL the UI can load; run folders
may be local paths or bucket URLs, so the image travels inside the markdown instead. PNGs
larger than :data:`MAX_BYTES` are linked by path only (the API stores
artifacts in its database).
"""

from __future__ import annotations

import base64
import re

MAX_BYTES = 1_500_000


def artifact_key(text: str) -> str:
    """Prefect artifact keys: lowercase letters, digits and dashes."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:60] or "plot"


def publish_plot(path, *, key: str, title: str, description: str = "") -> str | None:
    """A markdown artifact showing the PNG at ``path``; returns the markdown
    (or None when the file is missing)."""
    from prefect.artifacts import create_markdown_artifact

    from infoclust_dask.runs import run_path

    p = run_path(path, "plot file")
    if not p.exists():
        return None
    data = p.read_bytes()
    if len(data) <= MAX_BYTES:
        img = f"![{title}](data:image/png;base64,{base64.b64encode(data).decode()})"
    else:
        img = f"(the figure is {len(data) / 1e6:.1f} MB; see the file)"
    md = f"## {title}\n\n{img}\n\nFile: `{p}`\n"
    create_markdown_artifact(markdown=md, key=artifact_key(key), description=description or title)
    return md
