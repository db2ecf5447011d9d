"""SLOW5 text / BLOW5 binary format: the header and record model, their encoders, the index.

The byte layout follows slow5lib (SLOW5 format v0.2.0) so that output is byte-identical to
``slow5tools f2s``: SLOW5 text for every input, and BLOW5 for record compression zlib/none and
signal compression svb-zd/none (zstd records are valid BLOW5, read back with pyslow5). The files
themselves (the atomic writer, the completeness check) are numapore.signal.slow5_files'.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numapore.base import compiled

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
