"""SLOW5 text / BLOW5 binary writing: header and record model, encoders, index, atomic writer.

The byte layout follows slow5lib (SLOW5 format v0.2.0) so that output is byte-identical to
``slow5tools f2s``: SLOW5 text for every input, and BLOW5 for record compression zlib/none and
signal compression svb-zd/none (zstd records are valid BLOW5, read back with pyslow5).

Writing BLOW5 from in-memory records (e.g. a signal simulator)::

    from numapore.signal.slow5 import Record, FAST5_AUX_FIELDS, write_slow5

    records = [
        Record(read_id="read-1", read_group=0, digitisation=8192.0, offset=6.0, range=1444.86,
               sampling_rate=4000.0, signal=signal_int16,
               aux={"start_time": 0, "read_number": 1, "start_mux": 1,
                    "median_before": 210.5, "channel_number": "7"}),
    ]
    # zlib records, uncompressed signal (nanopolish-safe); also writes sim.blow5.idx
    write_slow5("sim.blow5", records, read_groups=[{"run_id": "sim0", "sample_frequency": "4000"}],
                aux_fields=FAST5_AUX_FIELDS)

``read_groups`` is one dict of header attributes (strings) per read group; every group should
carry a ``run_id``.  ``aux_fields`` fixes the order and types of the per-read auxiliary columns
(``AuxField(name, type)`` with a slow5 type string such as ``"uint64_t"``, ``"double"``,
``"char*"`` or ``"enum"`` plus labels); a value missing from ``Record.aux`` is written as missing.
The output format follows the suffix (``.blow5``/``.slow5``); for record-by-record writing use
``Slow5Writer`` (``add_read_group``, ``write_record``, ``close``) directly.

Why one ~650-line module: SLOW5 text and BLOW5 binary share the header and record model and
the field types; the record and signal encoders and the index follow slow5lib's one byte layout.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import numpy as np

from numapore.base import compiled
from numapore.base.atomic import temp_name

SLOW5_VERSION = (0, 2, 0)
BLOW5_MAGIC = b"BLOW5\x01"
BLOW5_EOF = b"5WOLB"
BLOW5_HEADER_SIZE_OFFSET = 64
INDEX_MAGIC = b"SLOW5IDX\x01"
INDEX_EOF = b"XDI5WOLS"
INDEX_HEADER_SIZE = 64
ZSTD_LEVEL = 1  # slow5lib's SLOW5_ZSTD_COMPRESS_LEVEL

RECORD_COMPRESSIONS = {"none": 0, "zlib": 1, "zstd": 2}
SIGNAL_COMPRESSIONS = {"none": 0, "svb-zd": 1}

PRIMARY_TYPES = "char*\tuint32_t\tdouble\tdouble\tdouble\tdouble\tuint64_t\tint16_t*"
PRIMARY_NAMES = (
    "read_id\tread_group\tdigitisation\toffset\trange\tsampling_rate\tlen_raw_signal\traw_signal"
)

# slow5 type string -> (struct code, missing-value sentinel) for fixed-size aux types.
FIXED_AUX_TYPES: dict[str, tuple[str, Any]] = {
    "int8_t": ("b", 2**7 - 1),
    "int16_t": ("h", 2**15 - 1),
    "int32_t": ("i", 2**31 - 1),
    "int64_t": ("q", 2**63 - 1),
    "uint8_t": ("B", 2**8 - 1),
    "uint16_t": ("H", 2**16 - 1),
    "uint32_t": ("I", 2**32 - 1),
    "uint64_t": ("Q", 2**64 - 1),
    "float": ("f", math.nan),
    "double": ("d", math.nan),
    "enum": ("B", 2**8 - 1),
}
STRING_TYPE = "char*"

# MinKNOW's end_reason enum as stored in FAST5 (label order = stored value).
END_REASON_LABELS = (
    "unknown",
    "partial",
    "mux_change",
    "unblock_mux_change",
    "data_service_unblock_mux_change",
    "signal_positive",
    "signal_negative",
)


@dataclass(frozen=True)
class AuxField:
    """One auxiliary (per-read) column: name, slow5 type string and enum labels."""

    name: str
    type: str
    labels: tuple[str, ...] = ()

    def type_str(self) -> str:
        """Return the column type as written in the header (enums list their labels)."""
        if self.type == "enum":
            return "enum{" + ",".join(self.labels) + "}"
        return self.type


# The aux columns slow5tools writes for a modern multi-read FAST5 (in that order).
FAST5_AUX_FIELDS = (
    AuxField("start_time", "uint64_t"),
    AuxField("read_number", "int32_t"),
    AuxField("start_mux", "uint8_t"),
    AuxField("median_before", "double"),
    AuxField("channel_number", STRING_TYPE),
)


@dataclass
class Record:
    """One SLOW5 record: primary fields, int16 raw signal and aux values by field name."""

    read_id: str
    read_group: int
    digitisation: float
    offset: float
    range: float
    sampling_rate: float
    signal: np.ndarray
    aux: dict[str, Any] = field(default_factory=dict)


@dataclass
class Fast5Read:
    """One read of a FAST5 file as a converter writes it to SLOW5: its record (read_group unset),
    run_id, header attributes and aux schema (here, beside Record, so that both FAST5 readers,
    Python and compiled, build it without importing each other)."""

    record: Record
    run_id: str
    header: dict[str, str]
    aux_fields: list[AuxField]


def name_problem(name: str) -> str | None:
    """Why SLOW5 cannot hold a header attribute or column name (tab/newline, empty), or None."""
    if not name:
        return "an empty name, which SLOW5 cannot store"
    if any(c in name for c in "\t\n\r"):
        return f"name {name!r} holds a tab or newline, which SLOW5 cannot store"
    return None


def read_id_problem(read_id: str) -> str | None:
    """Why a read id cannot be a SLOW5 record's first field, or None.

    A record line starting with '#' or '@' would be read as a header line.
    """
    if not read_id:
        return "empty read id"
    if read_id[0] in "#@":
        return f"read id {read_id!r} begins with {read_id[0]!r}, which SLOW5 reads as a header line"
    if any(c in read_id for c in "\t\n\r"):
        return f"read id {read_id!r} holds a tab or newline, which SLOW5 cannot store"
    return None


def check_header(read_groups: Sequence[dict[str, str]], aux_fields: Sequence[AuxField]) -> None:
    """Raise ValueError for a header SLOW5 cannot hold (bad names, values, enum labels)."""
    for attrs in read_groups:
        for name, value in attrs.items():
            problem = name_problem(name)
            if problem is None and any(c in (value or "") for c in "\t\n\r"):
                problem = f"value {value!r} holds a tab or newline, which SLOW5 cannot store"
            if problem:
                raise ValueError(f"header attribute {name!r}: {problem}")
    for aux in aux_fields:
        problem = name_problem(aux.name)
        bad_labels = [x for x in aux.labels if not x or any(c in x for c in ",{}\t\n\r")]
        if problem is None and bad_labels:
            problem = f"enum label {bad_labels[0]!r} cannot be stored in a SLOW5 enum"
        if problem:
            raise ValueError(f"column {aux.name!r}: {problem}")


def format_double(x: float) -> str:
    """Format like slow5lib: printf %f, then drop trailing zeros, a bare '.' and '-0'."""
    text = f"{x:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def check_compression(record_compression: str, signal_compression: str) -> None:
    """Raise ValueError for an unknown record or signal compression name."""
    if record_compression not in RECORD_COMPRESSIONS:
        names = "|".join(RECORD_COMPRESSIONS)
        raise ValueError(f"unknown record compression {record_compression!r} (use {names})")
    if signal_compression not in SIGNAL_COMPRESSIONS:
        names = "|".join(SIGNAL_COMPRESSIONS)
        raise ValueError(f"unknown signal compression {signal_compression!r} (use {names})")


def check_nanopolish_compatible(signal_compression: str) -> None:
    """Refuse BLOW5 signal compression that Debian's nanopolish 0.14.0 cannot read."""
    if signal_compression != "none":
        raise ValueError(
            f"BLOW5 signal compression {signal_compression!r} is not usable with nanopolish: "
            "Debian's nanopolish 0.14.0 segfaults on svb-zd compressed signal. Convert with "
            "signal_compression='none' (record compression zlib or zstd is fine) when the BLOW5 "
            "is meant for nanopolish."
        )


def header_text(read_groups: Sequence[dict[str, str]], aux_fields: Sequence[AuxField]) -> str:
    """Return the header attribute lines plus the two column lines (no '#slow5_version')."""
    names = sorted({k for rg in read_groups for k in rg}, key=lambda s: s.encode())
    lines = []
    for name in names:
        # An empty or absent value is written as '.', like slow5lib.
        values = [rg.get(name) or "." for rg in read_groups]
        lines.append("@" + name + "\t" + "\t".join(values) + "\n")
    types = "".join("\t" + f.type_str() for f in aux_fields)
    cols = "".join("\t" + f.name for f in aux_fields)
    lines.append("#" + PRIMARY_TYPES + types + "\n")
    lines.append("#" + PRIMARY_NAMES + cols + "\n")
    return "".join(lines)


def encode_header(
    read_groups: Sequence[dict[str, str]],
    aux_fields: Sequence[AuxField],
    fmt: str,
    record_compression: str = "none",
    signal_compression: str = "none",
) -> bytes:
    """Encode the full file header for SLOW5 text or BLOW5."""
    body = header_text(read_groups, aux_fields).encode()
    if fmt == "slow5":
        version = ".".join(map(str, SLOW5_VERSION))
        top = f"#slow5_version\t{version}\n#num_read_groups\t{len(read_groups)}\n"
        return top.encode() + body
    fixed = BLOW5_MAGIC + bytes(SLOW5_VERSION)
    fixed += struct.pack(
        "<BIB",
        RECORD_COMPRESSIONS[record_compression],
        len(read_groups),
        SIGNAL_COMPRESSIONS[signal_compression],
    )
    fixed += b"\0" * (BLOW5_HEADER_SIZE_OFFSET - len(fixed))
    return fixed + struct.pack("<I", len(body)) + body


def _aux_text(value: Any, aux: AuxField) -> str:
    """Format one aux value for SLOW5 text ('.' when missing)."""
    if value is None:
        return "."
    if aux.type == STRING_TYPE:
        return str(value) or "."
    if aux.type in ("float", "double"):
        value = float(value)
        return "." if math.isnan(value) else format_double(value)
    value = int(value)
    return "." if value == FIXED_AUX_TYPES[aux.type][1] else str(value)


def as_int16(signal: np.ndarray) -> np.ndarray:
    """Return the signal as little-endian int16; refuse values that int16 cannot hold."""
    signal = np.asarray(signal)
    if signal.dtype != np.int16 and signal.size and (signal.min() < -32768 or signal.max() > 32767):
        raise ValueError("raw signal values must fit in int16")
    return signal.astype("<i2", copy=False)


def encode_record_text(rec: Record, aux_fields: Sequence[AuxField]) -> bytes:
    """Encode one record as a SLOW5 text line."""
    signal = ",".join(map(str, as_int16(rec.signal).tolist()))
    parts = [
        rec.read_id,
        str(rec.read_group),
        format_double(rec.digitisation),
        format_double(rec.offset),
        format_double(rec.range),
        format_double(rec.sampling_rate),
        str(len(rec.signal)),
        signal,
    ]
    parts.extend(_aux_text(rec.aux.get(f.name), f) for f in aux_fields)
    return ("\t".join(parts) + "\n").encode()


_svbzd = compiled.load("numapore.signal._svbzd")  # svbzd_build.py; numpy without it
_svbzd_ffi, _svbzd_lib = (_svbzd.ffi, _svbzd.lib) if _svbzd is not None else (None, None)


def svb_zd_encode(signal: np.ndarray) -> bytes:
    """Zigzag-delta + StreamVByte encode an int16 signal exactly like slow5lib's svb-zd."""
    if _svbzd_lib is None:
        return svb_zd_encode_numpy(signal)
    samples = np.ascontiguousarray(signal, dtype="<i2")
    out = bytearray(_svbzd_lib.svbzd_bound(len(samples)))
    size = _svbzd_lib.svbzd_encode(
        _svbzd_ffi.from_buffer("int16_t[]", samples), len(samples), _svbzd_ffi.from_buffer(out)
    )
    del out[size:]
    return bytes(out)


def svb_zd_encode_numpy(signal: np.ndarray) -> bytes:
    """svb_zd_encode in numpy alone (when the compiled encoder is not built)."""
    values = signal.astype(np.int32)
    delta = np.diff(values, prepend=np.int32(0))
    zz = ((delta << 1) ^ (delta >> 31)).astype("<u4")
    nbytes = (1 + (zz > 0xFF) + (zz > 0xFFFF) + (zz > 0xFFFFFF)).astype(np.uint8)
    codes = np.zeros(-(-len(zz) // 4) * 4, dtype=np.uint8)
    codes[: len(zz)] = nbytes - 1
    codes = codes.reshape(-1, 4)
    control = codes[:, 0] | (codes[:, 1] << 2) | (codes[:, 2] << 4) | (codes[:, 3] << 6)
    data = zz.view(np.uint8).reshape(-1, 4)[np.arange(4) < nbytes[:, None]]
    return struct.pack("<I", len(zz)) + control.astype(np.uint8).tobytes() + data.tobytes()


_ZSTD: Any = None


def _zstd_compress(data: bytes) -> bytes:
    """Compress with libzstd through ctypes (Python 3.11 has no zstd module)."""
    global _ZSTD
    if _ZSTD is None:
        name = ctypes.util.find_library("zstd")
        if name is None:
            raise ValueError("zstd record compression needs libzstd (not found on this host)")
        lib = ctypes.CDLL(name)
        lib.ZSTD_compressBound.restype = ctypes.c_size_t
        lib.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
        lib.ZSTD_compress.restype = ctypes.c_size_t
        lib.ZSTD_compress.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_int,
        ]
        lib.ZSTD_isError.restype = ctypes.c_uint
        lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
        _ZSTD = lib
    out = ctypes.create_string_buffer(_ZSTD.ZSTD_compressBound(len(data)))
    n = _ZSTD.ZSTD_compress(out, len(out), data, len(data), ZSTD_LEVEL)
    if _ZSTD.ZSTD_isError(n):
        raise ValueError("zstd compression failed")
    return out.raw[:n]


def _aux_binary(value: Any, aux: AuxField) -> bytes:
    """Pack one aux value for BLOW5 (missing values use slow5lib's sentinels)."""
    if aux.type == STRING_TYPE:
        data = b"" if value is None else str(value).encode()
        return struct.pack("<Q", len(data)) + data
    code, missing = FIXED_AUX_TYPES[aux.type]
    if value is None:
        value = missing
    elif code in "fd":
        value = float(value)
    else:
        value = int(value)
    return struct.pack("<" + code, value)


def encode_record_binary(
    rec: Record,
    aux_fields: Sequence[AuxField],
    record_compression: str = "zlib",
    signal_compression: str = "none",
) -> bytes:
    """Encode one BLOW5 record, including its leading uint64 size."""
    read_id = rec.read_id.encode()
    samples = as_int16(rec.signal)
    if signal_compression == "svb-zd":
        signal = svb_zd_encode(samples)
        length = len(signal)  # slow5lib stores the compressed byte count here
    else:
        signal = samples.tobytes()
        length = len(samples)
    parts = [
        struct.pack("<H", len(read_id)),
        read_id,
        struct.pack(
            "<IddddQ",
            rec.read_group,
            rec.digitisation,
            rec.offset,
            rec.range,
            rec.sampling_rate,
            length,
        ),
        signal,
    ]
    parts.extend(_aux_binary(rec.aux.get(f.name), f) for f in aux_fields)
    raw = b"".join(parts)
    if record_compression == "zlib":
        raw = zlib.compress(raw)  # default level: what slow5lib's deflateInit produces
    elif record_compression == "zstd":
        raw = _zstd_compress(raw)
    return struct.pack("<Q", len(raw)) + raw


def encode_record(
    rec: Record,
    aux_fields: Sequence[AuxField],
    fmt: str,
    record_compression: str = "zlib",
    signal_compression: str = "none",
) -> bytes:
    """Encode one record for the given format ('slow5' or 'blow5')."""
    if fmt == "slow5":
        return encode_record_text(rec, aux_fields)
    return encode_record_binary(rec, aux_fields, record_compression, signal_compression)


def index_entry(read_id: str, offset: int, size: int) -> bytes:
    """Encode one slow5lib .idx entry: read id, record offset and size (size field included)."""
    rid = read_id.encode()
    return struct.pack("<H", len(rid)) + rid + struct.pack("<QQ", offset, size)


def iter_index_entries(entries: bytes) -> Iterator[tuple[bytes, int, int]]:
    """Decode concatenated .idx entries into (read id bytes, offset, size)."""
    pos = 0
    while pos < len(entries):
        (n,) = struct.unpack_from("<H", entries, pos)
        rid = bytes(entries[pos + 2 : pos + 2 + n])
        offset, size = struct.unpack_from("<QQ", entries, pos + 2 + n)
        yield rid, offset, size
        pos += 2 + n + 16


def encode_index(entries: bytes) -> bytes:
    """Wrap concatenated entries (see index_entry) into a slow5lib .idx file."""
    head = INDEX_MAGIC + bytes(SLOW5_VERSION)
    return head + b"\0" * (INDEX_HEADER_SIZE - len(head)) + entries + INDEX_EOF


def format_from_path(path: str | os.PathLike) -> str:
    """Return 'slow5' or 'blow5' from a file name suffix."""
    suffix = Path(path).suffix
    if suffix not in (".slow5", ".blow5"):
        raise ValueError(f"cannot tell SLOW5/BLOW5 from the suffix of {path} (.slow5 or .blow5)")
    return suffix[1:]


class Slow5Writer:
    """Write a SLOW5/BLOW5 file under a temporary name; close() renames it into place.

    The header is written when the first record arrives.  A read group added after that
    (a new run_id) makes close() rewrite the header and shift the record bytes once.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        fmt: str | None = None,
        record_compression: str = "zlib",
        signal_compression: str = "none",
        aux_fields: Sequence[AuxField] = (),
        write_index: bool = True,
    ) -> None:
        """Open the temporary output file."""
        self.path = Path(path)
        self.fmt = fmt or format_from_path(self.path)
        if self.fmt not in ("slow5", "blow5"):
            raise ValueError(f"unknown output format {self.fmt!r} (use slow5 or blow5)")
        check_compression(record_compression, signal_compression)
        self.record_compression = record_compression
        self.signal_compression = signal_compression
        self.aux_fields = list(aux_fields)
        self.write_index = write_index and self.fmt == "blow5"
        self.read_groups: list[dict[str, str]] = []
        self.index = bytearray()  # encoded .idx entries: compact for millions of reads
        self.records = 0
        self.bytes_written = 0
        self._tmp = temp_name(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self._tmp, "wb")  # noqa: SIM115 - stays open across calls
        self._header_len = -1  # header not yet written
        self._header_dirty = False
        self._index_ok = self.write_index

    def add_read_group(self, attrs: dict[str, str]) -> int:
        """Add a read group (header attributes as strings) and return its number."""
        self.read_groups.append(dict(attrs))
        if self._header_len >= 0:
            self._header_dirty = True
        return len(self.read_groups) - 1

    def set_aux_fields(self, aux_fields: Sequence[AuxField]) -> None:
        """Fix the aux columns; only allowed before the first record."""
        if self._header_len >= 0:
            raise ValueError("aux fields cannot change after records were written")
        self.aux_fields = list(aux_fields)

    def _header(self) -> bytes:
        """Encode the header for the current read groups (ValueError if SLOW5 cannot hold it)."""
        check_header(self.read_groups, self.aux_fields)
        return encode_header(
            self.read_groups,
            self.aux_fields,
            self.fmt,
            self.record_compression,
            self.signal_compression,
        )

    def write_encoded(self, read_id: str, blob: bytes) -> None:
        """Append one already encoded record (from encode_record with this writer's settings)."""
        problem = read_id_problem(read_id)
        if problem:
            raise ValueError(problem)
        if self._header_len < 0:
            if not self.read_groups:
                raise ValueError("add at least one read group before writing records")
            header = self._header()
            self._fh.write(header)
            self._header_len = self.bytes_written = len(header)
        if self.write_index:
            self.index += index_entry(read_id, self.bytes_written, len(blob))
        self._fh.write(blob)
        self.bytes_written += len(blob)
        self.records += 1

    def write_record(self, rec: Record) -> None:
        """Encode and append one record."""
        if not 0 <= rec.read_group < len(self.read_groups):
            raise ValueError(f"read {rec.read_id}: read group {rec.read_group} was not added")
        blob = encode_record(
            rec, self.aux_fields, self.fmt, self.record_compression, self.signal_compression
        )
        self.write_encoded(rec.read_id, blob)

    def _rewrite_header(self) -> None:
        """Rewrite the file with the final header (read groups added after the first record)."""
        header = self._header()
        shift = len(header) - self._header_len
        fresh = self._tmp.with_name(self._tmp.name + "h")
        with open(self._tmp, "rb") as src, open(fresh, "wb") as dst:
            dst.write(header)
            src.seek(self._header_len)
            while chunk := src.read(1 << 22):
                dst.write(chunk)
        os.replace(fresh, self._tmp)
        self.index = bytearray().join(
            struct.pack("<H", len(rid)) + rid + struct.pack("<QQ", off + shift, size)
            for rid, off, size in iter_index_entries(self.index)
        )
        self.bytes_written += shift

    def close(self) -> None:
        """Finish the file (header, EOF marker, index) and rename it to its final name."""
        if self._header_len < 0:
            if not self.read_groups:
                raise ValueError(f"{self.path}: no read group; nothing to write")
            header = self._header()
            self._fh.write(header)
            self._header_len = self.bytes_written = len(header)
        if self.fmt == "blow5":
            self._fh.write(BLOW5_EOF)
            self.bytes_written += len(BLOW5_EOF)
        self._fh.close()
        if self._header_dirty:
            self._rewrite_header()
        idx_path = Path(str(self.path) + ".idx")
        # A stale index next to a new file would point at wrong offsets: remove it first.
        idx_path.unlink(missing_ok=True)
        os.replace(self._tmp, self.path)
        # slow5lib refuses an index with a duplicated read id: then write none.
        if self.write_index:
            ids = [rid for rid, _, _ in iter_index_entries(self.index)]
            self._index_ok = len(set(ids)) == len(ids)
        if self._index_ok:
            idx_tmp = temp_name(idx_path)
            idx_tmp.write_bytes(encode_index(self.index))
            os.replace(idx_tmp, idx_path)

    def abort(self) -> None:
        """Close and delete the temporary file, leaving nothing under the final name."""
        if not self._fh.closed:
            self._fh.close()
        self._tmp.unlink(missing_ok=True)
        self._tmp.with_name(self._tmp.name + "h").unlink(missing_ok=True)

    @property
    def index_path(self) -> Path | None:
        """The .idx path when an index is (to be) written, else None."""
        if self._index_ok:
            return Path(str(self.path) + ".idx")
        return None

    def __enter__(self) -> Self:
        """Use as a context manager: close on success, abort on error."""
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        """Close on success, abort (delete the temporary file) on error."""
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_slow5(
    path: str | os.PathLike,
    records: Iterable[Record],
    read_groups: Sequence[dict[str, str]],
    aux_fields: Sequence[AuxField] = FAST5_AUX_FIELDS,
    fmt: str | None = None,
    record_compression: str = "zlib",
    signal_compression: str = "none",
    write_index: bool = True,
) -> int:
    """Write in-memory records to a SLOW5/BLOW5 file (atomically) and return the record count."""
    with Slow5Writer(
        path, fmt, record_compression, signal_compression, aux_fields, write_index
    ) as writer:
        for attrs in read_groups:
            writer.add_read_group(attrs)
        for rec in records:
            writer.write_record(rec)
    return writer.records


def blow5_problem(path: str | os.PathLike) -> str | None:
    """Why a BLOW5 file is incomplete or not BLOW5 (cut short, mid-record, ...); None if whole.

    Walks the record sizes only (8 bytes per record), never the records themselves.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        head = fh.read(BLOW5_HEADER_SIZE_OFFSET + 4)
        if not head.startswith(BLOW5_MAGIC):
            return "not a BLOW5 file (it does not start with BLOW5's magic bytes)"
        if len(head) < BLOW5_HEADER_SIZE_OFFSET + 4:
            return f"cut short inside its header ({size} bytes)"
        (text_size,) = struct.unpack("<I", head[BLOW5_HEADER_SIZE_OFFSET:])
        position, record = len(head) + text_size, 0
        if position > size:
            return f"cut short inside its header ({size} bytes; the header needs {position})"
        while True:
            fh.seek(position)
            prefix = fh.read(8)
            if prefix.startswith(BLOW5_EOF) and position + len(BLOW5_EOF) == size:
                return None
            if prefix.startswith(BLOW5_EOF):
                extra = size - position - len(BLOW5_EOF)
                return f"{extra} byte(s) after its end-of-file marker (at byte {position})"
            record += 1
            if len(prefix) < 8:
                return (
                    f"cut short after record {record - 1} at byte {size}: "
                    "no end-of-file marker (the file was not written to the end)"
                )
            (length,) = struct.unpack("<Q", prefix)
            end = position + 8 + length
            if end > size:
                return (
                    f"cut short in the middle of record {record}: it starts at byte {position} "
                    f"and needs {8 + length} bytes, the file ends at byte {size}"
                )
            position = end
