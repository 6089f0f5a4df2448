"""Streaming readers for :mod:`infoclust_dask.io.ingest`: CSV, parquet and
``.npy`` files read a block of rows at a time, never whole.

- CSV: the header is sniffed from the first two non-empty lines (Python's
  ``csv`` module), then pandas' C parser reads blocks of rows
  (``read_csv(chunksize=...)``, about 10x faster than a Python loop).
- parquet: pyarrow's ``ParquetFile.iter_batches`` (the ``[parquet]`` extra).
- ``.npy``: blocks of rows read with ``numpy.fromfile`` at their offset, so
  no page of the file stays mapped in this process.

Each reader yields :class:`Block` s: the block's first row, the numeric
features as float64, and the label columns as strings (encoded to integer
codes across blocks by :class:`LabelEncoder`, the class names sorted as
``numpy.unique`` sorts them).
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._support import sizes as _sizes

#: strings read as missing numbers in CSV feature columns (then NaN or inf: --drop-nonfinite)
NA_STRINGS = ["", "nan", "NaN", "NAN", "NA", "N/A", "null", "NULL", "None"]


class IngestError(ValueError):
    """The source cannot be turned into a dataset store."""


@dataclass
class Block:
    start: int  # first row (0-based, among data rows)
    x: np.ndarray  # (rows, features) float64, or the file's dtype for .npy
    labels: dict = field(default_factory=dict)  # column index -> array of str


@dataclass
class Table:
    """What a reader found before the first block: column layout and names."""

    width: int
    header: list | None
    label_index: list  # column indices of the label columns, in the order asked
    blocks: object  # iterator of Block
    n_rows: int | None = None  # known up front for parquet and .npy
    feature_index: list = field(default_factory=list)  # column indices of the features, in their order

    @property
    def feature_names(self) -> list | None:
        if self.header is None:
            return None
        return [self.header[j] for j in self.feature_index]


def block_rows(width: int, itemsize: int = 8) -> int:
    """Rows per streamed block (:func:`infoclust_dask._support.sizes.read_rows`; 16 MiB
    keeps ``infoclust ingest`` of a 2 GB CSV near 400 MB, 32 MiB 490 MB at the
    same speed: ``benchmarks/ingest_rss.py``)."""
    return _sizes.read_rows(width, itemsize)


def is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def label_indices(header: list | None, label_columns: Any, width: int) -> list[int]:
    """Column indices of the label columns, in the order given; each once."""
    out = []
    for c in label_columns:
        i = _label_index(header, c, width)
        if i in out:
            raise IngestError(f"--label-column {c!r} names column {i} a second time.")
        out.append(i)
    return out


def _label_index(header, label_column, width, flag="--label-column"):
    if isinstance(label_column, int) or str(label_column).lstrip("-").isdigit():
        i = int(label_column)
        i = i % width if i < 0 else i
        if not 0 <= i < width:
            raise IngestError(f"{flag} {label_column} is out of range for {width} columns (0-based).")
        return i
    if header is None:
        raise IngestError(f"{flag} {label_column!r} names a column but the file has no header; give its "
                          "0-based index.")
    if label_column not in header:
        raise IngestError(f"{flag}: no column named {label_column!r}; the header has {header}.")
    return header.index(label_column)


@dataclass(frozen=True)
class Columns:
    """Which columns of a CSV/parquet table are features (``--columns`` /
    ``--drop-columns``): ``keep`` the features by name or 0-based index
    (empty: every column that is not a label column), ``drop`` columns left
    out (e.g. a text column of ids)."""

    keep: tuple = ()
    drop: tuple = ()

    def features(self, header: list | None, width: int, label_index: list) -> list[int]:
        drop = {_label_index(header, c, width, "--drop-columns") for c in self.drop}
        if self.keep:
            keep = [_label_index(header, c, width, "--columns") for c in self.keep]
            both = [c for c, i in zip(self.keep, keep, strict=True) if i in label_index or i in drop]
            if both:
                raise IngestError(f"--columns {both} names a label column or a dropped column; a column is a "
                                  "feature, a label (--label-column) or dropped (--drop-columns), not two.")
            out = list(dict.fromkeys(keep))
        else:
            out = [j for j in range(width) if j not in label_index and j not in drop]
        if not out:
            raise IngestError(f"No feature columns are left (of {width}: labels {label_index}, dropped "
                              f"{sorted(drop)}); keep at least one with --columns.")
        return out


#: every column that is not a label column is a feature (no --columns / --drop-columns)
ALL_COLUMNS = Columns()


def _decode_error(path, encoding, exc, where=""):
    return IngestError(
        f"'{path}' is not {encoding} text: byte {exc.object[exc.start:exc.start + 1]!r} at offset {exc.start}"
        f"{where} cannot be decoded. Give the file's encoding (CLI: --encoding latin-1, Python: "
        "encoding='latin-1').")


# --------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------
def first_ragged_line(path: Any, width: int, encoding: str = "utf-8") -> tuple[int, int] | None:
    """``(line number, field count)`` of the first non-empty line of the CSV
    ``path`` whose field count is not ``width``, or None (one streaming
    pass; used to explain missing values that a short row produced)."""
    with Path(path).open(newline="", encoding=_text_encoding(encoding)) as fh:
        reader = csv.reader(fh)
        for r in reader:
            if r and any(v.strip() for v in r) and len(r) != width:
                return reader.line_num, len(r)
    return None


def _text_encoding(encoding: str) -> str:
    """UTF-8 read as ``utf-8-sig``: a byte-order mark (Excel writes one) is
    not part of the first header name."""
    return "utf-8-sig" if str(encoding).lower().replace("_", "-") in ("utf-8", "utf8") else encoding


def _sniff_csv(path: Path, encoding: str):
    """The first two non-empty rows, with their physical line numbers."""
    rows = []
    try:
        with path.open(newline="", encoding=_text_encoding(encoding)) as fh:
            reader = csv.reader(fh)
            for r in reader:
                if r and any(v.strip() for v in r):
                    rows.append((reader.line_num, [v.strip() for v in r]))
                    if len(rows) == 2:
                        break
    except UnicodeDecodeError as exc:
        raise _decode_error(path, encoding, exc) from None
    except LookupError:
        raise IngestError(f"Unknown text encoding {encoding!r}; use e.g. utf-8 or latin-1.") from None
    except csv.Error as exc:  # e.g. a field larger than the csv module's limit (128 KB)
        where = f"line {reader.line_num}" if "reader" in locals() else "the first lines"
        raise IngestError(f"'{path}' is not a CSV file this reader can take: {exc} at {where}. Is it the right "
                          "file, with one row per line?") from None
    return rows


def read_csv(path: Any, label_columns: Any = (), encoding: str = "utf-8", rows: int | None = None,
             columns: Columns = ALL_COLUMNS) -> Table:
    """Open a CSV file for reading in blocks: numeric feature columns (all
    but the label columns, or those ``columns`` chooses), an optional header
    (taken when the first row is not all numbers, or names a label column or
    a chosen column), label columns by index or header name."""
    import pandas as pd

    path = Path(path)
    first = _sniff_csv(path, encoding)
    if not first:
        raise IngestError(f"'{path}' has no data rows.")
    line0, row0 = first[0]
    n0 = sum(is_number(v) for v in row0)
    n1 = sum(is_number(v) for v in first[1][1]) if len(first) > 1 else len(row0)
    named = any(isinstance(c, str) and not c.lstrip("-").isdigit() and c in row0
                for c in (*label_columns, *columns.keep, *columns.drop))
    header = row0 if (n0 == 0 or n0 < n1 or named) else None
    if header is not None and len(first) < 2:
        raise IngestError(f"'{path}' has a header but no data rows.")
    if header is not None and len(set(header)) < len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise IngestError(f"'{path}': the header names the columns {dup} more than once; give every column its "
                          "own name.")
    width = len(row0)
    if len(first) > 1 and row0[-1] == "" and first[1][1][-1:] == [""]:
        raise IngestError(f"'{path}': line {line0} and line {first[1][0]} end with an empty field (a trailing "
                          f"comma: {width} fields where the last is empty). Remove the trailing commas.")
    if len(first) > 1 and len(first[1][1]) != width:
        raise IngestError(f"'{path}' line {first[1][0]} has {len(first[1][1])} fields, expected {width}: the file "
                          "is ragged. Fix or remove that line.")
    li = label_indices(header, list(label_columns), width)
    skip = line0 if header is not None else line0 - 1  # physical lines before the first data row
    rows = rows or block_rows(width)
    numeric = columns.features(header, width, li)
    try:
        reader = pd.read_csv(
            path, header=None, skiprows=skip, chunksize=rows,
            encoding=_text_encoding(encoding), skip_blank_lines=True, skipinitialspace=True, dtype={i: str for i in li},
            keep_default_na=False, na_values={j: NA_STRINGS for j in numeric}, engine="c", **_exact_floats(pd))
    except LookupError:
        raise IngestError(f"Unknown text encoding {encoding!r}; use e.g. utf-8 or latin-1.") from None
    return Table(width, header, li, _csv_blocks(path, reader, header, li, numeric, skip, encoding),
                 feature_index=numeric)


def _exact_floats(pd):
    """pandas < 3 parses floats with a fast approximate routine by default
    (off by an ulp, e.g. 4e-16 relative); pandas 3 is exact and deprecates the
    option."""
    return {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


def _csv_blocks(path, reader, header, li, numeric, skip, encoding):
    it = iter(reader)
    try:
        yield from _csv_chunks(path, it, header, li, numeric, skip, encoding)
    finally:
        reader.close()


def _csv_chunks(path, it, header, li, numeric, skip, encoding):
    import pandas as pd

    start = 0
    while True:
        try:
            chunk = next(it)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise _decode_error(path, encoding, exc, f" (in the block after data row {start})") from None
        except pd.errors.ParserError as exc:
            m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
            if m:
                raise IngestError(f"'{path}' line {int(m.group(2))} has {m.group(3)} fields, expected "
                                  f"{m.group(1)}: the file is ragged. Fix or remove that line.") from None
            raise IngestError(f"'{path}' cannot be parsed as CSV: {exc}") from None
        for j in numeric:
            col = chunk[j]
            if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
                continue
            conv = pd.to_numeric(col, errors="coerce")
            bad = np.flatnonzero((conv.isna() & col.notna()).to_numpy())
            if bad.size == 0:
                chunk[j] = conv
                continue
            r = int(bad[0])
            name = f" ({header[j]!r})" if header is not None else ""
            raise IngestError(
                f"'{path}' line {skip + start + r + 1}, column {j + 1}{name}: {col.iloc[r]!r} is not a number. "
                f"Leave the column out with --drop-columns {header[j] if header is not None else j} (or choose the "
                "features with --columns), or name it as the class column with --label-column.")
        x = chunk[numeric].to_numpy(dtype=np.float64, na_value=np.nan)
        labels = {i: chunk[i].fillna("").astype(str).str.strip().to_numpy(dtype=str) for i in li}
        for i, values in labels.items():
            empty = np.flatnonzero(values == "")
            if empty.size:
                name = f" ({header[i]!r})" if header is not None else ""
                raise IngestError(
                    f"'{path}' line {skip + start + int(empty[0]) + 1}, column {i + 1}{name}: the class label is "
                    f"empty ({empty.size} such row(s) in this block). Fill in the labels or remove those rows.")
        yield Block(start, x, labels)
        start += len(chunk)


# --------------------------------------------------------------------------
# parquet
# --------------------------------------------------------------------------
def read_parquet(path: Any, label_columns: Any = (), rows: int | None = None, columns: Columns = ALL_COLUMNS) -> Table:
    """Open a parquet file for reading in record batches (pyarrow)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise IngestError(f"Reading '{path}' needs pyarrow: pip install 'infoclust_dask[parquet]' ({exc}).") \
            from None
    import pyarrow as pa

    path = Path(path)
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise IngestError(f"'{path}' cannot be read as parquet: {exc}") from None
    n = pf.metadata.num_rows
    if n == 0:
        raise IngestError(f"'{path}' has no rows.")
    schema = pf.schema_arrow
    cols = [str(c) for c in schema.names]
    li = label_indices(cols, list(label_columns), len(cols))
    numeric = columns.features(cols, len(cols), li)
    for j, f in enumerate(schema):
        if j not in numeric:
            continue
        t = f.type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
            sample = pf.read_row_group(0, columns=[f.name]).column(0).slice(0, 1).to_pylist()
            raise IngestError(
                f"'{path}' column {f.name!r} has dtype {t} (e.g. row 0: {sample[0] if sample else None!r}), "
                f"not numbers. Leave it out with --drop-columns {f.name} (or choose the features with --columns), "
                "or name it as the class column with --label-column.")
    rows = rows or block_rows(len(cols))
    return Table(len(cols), cols, li, _parquet_blocks(pf, cols, li, [cols[j] for j in numeric], rows), n_rows=n,
                 feature_index=numeric)


def _parquet_blocks(pf, cols, li, numeric, rows):
    start = 0
    for batch in pf.iter_batches(batch_size=rows):
        df = batch.to_pandas()
        df.columns = cols
        x = df[numeric].to_numpy(dtype=np.float64, na_value=np.nan)
        labels = {i: df.iloc[:, i].astype(str).to_numpy(dtype=str) for i in li}
        yield Block(start, x, labels)
        start += len(df)


# --------------------------------------------------------------------------
# .npy
# --------------------------------------------------------------------------
class NpyRows:
    """Rows ``a:b`` of a C-ordered ``.npy`` file, read with ``numpy.fromfile``
    at their offset (for :func:`infoclust_dask.engine.generate`)."""

    def __init__(self, path: Any, dtype: Any, shape: Any, offset: int) -> None:
        self.path, self.dtype, self.shape, self.offset = str(path), np.dtype(dtype), tuple(shape), int(offset)
        st = Path(path).stat()
        self.token = (self.path, st.st_size, st.st_mtime_ns)

    def __dask_tokenize__(self):
        return self.token

    def __call__(self, a, b):
        width = int(np.prod(self.shape[1:], dtype=np.int64))
        out = np.fromfile(self.path, dtype=self.dtype, count=(b - a) * width,
                          offset=self.offset + a * width * self.dtype.itemsize)
        return (out.reshape((b - a,) + self.shape[1:]),)


def npy_header(path: Any) -> tuple:
    """``(shape, dtype, fortran_order, data offset)`` of a ``.npy`` file."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:  # 3.0 is written only for structured dtypes with non-latin-1 field names
            raise IngestError(f"'{path}' is a .npy file of format {version}, which holds a structured dtype; "
                              "store a plain numeric (n, d) array.")
        offset = fh.tell()
    need = offset + int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
    size = os.path.getsize(path)
    if need != size:  # a damaged or edited header: reading would run on (or stop) without a word
        raise IngestError(f"'{path}': its header says shape {shape} of {dtype} ({need} bytes with the header) but "
                          f"the file has {size} bytes; the file is truncated or its header was edited.")
    return shape, dtype, fortran, offset


# --------------------------------------------------------------------------
# labels across blocks
# --------------------------------------------------------------------------
class LabelEncoder:
    """Strings -> integer codes, block by block, 4 bytes per row kept (not
    the strings): in memory, or appended to ``sink`` (a 1-D int32 zarr
    array) so that memory does not grow with the rows. :meth:`finish`
    renumbers the classes in sorted order (lazily for a sink)."""

    def __init__(self, sink: Any = None) -> None:
        self.index: dict = {}
        self.parts: list = []
        self.sink = sink

    def add(self, values: Any) -> Any:
        uniq, inv = np.unique(np.asarray(values, dtype=str), return_inverse=True)
        m = np.array([self.index.setdefault(s, len(self.index)) for s in uniq.tolist()], dtype=np.int32)
        codes = m[inv.ravel()] if m.size else np.zeros(0, np.int32)
        if self.sink is not None:
            self.sink.append(codes)
        else:
            self.parts.append(codes)

    def finish(self) -> Any:
        names = sorted(self.index)
        remap = np.empty(len(names), dtype=np.int64)
        for new, name in enumerate(names):
            remap[self.index[name]] = new
        if self.sink is not None:
            import dask.array as da

            return da.from_zarr(self.sink).map_blocks(_renumber, remap, dtype=np.int64), names
        codes = remap[np.concatenate(self.parts)] if self.parts else np.zeros(0, np.int64)
        return codes, names


def _renumber(block, remap):
    return remap[block]
