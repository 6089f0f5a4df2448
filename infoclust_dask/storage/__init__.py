"""The dataset store on disk or in a bucket, with no compute in it.

A store is a zarr (v3) group of row-chunked arrays (:mod:`.reading` opens it
through xarray); every array carries a manifest of its chunks' sizes and
checksums and of its metadata's hash (:mod:`.manifest`), which is also its
commit: rows exist once the manifests count them (:mod:`.commits`). Chunk
reads are bound to the manifests (:mod:`.bound`); locations are local folders
or fsspec URLs, resolved and checked where the user typed them
(:mod:`.location`, :mod:`.paths`); writes are atomic (:mod:`.atomic`) and run
folders take a lock on shared disks (:mod:`.runlock`).

Its public face - what ``io/``, ``runs.py`` and the CLI use (no
underscore name crosses into another package; ``tests/test_layers.py``):

- open: :func:`.reading.open_dataset` (and :func:`.reading.forget_opened`),
  :func:`.location.resolve` / :class:`.location.Location`;
- write atomically: :func:`.atomic.temp_name`, :func:`.atomic.atomic_write_text`,
  :func:`.atomic.temporary_writer`, :func:`.atomic.remove_tree`,
  :func:`.atomic.clean_stale_temporaries`, :func:`.atomic.disk_error` /
  :func:`.atomic.file_error` (a system error as the user's message);
- lock: :class:`.atomic.WriteLock` (one writer per store), :mod:`.runlock`
  (run folders);
- commit and check: :func:`.manifest.write_manifest` (the commit),
  :func:`.manifest.write_pending`, :func:`.manifest.read_manifests`,
  :func:`.manifest.check_chunks`, :func:`.manifest.check_metadata`,
  :func:`.manifest.check_group`, :func:`.manifest.stamp_group`,
  :func:`.commits.committed_rows`, :func:`.commits.row_chunk`;
- paths: :mod:`.paths` (URLs refused or redacted, local paths).

This package imports nothing of the engine, the estimators or the ingest
side: what needs a pass over the data (checking values, writing and
appending through the scheduler, ``verify``'s whole reads) lives in
:mod:`infoclust_dask.io`, which builds on it. ``tests/test_layers.py`` checks
both directions.
"""
