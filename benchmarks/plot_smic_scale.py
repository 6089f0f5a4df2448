"""Time of SMIC (t fixed) against n, log-log, for the exact and the
approximate neighbour graph: the whole fit and the graph alone, from
``docs/figures/smic_scale.json`` (written by ``smic_scale.py``). Writes
``docs/figures/smic_scale.png``.

    python benchmarks/plot_smic_scale.py
"""

import json
from pathlib import Path


def main():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    docs = Path(__file__).parents[1] / "docs" / "figures"
    rows = json.loads((docs / "smic_scale.json").read_text())
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    series = (("exact graph, blobs", "#d95f02", lambda x: x["knn"] == "exact"),
              ("HNSW per row block (before issue 24), blobs", "#7570b3",
               lambda x: x["knn"] == "approximate" and x.get("graph") == "per-block"),
              ("HNSW per cell, blobs", "#1b9e77",
               lambda x: x["knn"] == "approximate" and x.get("graph") == "cells" and x.get("data") == "blobs"),
              ("HNSW per cell, far blobs (issue 24)", "#e7298a",
               lambda x: x["knn"] == "approximate" and x.get("graph") == "cells" and x.get("data") == "far"))
    for label, color, keep in series:
        r = sorted((x for x in rows if keep(x)), key=lambda x: x["n"])
        if not r:
            continue
        n = [x["n"] for x in r]
        ax.loglog(n, [x["total_s"] for x in r], "o-", color=color, label=f"{label}: SMIC end to end")
        ax.loglog(n, [x["knn_s"] for x in r], "s--", color=color, alpha=0.7, label=f"{label}: the graph alone")
        for x in r:
            ax.annotate(f"{x['total_s']:.0f} s", (x["n"], x["total_s"]), textcoords="offset points", xytext=(4, 4),
                        fontsize=8)
    ax.axhline(3600, color="k", lw=0.6, ls=":")
    ax.text(1.05e5, 3600, "1 hour", va="bottom", fontsize=8)
    ax.set_xlabel("rows n (d = 16, t = 10; blobs: 10 centres, far: 8)")
    ax.set_ylabel("seconds (2 single-threaded workers)")
    ax.set_title("SMIC from a zarr store: time vs n", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6.5)
    fig.tight_layout()
    fig.savefig(docs / "smic_scale.png", dpi=110)
    print(f"wrote {docs / 'smic_scale.png'}")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
