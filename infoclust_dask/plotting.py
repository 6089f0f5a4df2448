"""Matplotlib figures for run folders (Agg backend, PNG files)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ._support.hints import NumbersLike, PathLike, Sequence

__all__ = ["plot_drift", "plot_clusters_2d", "plot_annealing_path", "plot_validation_curve", "plot_tradeoff",
           "plot_contingency_heatmap"]


def available() -> bool:
    """Whether matplotlib (the ``[plots]`` extra) is installed."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise ImportError("Plots need matplotlib: pip install 'infoclust_dask[plots]'.") from None

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path, **options) -> Any:
    """Write ``fig`` as PNG to ``path`` - a local path (a Path is returned)
    or a URL (one PUT; its ``UPath`` is returned) - and close it."""
    import io

    import matplotlib.pyplot as plt

    from .storage.location import run_path
    from .storage.paths import is_url

    target = run_path(path, "plot file")
    try:
        if is_url(target):
            buf = io.BytesIO()
            fig.savefig(buf, format="png", **options)
            target.write_bytes(buf.getvalue())
        else:
            fig.savefig(target, **options)
    finally:
        plt.close(fig)
    return target


def _wrap(title, width):
    import textwrap

    return "\n".join(textwrap.wrap(title, width)) if title else title


def plot_clusters_2d(Z: NumbersLike, labels: NumbersLike, centers_2d: NumbersLike | None, path: PathLike, *,
                     title: str = "", explained: Sequence[float] | None = None,
                     axis_names: tuple[str, str] = ("PC 1", "PC 2")) -> Path:
    """Scatter of 2-D coordinates ``Z`` coloured by ``labels`` (a legend entry
    per cluster), with the centres. ``explained``: the fraction of variance
    of each axis (principal components), shown on the axis labels."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 5), dpi=110, layout="constrained")
    labels = np.asarray(labels)
    Z = np.asarray(Z)
    ks = np.unique(labels)
    cmap = plt.get_cmap("tab10" if len(ks) <= 10 else "tab20")
    for i, k in enumerate(ks):
        m = labels == k
        ax.scatter(Z[m, 0], Z[m, 1], s=4, color=cmap(i % cmap.N), alpha=0.6, linewidths=0,
                   label=f"cluster {k} ({int(m.sum())})")
    if centers_2d is not None:
        C = np.asarray(centers_2d)
        ax.scatter(C[:, 0], C[:, 1], c="k", marker="x", s=80, linewidths=2, label="centres")
    for j, name in enumerate(axis_names):
        text = name if explained is None else f"{name} ({100 * float(explained[j]):.0f}% of the variance)"
        (ax.set_xlabel if j == 0 else ax.set_ylabel)(text)
    ax.set_title(_wrap(title, 60))
    leg = ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False,
                    title="cluster (rows)", title_fontsize=8)
    for h in leg.legend_handles:  # legend markers of a readable size (the points are tiny)
        h.set_sizes([25])
    return _save(fig, path)


def plot_annealing_path(betas: NumbersLike, coords: NumbersLike, path: PathLike, *, critical: Any = None,
                        predicted: Any = None, title: str = "", ylabel: str = "centre coordinate on PC 1") -> Path:
    """Centre coordinates (n_betas, n_clusters) against beta (log axis): the
    pitchfork bifurcations of deterministic annealing (MacKay 2003, fig.
    20.11). ``predicted``: the first split beta = 1/sigma_1^2 of MacKay
    (20.17), drawn and explained in the legend; ``critical``: the betas where
    the centres were seen to split."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110, layout="constrained")
    coords = np.asarray(coords)
    for k in range(coords.shape[1]):
        ax.plot(betas, coords[:, k], ".-", ms=3, lw=1, color="C0", alpha=0.8,
                label="centres" if k == 0 else None)
    for i, b in enumerate(critical or []):
        ax.axvline(b, color="grey", ls=":", lw=1, label="observed splits" if i == 0 else None)
    if predicted is not None:
        ax.axvline(predicted, color="C3", ls="--", lw=1.2,
                   label=f"predicted first split: beta = 1/sigma_1^2 = {predicted:.3g}\n"
                         "(sigma_1^2: variance along PC 1, MacKay (20.17))")
    ax.set_xscale("log")
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("stiffness beta (1 / squared data units, log scale)")
    ax.set_ylabel(ylabel)
    ax.set_title(_wrap(title, 70), fontsize=10)
    ax.legend(loc="best", fontsize=7)
    return _save(fig, path)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _hashable(v):
    return tuple(v) if isinstance(v, list) else v


def sort_key(values: Iterable[Any]) -> list[tuple]:
    """Sort key: numbers numerically, then the rest as text."""
    return [(0, v, "") if _is_number(v) else (1, 0, str(v)) for v in values]


def curve_parameter(rows: Sequence[dict], params: Sequence[str]) -> str | None:
    """The grid parameter to put on the x axis: the numeric one with the most
    distinct values (ties: not ``n_clusters``)."""
    best, best_n = None, 0.0
    for p in params:
        vals = {_hashable(r[p]) for r in rows}
        if not all(_is_number(v) for v in vals):
            continue
        n = len(vals) - (0.5 if p == "n_clusters" else 0.0)
        if n > best_n:
            best, best_n = p, n
    return best


def plot_validation_curve(rows: Sequence[dict], params: Sequence[str], path: PathLike, *, score: str = "score",
                          title: str = "") -> Path:
    """Held-out ``score`` (mean +- std over folds) against one grid parameter,
    one line per setting of the others (``rows`` from
    :func:`infoclust_dask.crossval.summarize`)."""
    plt = _plt()
    x = curve_parameter(rows, params)
    others = [p for p in params if p != x]
    fig, ax = plt.subplots(figsize=(6.5, 4.2), dpi=110, layout="constrained")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple((p, _hashable(r[p])) for p in others), []).append(r)
    for i, (g, rs) in enumerate(sorted(groups.items(), key=lambda kv: sort_key(v for _, v in kv[0]))):
        label = ", ".join(f"{p}={v}" for p, v in g) or None
        if x is None:
            ax.errorbar([i], [rs[0][f"{score}_mean"]], yerr=[rs[0][f"{score}_std"]], fmt="o", capsize=3, label=label)
            continue
        rs = sorted(rs, key=lambda r: r[x])
        ax.errorbar([r[x] for r in rs], [r[f"{score}_mean"] for r in rs], yerr=[r[f"{score}_std"] for r in rs],
                    fmt="o-", capsize=3, ms=4, lw=1.2, label=label)
    if x is not None:
        xs = [r[x] for r in rows]
        if all(isinstance(v, (int, np.integer)) for v in xs):  # e.g. n_clusters: a tick per value, no 2.5
            ax.set_xticks(sorted(set(xs)))
        elif min(xs) > 0 and max(xs) / min(xs) > 10:
            ax.set_xscale("log")
        ax.set_xlabel(x)
    ax.set_ylabel(f"held-out {score} (mean +- std over folds)")
    ax.set_title(_wrap(title, 70))
    if groups and any(g for g in groups):
        ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


def plot_tradeoff(rows: Sequence[dict], path: PathLike, *, param: str = "reg_strength", title: str = "") -> Path:
    """Held-out K-means cost (x) against held-out DC cost (y) as ``param``
    (lambda_VQ) varies: the trade-off of Kaski et al. 2005, Fig. 2. One line
    per ``n_clusters``."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.2), dpi=110)
    groups: dict[Any, list[dict]] = {}
    for r in rows:
        groups.setdefault(_hashable(r.get("n_clusters")), []).append(r)
    for k, rs in sorted(groups.items(), key=lambda kv: sort_key([kv[0]])):
        rs = sorted(rs, key=lambda r: r[param])
        ax.plot([r["vq_cost_mean"] for r in rs], [r["cost_mean"] for r in rs], "o-", ms=4, label=f"K={k}")
        for r in rs:
            ax.annotate(f"{r[param]:g}", (r["vq_cost_mean"], r["cost_mean"]), fontsize=7,
                        textcoords="offset points", xytext=(3, 3))
    ax.set_xlabel("held-out K-means cost per sample (VQ distortion, squared data units)")
    ax.set_ylabel("held-out DC cost, -(9) (nats)")
    ax.set_title(_wrap(title or f"Trade-off as {param} varies (labels: {param})", 70))
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_contingency_heatmap(table: NumbersLike, reliability: NumbersLike | None, path: PathLike, *,
                             surprising: Any = None, title: str = "", xlabel: str = "y cluster",
                             ylabel: str = "x cluster") -> Path:
    """Heatmap of a contingency table (log2 observed / expected), each cell
    annotated with its count and, when ``reliability`` is given, its
    bootstrap reliability; cells surprising in the reference are outlined
    (``surprising``: (K, L) array of "over", "under" or "-")."""
    plt = _plt()
    n = np.asarray(table, dtype=float)
    N = n.sum()
    expected = n.sum(1, keepdims=True) @ n.sum(0, keepdims=True) / max(N, 1)
    ratio = np.log2((n + 0.5) / (expected + 0.5))
    lim = max(1.0, float(np.abs(ratio).max()))
    fig, ax = plt.subplots(figsize=(2.4 + 0.9 * n.shape[1], 1.4 + 0.8 * n.shape[0]), dpi=110,
                           layout="constrained")
    im = ax.imshow(ratio, cmap="RdBu_r", vmin=-lim, vmax=lim)
    for i in range(n.shape[0]):
        for j in range(n.shape[1]):
            text = f"{int(n[i, j])}" if reliability is None else f"{int(n[i, j])}\n{reliability[i][j]:.0%}"
            dark = abs(ratio[i, j]) / lim > 0.55  # the ends of RdBu are dark: white text there
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
            if surprising is not None and surprising[i][j] != "-":
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=1.5,
                                           ec="k" if surprising[i][j] == "over" else "grey"))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xticks(range(n.shape[1]))
    ax.set_yticks(range(n.shape[0]))
    fig.colorbar(im, ax=ax, label="log2(observed / expected count)", shrink=0.9)
    # the title over the whole figure (not the axes), wrapped to its width: it cannot run into the colour bar
    fig.suptitle(_wrap(title or "cross clusters: count and bootstrap reliability",
                       max(24, int(12 * (2.4 + 0.9 * n.shape[1])))), fontsize=9)
    return _save(fig, path)


def plot_smic_panels(panels: Sequence[dict], path: PathLike, *, title: str = "") -> Path:
    """Fig. 4 of Sugiyama et al.: for each data set, the SMIC clusters (top)
    and the LSMI model-selection curve over t with the chosen t marked
    (bottom). ``panels``: dicts with ``name``, ``X`` (n, 2), ``labels``,
    ``lsmi`` ({t: value}), ``t`` and ``ari``."""
    plt = _plt()
    fig, axes = plt.subplots(2, len(panels), figsize=(3.2 * len(panels), 6.2), squeeze=False, layout="constrained")
    for j, p in enumerate(panels):
        X = np.asarray(p["X"])
        ax = axes[0, j]
        ax.scatter(X[:, 0], X[:, 1], c=p["labels"], cmap="tab10", s=8, vmin=0, vmax=9)
        ax.set_title(f"{p['name']}\nARI={p['ari']:.3f}", fontsize=9)
        ax.set_xlabel("x1", fontsize=8)
        ax.set_ylabel("x2", fontsize=8)
        ax.tick_params(labelsize=7)
        ts = sorted(p["lsmi"], key=int)
        ax = axes[1, j]
        ax.plot([int(t) for t in ts], [p["lsmi"][t] for t in ts], "o-", ms=3)
        ax.axvline(int(p["t"]), color="k", lw=0.8, ls="--", label=f"chosen t={int(p['t'])}")
        ax.set_xticks([int(t) for t in ts])
        ax.tick_params(labelsize=7)
        ax.set_xlabel("t (neighbours in the local scaling)", fontsize=8)
        ax.legend(fontsize=7, loc="best")
        if j == 0:
            ax.set_ylabel("LSMI (14), held-out", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path, dpi=110)


def plot_drift(history: Sequence[dict], path: PathLike, *, title: str = "") -> Path:
    """The model's versions side by side: per version, the largest relative
    prototype drift since the previous version (bars; 1.0 = as far as to a
    neighbouring prototype) and the ARI of the two versions' labels on the
    fixed sample (line). ``history``: ``{"version", "max_relative_drift",
    "ari"}`` per compared version."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.8), dpi=110, layout="constrained")
    v = [int(h["version"]) for h in history]
    ax.bar(v, [float(h["max_relative_drift"]) for h in history], color="tab:orange", alpha=0.8,
           label="largest prototype drift / nearest-prototype distance")
    ax.set_xlabel("model version")
    ax.set_ylabel("relative drift")
    ax.set_xticks(v)
    ax2 = ax.twinx()
    ax2.plot(v, [float(h["ari"]) for h in history], "o-", color="tab:blue", label="ARI to the previous version")
    ax2.set_ylim(-0.05, 1.05)
    ax2.set_ylabel("ARI on the fixed sample")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper left", fontsize=8)
    ax.set_title(_wrap(title or "Drift between model versions", 70))
    return _save(fig, path)
