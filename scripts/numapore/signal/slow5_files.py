"""SLOW5/BLOW5 files: the atomic writer (header, records, end-of-file marker, slow5lib index)
and the check that a BLOW5 is whole; the format itself is numapore.signal.slow5's.

Writing BLOW5 from in-memory records (e.g. a signal simulator)::

    from numapore.signal.slow5 import Record, FAST5_AUX_FIELDS
    from numapore.signal.slow5_files import write_slow5

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
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Self

from numapore.base.atomic import temp_name
from numapore.signal.slow5 import (
    BLOW5_EOF,
    BLOW5_HEADER_SIZE_OFFSET,
    BLOW5_MAGIC,
    FAST5_AUX_FIELDS,
    AuxField,
    Record,
    check_compression,
    check_header,
    encode_header,
    encode_index,
    encode_record,
    index_entry,
    iter_index_entries,
    read_id_problem,
)


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
