"""Matplotlib figures for run folders (Agg backend, PNG files)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["plot_clusters_2d", "plot_annealing_path"]


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_clusters_2d(Z, labels, centers_2d, path, *, title=""):
    """Scatter of 2-D coordinates ``Z`` coloured by ``labels`` with centres."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 5), dpi=110)
    ax.scatter(Z[:, 0], Z[:, 1], c=labels, s=4, cmap="tab10", alpha=0.6, linewidths=0)
    ax.scatter(centers_2d[:, 0], centers_2d[:, 1], c="k", marker="x", s=80, linewidths=2, label="centres")
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(title)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(Path(path))
    plt.close(fig)
    return Path(path)


def plot_annealing_path(betas, coords, path, *, critical=None, title=""):
    """Centre coordinates (n_betas, n_clusters) against beta (log axis):
    the pitchfork bifurcations of deterministic annealing (MacKay fig. 20.11)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    coords = np.asarray(coords)
    for k in range(coords.shape[1]):
        ax.plot(betas, coords[:, k], ".-", ms=3, lw=1)
    for b in critical or []:
        ax.axvline(b, color="grey", ls=":", lw=1)
    ax.set_xscale("log")
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("stiffness beta")
    ax.set_ylabel("centre coordinate (PC 1)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(Path(path))
    plt.close(fig)
    return Path(path)
