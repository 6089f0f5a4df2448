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


def test_the_benchmarks_page_opens_with_its_summary_and_stays_readable():
    """docs/BENCHMARKS.md: the summary tables first, at most ~500 lines in
    all (older figures live in git); figures and their data in
    docs/figures/, none loose beside the pages."""
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    text = (docs / "BENCHMARKS.md").read_text()
    assert len(text.splitlines()) <= 500
    sections = [ln for ln in text.splitlines() if ln.startswith("## ")]
    assert sections[0] == "## At a glance"
    glance = text[text.index("## At a glance"):text.index(sections[1])]
    for area in ("Small data", "K-means per iteration", "Passes over a store", "SMIC against", "Memory"):
        assert f"### {area}" in glance, area
    assert not sorted(p.name for p in docs.glob("*") if p.suffix in (".png", ".json"))
    import re

    for page in docs.glob("*.md"):
        for ref in re.findall(r"\]\((figures/[^)]+)\)", page.read_text()):
            assert (docs / ref).exists(), (page.name, ref)
