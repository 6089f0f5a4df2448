"""The method registry: one entry per method, read by the ``infoclust``
command (``infoclust fit <method>``), the cross-validation library and flow
(:mod:`infoclust_dask.crossval`) and the demo.

A :class:`Method` names its estimator class, the store variable its fit
needs beside ``x`` (classes ``label``, a second view ``y``, or nothing), and
its command-line options and how they become constructor parameters. What a
run reports and how a model scores held-out rows are the estimator's own
public methods (``run_summary``, ``held_out_score``). Adding a method is one
kernels module, one objectives module, one estimator module and one entry
here, or one :func:`register` call from outside the package (see
``docs/ARCHITECTURE.md``).

The registry also names the Prefect flows the command starts
(:data:`FLOWS`), by import path, so that the library never imports
``infoclust_pipelines`` at module level and ``infoclust_pipelines`` never imports the CLI.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["Method", "Option", "METHODS", "FLOWS", "register", "unregister", "get_method", "load_flow", "auto_or"]


# --------------------------------------------------------------------------
# option parsing helpers
# --------------------------------------------------------------------------
def auto_or(kind: Callable[[str], Any], word: str = "auto") -> Callable[[str], Any]:
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
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


def _agreement_with_label(est: Any, ds: Any) -> dict | None:
    """ARI and NMI of an unsupervised fit's training clusters against the
    store's own ``label`` (None without one): what a user fitting K-means on
    a labelled data set wants to know first."""
    labels = getattr(est, "labels_", getattr(est, "labels_x_", None))  # AC: the x-view clusters
    if ds is None or "label" not in getattr(ds, "data_vars", {}) or labels is None or np.ndim(labels) != 1:
        return None
    from . import engine
    from .metrics import agreement

    with engine.installed(getattr(est, "scheduler", None), data=ds["x"]):  # where the fit ran
        pred = np.asarray(engine.compute(labels))
        truth = np.asarray(engine.compute(ds["label"].data))
    if truth.shape != pred.shape:
        return None
    return agreement(truth, pred)


@dataclass(frozen=True)
class Method:
    """A method as the command, cross-validation and the demo see it.

    Parameters
    ----------
    name : str
        The name users type (``infoclust fit <name>``, ``--method <name>``).
    estimator : str or class
        Class name in :mod:`infoclust_dask.cluster`, or the estimator class
        itself (a method registered from outside the package). What a run
        reports is the estimator's ``run_summary(data)``; whether the method
        is cross-validated, whether it has ``held_out_score(X, aux)``.
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
    required : tuple of str
        Parameters a cross-validation grid must set.
    """

    name: str
    estimator: str
    help: str
    aux: str | None = None
    options: tuple = ()
    build: Callable[[dict], dict] | None = None
    required: tuple = ("n_clusters",)
    aux_keyword: str | None = None
    aux_option: str | None = None

    def estimator_class(self) -> type:
        if isinstance(self.estimator, type):
            return self.estimator
        from . import cluster

        return getattr(cluster, self.estimator)

    @property
    def estimator_name(self) -> str:
        return self.estimator if isinstance(self.estimator, str) else self.estimator.__name__

    @property
    def cross_validated(self) -> bool:
        """Whether fitted models score held-out rows (``held_out_score``)."""
        return callable(getattr(self.estimator_class(), "held_out_score", None))

    def summary(self, est: Any, ds: Any, run_dir: str | os.PathLike | None = None) -> dict:
        """The fitted ``est``'s ``run_summary(ds)`` and, with ``run_dir``, a
        heatmap of every ``contingency_vs_<name>`` table in it (listed under
        ``"plots"``)."""
        out = est.run_summary(ds) if callable(getattr(est, "run_summary", None)) else {}
        agreement = _agreement_with_label(est, ds)  # every method (issue 54: one schema), supervised ones too
        if agreement is not None:
            out["agreement_with_label"] = agreement
        tables = {k.removeprefix("contingency_vs_"): v for k, v in out.items() if k.startswith("contingency_vs_")}
        if run_dir is not None and tables:
            from . import plotting
            from .storage.location import run_path

            if plotting.available():
                plots = {}
                for name, table in tables.items():
                    path = run_path(run_dir) / f"contingency-{name}.png"
                    plotting.plot_contingency_heatmap(np.asarray(table), None, path, xlabel=f"{name} (stored)",
                                                      ylabel=f"{self.name} cluster",
                                                      title=f"{self.name} clusters vs {name}: count")
                    plots[name] = str(path)
                out["plots"] = plots
        return out

    def score(self, model: Any, X_test: Any, aux_test: Any = None) -> dict:
        """``model.held_out_score(X_test, aux_test)``: at least ``"score"``
        (higher is better)."""
        if not self.cross_validated:
            raise ValueError(f"Method {self.name!r} is not cross-validated (its estimator has no held_out_score).")
        return model.held_out_score(X_test, aux_test)

    def params_from_options(self, values: dict) -> dict:
        if self.build is not None:
            return self.build(values)
        out = {"n_clusters": values["k"]}
        out.update({o.param: values[o.dest] for o in self.options if o.param is not None})
        return out

    def aux_names(self, values: dict | None = None) -> list[str]:
        """The store variables that feed ``aux``: ``[aux]``, or the names given
        to ``aux_option`` in ``values`` (the parsed options); [] for none."""
        given = (values or {}).get(self.aux_option) if self.aux_option else None
        if given is None:
            return [] if self.aux is None else [self.aux]
        names = [n.strip() for n in str(given).split(",") if n.strip()]
        return [] if names in ([], ["none"]) else names

    def check_store(self, ds: Any, values: dict | None = None) -> None:
        """Raise a clear error when the store dataset ``ds`` lacks a
        variable the method needs beside ``x``, or when the options
        contradict each other (``--init`` with ``--warm-start``)."""
        given_init = next((values[o.dest] for o in self.options if o.dest == "init" and values and
                           values.get(o.dest) not in (None, o.default)), None)
        if values and values.get("warm_start") and given_init is not None:
            raise ValueError(f"--warm-start starts from the saved model's prototypes, so --init {given_init} would be "
                             "ignored. Leave --init out, or drop --warm-start to seed afresh.")
        for name in self.aux_names(values):
            if name not in ds:
                what = ("class labels ('label': ingest with --label-column)" if name == "label" else
                        "a second, paired view ('y')" if name == "y" else f"the variable {name!r}")
                raise ValueError(f"Method {self.name!r} needs {what}, but the store has no {name!r} variable; "
                                 f"it holds {sorted(ds.data_vars)}.")

    def fit(self, est: Any, ds: Any, values: dict | None = None, **fit_kwargs: Any) -> Any:
        """Fit ``est`` on the store dataset ``ds``: its ``x`` and the aux
        variable(s) (see :meth:`aux_names`); ``fit_kwargs`` (e.g.
        ``checkpoint=``/``resume=``) go to ``est.fit``."""
        self.check_store(ds, values)
        names = self.aux_names(values)
        aux = None if not names else ds[names[0]] if len(names) == 1 else [ds[n] for n in names]
        return self.fit_arrays(est, ds["x"], aux, **fit_kwargs)

    def fit_arrays(self, est: Any, X: Any, aux: Any, **fit_kwargs: Any) -> Any:
        """``est.fit`` with the primary data and the auxiliary variable (or None)."""
        if aux is None:
            return est.fit(X, **fit_kwargs)
        if self.aux_keyword:
            return est.fit(X, **{self.aux_keyword: aux}, **fit_kwargs)
        return est.fit(X, aux, **fit_kwargs)


# --------------------------------------------------------------------------
# constructor parameters from the options
# --------------------------------------------------------------------------
def _build_cmbc(v):
    return {"n_clusters": v["k"], "gamma": v["gamma"], "variant": v["variant"]}


def _build_kmeans(v):
    return {"n_clusters": v["k"], "init": v["init"], "n_init": v["n_init"], "max_iter": v["max_iter"],
            "tol": v["tol"]}


def _build_softkmeans(v):
    if v["n_betas"] is None:  # betas placed from the data, up to --beta-max
        if v["beta_min"] is not None:
            raise ValueError("--beta-min sets the first stiffness of a fixed schedule: give --n-betas too (without "
                             "it, the schedule starts below the data's first critical stiffness by itself).")
        schedule: Any = "auto"
    else:
        schedule = np.geomspace(0.01 if v["beta_min"] is None else v["beta_min"], v["beta_max"], v["n_betas"])
    return {"n_clusters": v["k"], "beta": v["beta_max"], "beta_schedule": schedule, "max_iter": v["max_iter"]}


def _build_ac(v):
    return {"n_clusters": (v["k"], v["k"] if v["l"] is None else v["l"]), "sigma": v["sigma"]}


_int_or_auto = auto_or(int)


#: the mixture baselines' options (Kaski, Sinkkonen & Klami 2005, §6.5)
_MIXTURE_OPTIONS = (
    Option("--sigma", "sigma", type=float, default=None,
           help="one fixed spread for every component (default: each component's variance is learned)"),
    Option("--max-iter", "max_iter", type=int, default=100, help="EM iterations at most (default 100)"),
)

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
        build=_build_kmeans,
    ),
    Method(
        "softkmeans", "SoftKMeans", "soft K-means annealed over a schedule of stiffness beta",
        options=(
            Option("--beta-min", None, type=float, default=None,
                   help="first (softest) stiffness of a fixed schedule (with --n-betas; default 0.01)"),
            Option("--beta-max", None, type=float, default=10.0, help="last (stiffest) stiffness (default 10)"),
            Option("--n-betas", None, type=int, default=None,
                   help="a fixed schedule of this many log-spaced stiffnesses; default: placed from the data, "
                        "dense around the predicted splits"),
            Option("--max-iter", "max_iter", type=int, default=3000,
                   help="EM iterations at most per stiffness (default 3000; near a split the iteration is slow)"),
        ),
        build=_build_softkmeans,
    ),
    Method(
        "dc", "DiscriminativeClustering", "discriminative clustering (the store needs a 'label')",
        aux="label",
        options=(
            Option("--sigma", "sigma", type=auto_or(float), default="auto",
                   help="membership width, or 'auto' (held-out choice)"),
            Option("--max-iter", "max_iter", type=int, default=None,
                   help="CG iterations at most (default 1000; --tol ends them earlier)"),
            Option("--tol", "tol", type=float, default=1e-4,
                   help="stop CG when the objective rose by less than this (relative) over 5 iterations"),
        ),
    ),
    Method(
        "ac", "AssociativeClustering", "associative clustering of paired views (the store needs a 'y')",
        aux="y",
        options=(
            Option("-l", None, type=int, default=None, help="clusters of the y view (default k)"),
            Option("--sigma", "sigma", type=auto_or(float), default="auto",
                   help="membership widths, or 'auto' (held-out choice)"),
        ),
        build=_build_ac,
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
        build=_build_cmbc,
    ),
    Method(
        "mog", "IsotropicGaussianMixture", "mixture of isotropic Gaussians by EM (DC's baseline 'MoG')",
        options=_MIXTURE_OPTIONS,
    ),
    Method(
        "mda2", "MDA2", "joint mixture of x and the class by EM (DC's baseline 'MDA2'; the store needs a 'label')",
        aux="label", options=_MIXTURE_OPTIONS,
    ),
    Method(
        "smic", "SMIC", "SMI clustering with t chosen by LSMI",
        options=(
            Option("--t", "t", type=_int_or_auto, default="auto",
                   help="kernel parameter t of (7), or 'auto' (max LSMI over 1..10)"),
            Option("--kernel-normalization", "kernel_normalization", default="none", choices=("none", "symmetric"),
                   help="kernel (7) as is, or D^-1/2 K D^-1/2"),
        ),
    ),
)}


def register(method: Method, *, replace: bool = False) -> Method:
    """Add ``method`` to :data:`METHODS` (the command, cross-validation and
    the demo's table then offer it); a name already taken is refused unless
    ``replace``. Returns the method."""
    if not isinstance(method, Method):
        raise TypeError(f"register() takes a registry.Method; got {type(method).__name__}.")
    if method.name in METHODS and not replace:
        raise ValueError(f"A method named {method.name!r} is registered already; pass replace=True to replace it.")
    if isinstance(method.estimator, type):
        from .runs import allow_model_class

        allow_model_class(method.estimator)  # `infoclust fit` saves its model.json; predict loads it
    METHODS[method.name] = method
    return method


def unregister(name: str) -> Method:
    """Remove the method ``name`` (e.g. a test's); returns its entry."""
    method = get_method(name)
    del METHODS[name]
    if isinstance(method.estimator, type):
        from .runs import allow_model_class

        allow_model_class(method.estimator, allowed=False)
    return method


def get_method(name: str) -> Method:
    """The registry entry ``name``; an unknown name lists the known ones."""
    if name not in METHODS:
        raise ValueError(f"Unknown method {name!r}; choose one of {sorted(METHODS)}.")
    return METHODS[name]


#: Prefect flows the command starts: name -> "module:function" taking the parsed arguments
FLOWS = {
    "demo": "infoclust_pipelines.demo:run_from_args",
    "crossval": "infoclust_pipelines.crossval:run_from_args",
}


def load_flow(name: str) -> Callable[..., Any]:
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
