"""The dataset store on disk or in a bucket, with no compute in it.

A store is a zarr (v3) group of row-chunked arrays (:mod:`.reading` opens it
through xarray); every array carries a manifest of its chunks' sizes and
checksums and of its metadata's hash (:mod:`.manifest`), which is also its
commit: rows exist once the manifests count them (:mod:`.commits`). Chunk
reads are bound to the manifests (:mod:`.bound`); locations are local folders
or fsspec URLs, resolved and checked where the user typed them
(:mod:`.location`, :mod:`.paths`); writes are atomic (:mod:`.atomic`) and run
folders take a lock on shared disks (:mod:`.runlock`).

This package imports nothing of the engine, the estimators or the ingest
side: what needs a pass over the data (checking values, writing and
appending through the scheduler, ``verify``'s whole reads) lives in
:mod:`infoclust_dask.io`, which builds on it. ``tests/test_layers.py`` checks
both directions.
"""
