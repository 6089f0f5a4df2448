"""Every test file and test function the documentation quotes exists (a
moved test must not leave a stale path in RESULTS, BENCHMARKS, ...)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)]
QUOTE = re.compile(r"(tests/[\w/]+\.py)(?:::(\w+))?")


def test_quoted_test_paths_exist():
    missing = []
    for doc in DOCS:
        for path, name in QUOTE.findall(doc.read_text()):
            f = ROOT / path
            if not f.exists():
                missing.append(f"{doc.name}: {path}")
            elif name and not re.search(rf"def {name}\b", f.read_text()):
                missing.append(f"{doc.name}: {path}::{name}")
    assert not missing, missing
