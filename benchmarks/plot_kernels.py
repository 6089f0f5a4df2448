"""Bar chart of the per-pass ratios measured by ``bench_dc_pass.py``,
``bench_ac_pass.py`` and ``bench_kmeans.py`` (read from ``docs/figures/kernels.json``):
seconds of our passes (compiled kernels) against a plain read of the store
(store passes) or plain numpy / scikit-learn (in memory); figures of the
numpy kernels the package had until 2026-11-26 are drawn when the file
still holds them. Writes ``docs/figures/kernels.png``.

    python benchmarks/plot_kernels.py
"""

import json
from pathlib import Path


def main():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    docs = Path(__file__).parents[1] / "docs" / "figures"
    r = json.loads((docs / "kernels.json").read_text())
    fig, axes = plt.subplots(1, 4, figsize=(17, 4.4))
    colors = {"plain read": "#999999", "numpy kernels": "#d95f02", "compiled kernels": "#1b9e77",
              "plain numpy": "#7570b3", "scikit-learn": "#7570b3", "dask-ml": "#e7298a",
              "ours, k-means||": "#1b9e77", "ours, k-means++": "#66a61e", "ours, iteration": "#1b9e77",
              "compiled pass": "#66c2a5", "plain numpy pass": "#d95f02"}

    def bars(ax, title, items, ylabel, line=None, note=""):
        names = [k for k, _ in items]
        vals = [v for _, v in items]
        ax.bar(range(len(vals)), vals, color=[colors[n] for n in names])
        for i, v in enumerate(vals):
            ax.text(i, v, f"{v:.2f}", ha="center", va="bottom", fontsize=9)
        ax.set_xticks(range(len(vals)), names, rotation=12, fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
        if line is not None:
            ax.axhline(line, color="k", ls="--", lw=0.8)
            ax.text(len(vals) - 0.5, line, note, ha="right", va="bottom", fontsize=8)

    dc, ac = r.get("dc_store"), r.get("ac_store")
    if dc and ac:
        ax = axes[0]
        width = 0.38
        for j, (name, rec) in enumerate((("DC", dc), ("AC", ac))):
            if "numpy_reads" in rec:
                ax.bar(j - width / 2, rec["numpy_reads"], width, color=colors["numpy kernels"],
                       label="numpy kernels" if j == 0 else None)
                ax.text(j - width / 2, rec["numpy_reads"], f"{rec['numpy_reads']:.2f}", ha="center", va="bottom",
                        fontsize=9)
            ax.bar(j + width / 2, rec["compiled_reads"], width, color=colors["compiled kernels"],
                   label="compiled kernels" if j == 0 else None)
            ax.text(j + width / 2, rec["compiled_reads"], f"{rec['compiled_reads']:.2f}", ha="center", va="bottom",
                    fontsize=9)
        ax.axhline(2.0, color="k", ls="--", lw=0.8)
        ax.text(1.45, 2.0, "floor: 2 reads", ha="right", va="bottom", fontsize=8)
        ax.axhline(2.7, color="k", ls=":", lw=0.8)
        ax.text(1.45, 2.7, "target: 2.7 reads", ha="right", va="bottom", fontsize=8)
        ax.set_xticks([0, 1], [f"DC, {dc['gb']:.2f} GB store", f"AC, {ac['gb']:.2f} GB store"], fontsize=9)
        ax.set_ylabel("one evaluation (2 passes), in plain reads")
        ax.set_title("objective + gradient over a store, 2 workers", fontsize=10)
        ax.legend(fontsize=8)
    m = r.get("dc_memory")
    if m:
        items = [("plain numpy", m["numpy_whole_s"])] + (
            [("numpy kernels", m["numpy_kernels_s"])] if "numpy_kernels_s" in m else []) + [
            ("compiled kernels", m["compiled_s"])]
        bars(axes[1], "DC evaluation in memory (1e6 x 16, K 10, C 26)", items, "seconds")
    k = r.get("kmeans")
    if k:
        items = [("scikit-learn", k["sklearn_ms_per_iter"]), ("ours, iteration", k["ours_ms_per_iter"]),
                 ("plain numpy pass", k["numpy_pass_ms"]), ("compiled pass", k["compiled_pass_ms"])]
        bars(axes[2], "K-means Lloyd (1e6 x 16, k 8), threads", items, "milliseconds")
    w = r.get("kmeans_whole")
    if w:
        items = [("dask-ml", w["dask_ml_s"]), ("ours, k-means||", w["ours_kmeans_parallel_s"]),
                 ("ours, k-means++", w["ours_kmeanspp_s"])]
        bars(axes[3], "K-means whole fit, dask input (best of 3)", items, "seconds")
    fig.tight_layout()
    fig.savefig(docs / "kernels.png", dpi=110)
    print(f"wrote {docs / 'kernels.png'}")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
