"""The method registry: one entry per method, read by the ``infoclust``
command (``infoclust fit <method>``), the cross-validation library and flow
(:mod:`infoclust_dask.crossval`) and the demo.

A :class:`Method` names its estimator class, the store variable its fit
needs beside ``x`` (classes ``label``, a second view ``y``, or nothing), its
command-line options and how they become constructor parameters, what a
run's summary reports, and - for methods that can be cross-validated - how
a fitted model is scored on held-out rows. Adding a method is one kernels
module, one objectives module, one estimator module and one entry here
(see ``docs/ARCHITECTURE.md``).

The registry also names the Prefect flows the command starts
(:data:`FLOWS`), by import path, so that the library never imports
``infoclust_pipelines`` at module level and ``infoclust_pipelines`` never imports the CLI.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["Method", "Option", "METHODS", "FLOWS", "get_method", "load_flow", "auto_or"]


# --------------------------------------------------------------------------
# option parsing helpers
# --------------------------------------------------------------------------
def auto_or(kind, word="auto"):
    """An argparse type: the string ``word`` (default "auto") or a value of
    ``kind``; the error names the expected form."""

    def parse(text):
        if text == word:
            return word
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"expected {word!r} or a {kind.__name__}, got {text!r}") from None

    parse.__name__ = f"'{word}' or {kind.__name__}"
    return parse


@dataclass(frozen=True)
class Option:
    """One command-line option of ``infoclust fit <method>``: ``--flag``
    sets the constructor parameter ``param`` (None: used by ``build`` only)."""

    flag: str
    param: str | None
    type: Callable[[str], Any] = str
    default: Any = None
    help: str = ""
    choices: tuple | None = None

    @property
    def dest(self):
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Method:
    """A method as the command, cross-validation and the demo see it.

    Parameters
    ----------
    name : str
        The name users type (``infoclust fit <name>``, ``--method <name>``).
    estimator : str
        Class name in :mod:`infoclust_dask.cluster`.
    help : str
        One line for ``infoclust fit --help``.
    aux : {"label", "y", None}
        Store variable the fit takes beside ``x``.
    aux_keyword : str, optional
        Pass ``aux`` to ``fit`` as this keyword (CMBC's ``known=``) instead
        of positionally.
    aux_option : str, optional
        The option (its ``dest``) whose value names the store variable(s) to
        use instead of ``aux``: comma-separated, several become a list (CMBC's
        ``--known label,topic``); "none" passes nothing.
    options : tuple of Option
        Method-specific command-line options.
    build : callable, optional
        ``build(values: dict) -> dict`` of constructor parameters from the
        option values (with ``n_clusters`` from ``-k`` and ``l`` from ``-l``);
        default: every option with a ``param`` passed as is.
    summary : callable, optional
        ``summary(est, ds, scheduler, run_dir) -> dict`` of method-specific
        facts for the run's ``summary.json``; it may write plots into
        ``run_dir`` and list them under ``"plots"``.
    score : callable, optional
        ``score(model, X_test, aux_test, scheduler) -> dict`` with at least
        ``"score"`` (higher is better); None: not cross-validated.
    required : tuple of str
        Parameters a cross-validation grid must set.
    """

    name: str
    estimator: str
    help: str
    aux: str | None = None
    options: tuple = ()
    build: Callable[[dict], dict] | None = None
    summary: Callable | None = None
    score: Callable | None = None
    required: tuple = ("n_clusters",)
    aux_keyword: str | None = None
    aux_option: str | None = None

    def estimator_class(self):
        from . import cluster

        return getattr(cluster, self.estimator)

    def params_from_options(self, values: dict) -> dict:
        if self.build is not None:
            return self.build(values)
        out = {"n_clusters": values["k"]}
        out.update({o.param: values[o.dest] for o in self.options if o.param is not None})
        return out

    def aux_names(self, values=None):
        """The store variables that feed ``aux``: ``[aux]``, or the names given
        to ``aux_option`` in ``values`` (the parsed options); [] for none."""
        given = (values or {}).get(self.aux_option) if self.aux_option else None
        if given is None:
            return [] if self.aux is None else [self.aux]
        names = [n.strip() for n in str(given).split(",") if n.strip()]
        return [] if names in ([], ["none"]) else names

    def check_store(self, ds, values=None):
        """Raise a clear error when the store dataset ``ds`` lacks a
        variable the method needs beside ``x``."""
        for name in self.aux_names(values):
            if name not in ds:
                what = ("class labels ('label': ingest with --label-column)" if name == "label" else
                        "a second, paired view ('y')" if name == "y" else f"the variable {name!r}")
                raise ValueError(f"Method {self.name!r} needs {what}, but the store has no {name!r} variable; "
                                 f"it holds {sorted(ds.data_vars)}.")

    def fit(self, est, ds, values=None, **fit_kwargs):
        """Fit ``est`` on the store dataset ``ds``: its ``x`` and the aux
        variable(s) (see :meth:`aux_names`); ``fit_kwargs`` (e.g.
        ``checkpoint=``/``resume=``) go to ``est.fit``."""
        self.check_store(ds, values)
        names = self.aux_names(values)
        aux = None if not names else ds[names[0]] if len(names) == 1 else [ds[n] for n in names]
        return self.fit_arrays(est, ds["x"], aux, **fit_kwargs)

    def fit_arrays(self, est, X, aux, **fit_kwargs):
        """``est.fit`` with the primary data and the auxiliary variable (or None)."""
        if aux is None:
            return est.fit(X, **fit_kwargs)
        if self.aux_keyword:
            return est.fit(X, **{self.aux_keyword: aux}, **fit_kwargs)
        return est.fit(X, aux, **fit_kwargs)


# --------------------------------------------------------------------------
# summaries and held-out scores (driver-side, small)
# --------------------------------------------------------------------------
def _summary_kmeans(est, ds, sched, run_dir=None):
    from . import engine

    k = est.cluster_centers_.shape[0]
    return {"inertia": float(est.inertia_),
            "cluster_sizes": np.bincount(engine.compute(est.labels_, scheduler=sched), minlength=k).tolist()}


def _summary_softkmeans(est, ds, sched, run_dir=None):
    return {"critical_betas": est.critical_betas()}


def _summary_dc(est, ds, sched, run_dir=None):
    out = {"sigma": est.sigma_, "log_posterior_9": est.score(ds["x"], ds["label"]),
           "contingency": est.contingency_.tolist(), "n_evaluations": len(est.objective_history_)}
    if est.n_iter_ == 0 and est.optimizer == "cg":
        out["note"] = (f"conjugate gradients took no step: at sigma={est.sigma_:.4g} the smoothed posterior (5) is "
                       "flat around the K-means start (gradient below tolerance), so the prototypes are K-means'; "
                       "the held-out choice of sigma found no width that did better. Try --sigma larger.")
    return out


def _summary_ac(est, ds, sched, run_dir=None):
    over, under = est.most_surprising(3)
    return {"sigma": list(est.sigma_), "log_bayes_factor_3": est.score(ds["x"], ds["y"]),
            "mutual_information": est.mutual_information(ds["x"], ds["y"]),
            "contingency": est.contingency_.tolist(), "most_over_represented": over,
            "most_under_represented": under}


def _summary_smic(est, ds, sched, run_dir=None):
    k = est.n_clusters
    out = {"t": est.t_, "kernel_normalization": est.kernel_normalization, "lsmi": est.lsmi_,
           "eigenvalues": est.eigenvalues_.tolist(), "timings": est.timings_,
           "cluster_sizes": np.bincount(est.labels_, minlength=k).tolist()}
    if "label" in ds:
        from sklearn.metrics import adjusted_rand_score

        from . import engine

        out["ari_vs_label"] = float(adjusted_rand_score(engine.compute(ds["label"].data, scheduler=sched),
                                                        est.labels_))
    return out


def _summary_cmbc(est, ds, sched, run_dir=None):
    """Facts of a CMBC run and, with ``run_dir``, one heatmap per integer
    label column of the store (the new clusters against it); the labels and
    each column are computed once for both."""
    from pathlib import Path

    from . import engine, plotting
    from .metrics import contingency_table, nmi_paper
    from .plotting import plot_contingency_heatmap

    labels = np.asarray(engine.compute(est.labels_, scheduler=sched))
    out = {"gamma": est.gamma_, "variant": est.variant, "n_patterns": est.n_patterns_,
           "temperatures": len(est.temperatures_), "cluster_sizes": np.bincount(labels).tolist()}
    plots = {}
    for name in ds.data_vars:
        if ds[name].dims == ("sample",) and np.issubdtype(ds[name].dtype, np.integer):
            lab = np.asarray(engine.compute(ds[name].data, scheduler=sched))
            table = contingency_table(labels, np.unique(lab, return_inverse=True)[1])
            out[f"nmi_vs_{name}"] = nmi_paper(labels, lab)
            out[f"contingency_vs_{name}"] = table.tolist()
            if run_dir is not None and plotting.available():
                path = Path(run_dir) / f"contingency-{name}.png"
                plot_contingency_heatmap(table, None, path, xlabel=f"{name} (stored)", ylabel="CMBC cluster",
                                         title=f"CMBC clusters vs {name}: count")
                plots[name] = str(path)
    if plots:
        out["plots"] = plots
    return out


#: gamma of the held-out score that compares CMBC fits across a gamma grid
CMBC_SCORE_GAMMA = 0.995


def _score_cmbc(model, Xte, known_te, scheduler):
    """Held-out objective (3.14) at one reference gamma for every cell (the
    fits' own gammas would make the scores incomparable), with the held-out
    log-likelihood and the NMI of the held-out clusters to the known
    clustering beside it."""
    from . import engine
    from .metrics import nmi_paper

    loglik, pm, n = model._held_out_terms(Xte, known=known_te)  # two passes, used at both gammas
    out = {"score": model._objective_at(loglik, pm, n, CMBC_SCORE_GAMMA),
           "loglik_per_sample": model._objective_at(loglik, pm, n, 0.0), "gamma": model.gamma_}
    if known_te is not None:
        out["nmi_known"] = nmi_paper(np.asarray(engine.compute(model.predict(Xte), scheduler=scheduler)),
                                     np.asarray(engine.compute(getattr(known_te, "data", known_te),
                                                               scheduler=scheduler)))
    return out


def _build_cmbc(v):
    return {"n_clusters": v["k"], "gamma": v["gamma"], "variant": v["variant"]}


def _score_kmeans(model, Xte, cte, scheduler):
    """Held-out log-likelihood of the K-means mixture (the score: it peaks at
    the number of clusters the data have), and the held-out K-means cost,
    which always falls as k grows."""
    from .metrics import kmeans_heldout_loglik, quantization_error

    q = quantization_error(Xte, model.cluster_centers_, scheduler=scheduler)
    ll = kmeans_heldout_loglik(Xte, model.cluster_centers_, model.cluster_sizes_, model.inertia_,
                               scheduler=scheduler)
    return {"score": ll, "loglik_per_sample": ll, "vq_cost": q, "train_inertia": float(model.inertia_)}


def _score_dc(model, Xte, cte, scheduler):
    from .metrics import quantization_error

    lp = float(model.score(Xte, cte))
    return {"score": lp, "cost": -lp, "vq_cost": quantization_error(Xte, model.cluster_centers_, scheduler=scheduler),
            "sigma": float(model.sigma_)}


def _score_ac(model, Xte, Yte, scheduler):
    from .objectives import ac as obj

    table = model.contingency_table(Xte, Yte)
    return {"score": obj.log_bayes_factor(table, obj.check_prior(model.prior)), "mi": obj.mutual_information(table),
            "sigma_x": float(model.sigma_[0]), "sigma_y": float(model.sigma_[1])}


def _build_kmeans(v):
    return {"n_clusters": v["k"], "init": v["init"], "n_init": v["n_init"], "max_iter": v["max_iter"],
            "tol": v["tol"]}


def _build_softkmeans(v):
    return {"n_clusters": v["k"], "beta_schedule": np.geomspace(v["beta_min"], v["beta_max"], v["n_betas"]),
            "max_iter": v["max_iter"]}


def _build_ac(v):
    return {"n_clusters": (v["k"], v["l"] or v["k"]), "sigma": v["sigma"]}


_int_or_auto = auto_or(int)


METHODS: dict[str, Method] = {m.name: m for m in (
    Method(
        "kmeans", "KMeans", "K-means (Lloyd) with k-means++ / k-means‖ seeding",
        options=(
            Option("--init", "init", default="k-means++", choices=("k-means++", "k-means||", "random"),
                   help="seeding (default k-means++; k-means|| for very large stores)"),
            Option("--n-init", "n_init", type=_int_or_auto, default="auto", help="restarts, or 'auto'"),
            Option("--max-iter", "max_iter", type=int, default=300, help="Lloyd iterations at most (default 300)"),
            Option("--tol", "tol", type=float, default=1e-4,
                   help="stop when the centres move less than this, relative to the data's variance"),
        ),
        build=_build_kmeans, summary=_summary_kmeans, score=_score_kmeans,
    ),
    Method(
        "softkmeans", "SoftKMeans", "soft K-means annealed over a schedule of stiffness beta",
        options=(
            Option("--beta-min", None, type=float, default=0.01, help="first (softest) stiffness (default 0.01)"),
            Option("--beta-max", None, type=float, default=10.0, help="last (stiffest) stiffness (default 10)"),
            Option("--n-betas", None, type=int, default=40, help="stiffnesses, log-spaced (default 40)"),
            Option("--max-iter", "max_iter", type=int, default=300,
                   help="EM iterations at most per stiffness (default 300)"),
        ),
        build=_build_softkmeans, summary=_summary_softkmeans,
    ),
    Method(
        "dc", "DiscriminativeClustering", "discriminative clustering (the store needs a 'label')",
        aux="label",
        options=(
            Option("--sigma", "sigma", type=auto_or(float), default="auto",
                   help="membership width, or 'auto' (held-out choice)"),
            Option("--max-iter", "max_iter", type=int, default=None, help="CG iterations (default 50)"),
        ),
        summary=_summary_dc, score=_score_dc,
    ),
    Method(
        "ac", "AssociativeClustering", "associative clustering of paired views (the store needs a 'y')",
        aux="y",
        options=(
            Option("-l", None, type=int, default=None, help="clusters of the y view (default k)"),
            Option("--sigma", "sigma", type=auto_or(float), default="auto",
                   help="membership widths, or 'auto' (held-out choice)"),
        ),
        build=_build_ac, summary=_summary_ac, score=_score_ac,
    ),
    Method(
        "cmbc", "CMBC", "clustering of binary data away from a known clustering (the store needs a 'label')",
        aux="label", aux_keyword="known", aux_option="known",
        options=(
            Option("--known", None, default="label",
                   help="store variable(s) with the known clustering(s), comma-separated (default label); "
                        "'none' for the annealed EM baseline"),
            Option("--gamma", "gamma", type=auto_or(float, "default"), default="default",
                   help="constraint weight in [0, 1), or 'default' (0.995 with known clusterings)"),
            Option("--variant", "variant", default="bu", choices=("bu", "pm"),
                   help="bu: batch update; pm: partial maximization"),
        ),
        build=_build_cmbc, summary=_summary_cmbc, score=_score_cmbc,
    ),
    Method(
        "smic", "SMIC", "SMI clustering with t chosen by LSMI",
        options=(
            Option("--t", "t", type=_int_or_auto, default="auto",
                   help="kernel parameter t of (7), or 'auto' (max LSMI over 1..10)"),
            Option("--kernel-normalization", "kernel_normalization", default="none", choices=("none", "symmetric"),
                   help="kernel (7) as is, or D^-1/2 K D^-1/2"),
        ),
        summary=_summary_smic,
    ),
)}


def get_method(name) -> Method:
    """The registry entry ``name``; an unknown name lists the known ones."""
    if name not in METHODS:
        raise ValueError(f"Unknown method {name!r}; choose one of {sorted(METHODS)}.")
    return METHODS[name]


#: Prefect flows the command starts: name -> "module:function" taking the parsed arguments
FLOWS = {
    "demo": "infoclust_pipelines.demo:run_from_args",
    "crossval": "infoclust_pipelines.crossval:run_from_args",
}


def load_flow(name):
    """The entry point of flow ``name`` (imported on use)."""
    module, func = FLOWS[name].split(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"The {name!r} flow lives in the '{module}' module, which could not be imported ({exc}). "
            "The flows need Prefect: pip install 'infoclust_dask[pipelines]' (or '[all]')."
        ) from exc
    return getattr(mod, func)
