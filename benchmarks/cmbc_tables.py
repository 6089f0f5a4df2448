"""CMBC, Tables 2 and 3 of Gondek, Vaithyanathan & Garg (2005): mean NMI
(I(C;L)/H(L)) of the clustering found against each of the four planted
clusterings, over generated data sets (§6.1: 1000 rows, 18 binary features),
for CMBCbu, CMBCpm and the annealed EM baseline (gamma = 0), sessions 1-3 x
p_noise 0.1 / 0.2 / 0.3; the paper's numbers beside ours.

    .venv/bin/python benchmarks/cmbc_tables.py --table 2 --sets 50
    .venv/bin/python benchmarks/cmbc_tables.py --table 3 --sets 50
    .venv/bin/python benchmarks/cmbc_tables.py --gamma-curve --sets 20   # Fig. 3, docs/figures/cmbc_gamma.png
"""

from __future__ import annotations

import argparse
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np

# the paper's mean NMI (Q1, Q2, Q3, Q4) per (table, session, p_noise, algorithm)
PAPER = {
    2: {
        (1, 0.1): {"CMBCbu": (.0007, .8653, .0591, .0006), "CMBCpm": (.0008, .9297, .0008, .0006),
                   "EM": (.8089, .1217, .0007, .0008)},
        (1, 0.2): {"CMBCbu": (.0007, .6136, .0531, .0008), "CMBCpm": (.0007, .6599, .0163, .0007),
                   "EM": (.6443, .0429, .0012, .0015)},
        (1, 0.3): {"CMBCbu": (.0006, .2546, .0553, .0048), "CMBCpm": (.0006, .2796, .0279, .0025),
                   "EM": (.3129, .0430, .0022, .0015)},
        (2, 0.1): {"CMBCbu": (.0006, .0008, .8336, .0009), "CMBCpm": (.0005, .0006, .8300, .0008),
                   "EM": (.8089, .1217, .0007, .0008)},
        (2, 0.2): {"CMBCbu": (.0006, .0008, .4782, .0498), "CMBCpm": (.0005, .0007, .5007, .0317),
                   "EM": (.6443, .0429, .0012, .0015)},
        (2, 0.3): {"CMBCbu": (.0110, .0009, .1958, .0205), "CMBCpm": (.0006, .0006, .1520, .0283),
                   "EM": (.3129, .0430, .0022, .0015)},
        (3, 0.1): {"CMBCbu": (.0009, .0006, .0006, .8176), "CMBCpm": (.0008, .0006, .0005, .7997),
                   "EM": (.8089, .1217, .0007, .0008)},
        (3, 0.2): {"CMBCbu": (.0009, .0005, .0006, .5220), "CMBCpm": (.0009, .0005, .0005, .4351),
                   "EM": (.6443, .0429, .0012, .0015)},
        (3, 0.3): {"CMBCbu": (.0086, .0013, .0068, .2107), "CMBCpm": (.0047, .0008, .0101, .1160),
                   "EM": (.3129, .0430, .0022, .0015)},
    },
    3: {
        (1, 0.1): {"CMBCbu": (.0008, .8923, .0333, .0006), "CMBCpm": (.0008, .9012, .0253, .0007)},
        (1, 0.2): {"CMBCbu": (.0007, .6554, .0204, .0007), "CMBCpm": (.0032, .6473, .0155, .0030)},
        (1, 0.3): {"CMBCbu": (.0025, .3064, .0229, .0012), "CMBCpm": (.0062, .2148, .0391, .0089)},
        (2, 0.1): {"CMBCbu": (.0007, .0009, .8302, .0006), "CMBCpm": (.0007, .0009, .8115, .0167)},
        (2, 0.2): {"CMBCbu": (.0010, .0011, .5104, .0269), "CMBCpm": (.0323, .0042, .4453, .0299)},
        (2, 0.3): {"CMBCbu": (.0063, .0012, .2115, .0103), "CMBCpm": (.0212, .0017, .1367, .0215)},
        (3, 0.1): {"CMBCbu": (.0008, .0006, .0006, .8175), "CMBCpm": (.0459, .0220, .0128, .6931)},
        (3, 0.2): {"CMBCbu": (.0173, .0005, .0006, .5026), "CMBCpm": (.0979, .0137, .0119, .3017)},
        (3, 0.3): {"CMBCbu": (.0711, .0030, .0017, .1221), "CMBCpm": (.0637, .0125, .0145, .0578)},
    },
}


def one(job):
    """NMI against Q1..Q4 of one algorithm on one generated set."""
    from infoclust_dask import CMBC
    from infoclust_dask.datasets import cmbc_session, make_cmbc_data
    from infoclust_dask.metrics import nmi_paper

    table, session, p_noise, algo, gamma, seed = job
    Y, Q, groups = make_cmbc_data(1000, p_noise=p_noise, random_state=seed)
    kind = "known" if table == 2 else "negative"
    Yp, prior, _ = cmbc_session(Y, Q, groups, session, kind)
    variant = {"CMBCbu": "bu", "CMBCpm": "pm", "EM": "bu"}[algo]
    g = 0.0 if algo == "EM" else (gamma if gamma == "default" else float(gamma))
    est = CMBC(2, gamma=g, variant=variant, random_state=seed, scheduler="sync")
    est = est.fit(Yp, known=prior) if kind == "known" else est.fit(Yp, prior)
    return tuple(nmi_paper(est.labels_, Q[:, l_]) for l_ in range(4))


def tables(a):
    algos = ["CMBCbu", "CMBCpm"] + (["EM"] if a.table == 2 else [])
    jobs = [(a.table, s, p, algo, a.gamma, 1000 * s + seed) for s in a.sessions for p in a.noise for algo in algos
            for seed in range(a.sets)]
    t0 = time.perf_counter()
    with Pool(a.processes) as pool:
        res = pool.map(one, jobs, chunksize=4)
    out = {}
    for job, r in zip(jobs, res, strict=True):
        out.setdefault(job[1:4], []).append(r)
    kind = "known clusterings" if a.table == 2 else "negative features (half of each known clustering's features)"
    print(f"### Table {a.table}: {kind}; {a.sets} sets per row, gamma = {a.gamma} (CMBC), alpha = 0.5; "
          f"{time.perf_counter() - t0:.0f} s\n")
    print("| session | p_noise | algorithm | NMI(C,Q1) ours / paper | NMI(C,Q2) | NMI(C,Q3) | NMI(C,Q4) | "
          "target found (NMI > 0.75) |")
    print("|---|---|---|---|---|---|---|---|")
    for s in a.sessions:
        for p in a.noise:
            for algo in algos:
                r = np.array(out[(s, p, algo)])
                paper = PAPER[a.table].get((s, p), {}).get(algo)
                cells = [f"{r[:, i].mean():.3f} / {paper[i]:.3f}" if paper else f"{r[:, i].mean():.3f}"
                         for i in range(4)]
                found = f"{np.mean(r[:, s] > 0.75):.0%}"
                print(f"| {s} | {p} | {algo} | " + " | ".join(cells) + f" | {found} |")


def curve(a):
    gammas = [0.0, 0.5, 0.8, 0.9, 0.95, 0.97, 0.98, 0.985, 0.99, 0.993, 0.995, 0.997, 0.999]
    jobs = [(2, 3, p, "CMBCbu", g, 3000 + seed) for p in a.noise for g in gammas for seed in range(a.sets)]
    t0 = time.perf_counter()
    with Pool(a.processes) as pool:
        res = pool.map(one, jobs, chunksize=4)
    curves = {p: [] for p in a.noise}
    for p in a.noise:
        for g in gammas:
            r = [x[3] for job, x in zip(jobs, res, strict=True) if job[2] == p and job[4] == g]
            curves[p].append(float(np.mean(r)))
    print(f"### NMI(C, Q4) in session 3 vs gamma (CMBCbu, {a.sets} sets per point; {time.perf_counter() - t0:.0f} s)\n")
    print("| gamma | " + " | ".join(f"p_noise {p}" for p in a.noise) + " |")
    print("|---|" + "---|" * len(a.noise))
    for i, g in enumerate(gammas):
        print(f"| {g} | " + " | ".join(f"{curves[p][i]:.3f}" for p in a.noise) + " |")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    x = [1.0 - g for g in gammas]  # the action is close to 1: plot 1 - gamma on a log axis
    for p in a.noise:
        ax.plot(x, curves[p], marker="o", label=f"p_noise {p}")
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xticks(x)
    ax.set_xticklabels([f"{g:g}" for g in gammas], rotation=60, fontsize=7)
    ax.minorticks_off()
    ax.set_xlabel("gamma (axis: 1 - gamma, log scale)")
    ax.set_ylabel("mean NMI(C, Q4), session 3")
    ax.set_title("CMBCbu: similarity to the target clustering vs gamma (cf. Fig. 3)")
    ax.legend()
    out = Path(__file__).resolve().parents[1] / "docs" / "figures" / "cmbc_gamma.png"
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"\nplot: {out}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--table", type=int, choices=[2, 3], default=2)
    p.add_argument("--sets", type=int, default=50, help="generated data sets per row (the paper: 100)")
    p.add_argument("--sessions", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--noise", type=float, nargs="+", default=[0.1, 0.2, 0.3])
    p.add_argument("--gamma", default="default", help="gamma of both CMBC variants (default: CMBC's default rule)")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--gamma-curve", action="store_true", help="NMI vs gamma in session 3 (Fig. 3) instead")
    a = p.parse_args()
    curve(a) if a.gamma_curve else tables(a)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
