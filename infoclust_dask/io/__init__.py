"""Data in and out of stores, where a pass over the data is needed.

Writing a store (:mod:`.store`: checks, chunks written on the scheduler,
then the manifests), appending rows all or nothing (:mod:`.append`),
checking every chunk (:mod:`.verify`), ingesting files, bundled datasets and
generators (:mod:`.ingest`, :mod:`.ingest_pairs`, :mod:`.sources`,
:mod:`.readers`) and the stored cross-validation folds (:mod:`.folds`).

Built on :mod:`infoclust_dask.storage` (the layout, with no compute) and the
engine (the passes). One package rather than two (ingest apart from
write/append): ingest ends in a write or an append, and all of them share the
same checking passes and the same destination rules.
"""
