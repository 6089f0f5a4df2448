"""Numerical methods the driver runs on small statistics: conjugate gradients,
simulated annealing, annealing schedules, on-line epochs and the held-out
search (:mod:`.optimize`); the (block) Krylov-Schur eigensolver on products
(:mod:`.eigen`, SMIC). They know no dask: their passes over the data are
functions the estimators hand them."""
