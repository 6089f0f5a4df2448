"""PNG scaling curves from benchmarks/scale_all.py's and scale_curves.py's
JSON: seconds per pass against n (each method), against K and against worker
processes.

    python benchmarks/plot_scale.py docs/figures/scale_all.json docs/figures/scale_curves.json docs/figures/scaling.png
"""

import json
import sys
from pathlib import Path


def main():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = json.loads(Path(sys.argv[1]).read_text())
    curves = json.loads(Path(sys.argv[2]).read_text())
    fig, ax = plt.subplots(1, 3, figsize=(13, 4))
    for m in ["read", "kmeans", "softkmeans", "dc", "ac"]:
        pts = sorted((r["n"], r["seconds"] / max(r["passes"], 1)) for r in rows if r["method"] == m)
        if pts:
            ax[0].loglog(*zip(*pts), marker="o", label=m)
    ax[0].set(xlabel="rows n (64 float32 features)", ylabel="seconds per pass", title="time per pass vs n")
    ax[0].legend()
    ks = curves["k"]
    ax[1].plot([r["k"] for r in ks], [r["pass_seconds"] for r in ks], marker="o", label="Lloyd pass")
    ax[1].axhline(ks[0]["read_seconds"], color="grey", ls="--", label="plain read")
    ax[1].set(xscale="log", xlabel="K", ylabel="seconds", title=f"one pass over {curves['rows']:.0e} rows vs K")
    ax[1].legend()
    ws = curves["workers"]
    ax[2].plot([r["workers"] for r in ws], [r["pass_seconds"] for r in ws], marker="o", label="Lloyd pass (K=8)")
    ax[2].plot([r["workers"] for r in ws], [r["read_seconds"] for r in ws], marker="s", label="plain read")
    ax[2].set(xlabel="worker processes (1 thread each; 2 cores)", ylabel="seconds", title="vs workers",
              xticks=[r["workers"] for r in ws])
    ax[2].legend()
    fig.tight_layout()
    fig.savefig(sys.argv[3], dpi=110)
    print(sys.argv[3])


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
