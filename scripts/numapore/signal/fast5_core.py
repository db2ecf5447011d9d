"""The compiled FAST5 reader: read a FAST5 file and encode its BLOW5 records in one C call.

numapore.signal._fast5_core (fast5_core.c, built by fast5_core_build.py from ./setup.sh) walks a
FAST5 file with the rules of numapore.signal.fast5.read_fast5 and, once the output's columns
and the read's run are known, returns the encoded records, so a converter worker does no Python
work per attribute. It covers the common case only and answers None for anything else (an
unusual type or layout, a bad value, an unreadable file): the caller then reads that file with
the Python reader, which gives the same records, refusals and messages. A file up to
CORE_MAX_BYTES is read whole into memory first (one sequential pass) and kept while its later
read groups are still to be read. Without the compiled module (not built) every file takes the
Python reader.

    reader = core_reader("blow5", "zlib", "svb-zd", aux_fields, read_groups)  # None: unusable
    got = reader.read(path, start, stop)  # None: use read_fast5
    got.encoded  # [(read_id, record bytes, samples)] when columns and runs are known
    got.decoded  # [Fast5Read] otherwise (the caller fixes columns and read groups)

numapore.signal.fast5.read_layout (the census) takes the compiled layout first, the same way:

    layout = core_layout()  # None: not built or switched off
    layout.read(path)  # [(read_id, has_signal)], or None: the Python path reads the file
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numapore.base import compiled
from numapore.signal.hdf5plugin import vbz_plugin_file
from numapore.signal.slow5 import AuxField, Fast5Read, Record

_core = compiled.load("numapore.signal._fast5_core")  # None: the Python reader reads every file
ffi, lib = (_core.ffi, _core.lib) if _core is not None else (None, None)

ENABLED = lib is not None  # tests switch the compiled reader off to compare both
# slow5 aux types by the C code's number (fast5_core.c: T_I8 ... T_ENUM)
TYPE_NAMES = ("int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
              "uint64_t", "float", "double", "char*", "enum")  # fmt: skip
TYPE_CODES = {name: code for code, name in enumerate(TYPE_NAMES)}
ENCODED, DECODED, FALLBACK = 0, 1, 2
MAX_FIELDS, MAX_RUNS = 64, 4096  # fast5_core.c: MAX_AUX, MAX_RUNS
RECORD_COMPRESSIONS = {"none": 0, "zlib": 1}  # zstd records: the Python encoder
# A FAST5 file up to this size is read whole into memory, in one sequential pass, rather than
# object by object (fast5_core.c: open_file): on storage where each request costs a latency,
# ~18 small requests per read become a few large ones. Memory: one such file per reader
# process at a time (K readers: K x 256 MiB at most); bigger files are read object by object.
CORE_MAX_BYTES = 256 << 20
SIGNAL_COMPRESSIONS = {"none": 0, "svb-zd": 1}


@dataclass
class CoreResult:
    """One file (slice) read by the compiled reader: encoded records or decoded reads."""

    groups: int
    encoded: list[tuple[str, bytes, int]] = field(default_factory=list)
    decoded: list[Fast5Read] = field(default_factory=list)


class CoreReader:
    """A compiled reader set up for one output: compressions, columns and read groups."""

    def __init__(
        self,
        record_compression: str,
        signal_compression: str,
        aux_fields: Sequence[AuxField] | None,
        read_groups: Mapping[str, int],
    ) -> None:
        """Hand the output's settings to a new C context."""
        _register_vbz()
        ctx = lib.np5_new(
            RECORD_COMPRESSIONS[record_compression], SIGNAL_COMPRESSIONS[signal_compression]
        )
        if ctx == ffi.NULL:
            raise MemoryError("numapore: cannot set up the compiled FAST5 reader")
        self.ctx = ffi.gc(ctx, lib.np5_free)
        lib.np5_set_core_max(self.ctx, CORE_MAX_BYTES)
        if aux_fields is not None:
            lib.np5_set_schema_known(self.ctx)
            for aux in aux_fields:
                labels = "\n".join(aux.labels).encode() if aux.type == "enum" else ffi.NULL
                lib.np5_add_field(self.ctx, aux.name.encode(), TYPE_CODES[aux.type], labels)
        for run_id, group in read_groups.items():
            lib.np5_add_run(self.ctx, run_id.encode(), group)
        self.reason = ""  # why the last file was left to the Python reader

    def read(self, path: str, start: int = 0, stop: int | None = None) -> CoreResult | None:
        """Read a FAST5 file (read groups [start, stop)); None: read it with read_fast5."""
        ctx = self.ctx
        status = lib.np5_read_file(ctx, os.fsencode(path), start, -1 if stop is None else stop)
        if status == FALLBACK:
            self.reason = ffi.string(ctx.reason).decode(errors="replace")
            return None
        reads = ctx.reads
        if status == ENCODED:
            out = ffi.buffer(ctx.out, ctx.out_len)
            encoded = []
            for i in range(ctx.nreads):
                r = reads[i]
                start_at = r.blob_offset
                blob = out[start_at : start_at + r.blob_size]
                encoded.append((ffi.string(r.read_id).decode(), blob, r.nsamples))
            return CoreResult(ctx.groups, encoded=encoded)
        return CoreResult(ctx.groups, decoded=[_decoded(reads[i]) for i in range(ctx.nreads)])


def _decoded(r: Any) -> Fast5Read:
    """A Fast5Read from the C reader's decoded read (what read_fast5 gives for it)."""
    fields, values = [], {}
    for k in range(r.naux):
        a = r.aux[k]
        name = ffi.string(a.name).decode()
        labels = tuple(ffi.string(a.labels).decode().split("\n")) if a.labels else ()
        fields.append(AuxField(name, TYPE_NAMES[a.type], labels))
        values[name] = _value(a)
    header = {
        ffi.string(r.header_names[k]).decode(): ffi.string(r.header_values[k]).decode()
        for k in range(r.nheader)
    }
    signal = np.frombuffer(ffi.buffer(r.signal, 2 * r.nsamples), dtype="<i2").copy()
    record = Record(
        read_id=ffi.string(r.read_id).decode(),
        read_group=-1,
        digitisation=r.digitisation,
        offset=r.offset,
        range=r.range,
        sampling_rate=r.sampling_rate,
        signal=signal,
        aux=values,
    )
    return Fast5Read(record, header["run_id"], header, fields)


def _value(a: Any) -> Any:
    """The Python value of a decoded aux value (fast5_core.c: V_NONE ... V_STR)."""
    return (None, a.i, a.u, a.d, ffi.string(a.s).decode() if a.s else "")[a.kind]


_READER: tuple[tuple, CoreReader] | None = None


def core_reader(
    fmt: str,
    record_compression: str,
    signal_compression: str,
    aux_fields: Sequence[AuxField] | None,
    read_groups: Mapping[str, int],
) -> CoreReader | None:
    """The compiled reader for these output settings (kept while they stay the same), or None
    when it cannot produce them: not built, SLOW5 text, zstd records, columns it cannot hold."""
    global _READER
    if not ENABLED or fmt != "blow5" or record_compression not in RECORD_COMPRESSIONS:
        return None
    key = (record_compression, signal_compression, aux_fields, tuple(read_groups.items()))
    if _READER is not None and _READER[0] == key:
        return _READER[1]
    if len(read_groups) > MAX_RUNS or (aux_fields is not None and not _holds(aux_fields)):
        return None
    reader = CoreReader(record_compression, signal_compression, aux_fields, read_groups)
    _READER = (key, reader)
    return reader


def _holds(aux_fields: Sequence[AuxField]) -> bool:
    """Whether the C context can hold these columns (enum labels are passed joined by '\\n')."""
    return len(aux_fields) <= MAX_FIELDS and all(
        aux.type in TYPE_CODES and not any("\n" in label for label in aux.labels)
        for aux in aux_fields
    )


class CoreLayout:
    """The compiled read_layout: the reads of a FAST5 file from its layout alone."""

    def __init__(self) -> None:
        """A C context for layouts (no output settings)."""
        ctx = lib.np5_new(0, 0)
        if ctx == ffi.NULL:
            raise MemoryError("numapore: cannot set up the compiled FAST5 reader")
        self.ctx = ffi.gc(ctx, lib.np5_free)
        self.reason = ""  # why the last file was left to the Python reader

    def read(self, path: str) -> list[tuple[str, bool]] | None:
        """(read id, has a non-empty Signal) of each read; None: read it with the Python path."""
        ctx = self.ctx
        if lib.np5_layout(ctx, os.fsencode(path)) == FALLBACK:
            self.reason = ffi.string(ctx.reason).decode(errors="replace")
            return None
        reads, string = ctx.layout, ffi.string
        return [(string(reads[i].read_id).decode(), bool(reads[i].has_signal))
                for i in range(ctx.nlayout)]  # fmt: skip


_LAYOUT: CoreLayout | None = None


def core_layout() -> CoreLayout | None:
    """The compiled layout reader (one per process), or None when not built or switched off."""
    global _LAYOUT
    if not ENABLED:
        return None
    if _LAYOUT is None:
        _LAYOUT = CoreLayout()
    return _LAYOUT


_VBZ_TRIED = False


def _register_vbz() -> None:
    """Give the compiled reader's HDF5 (Debian's) the VBZ filter, once per process: the plugin
    in the user's HDF5_PLUGIN_PATH, else a conda or Debian install (numapore.signal.hdf5plugin).
    Without one, VBZ files are left to the Python reader (which names the missing plugin)."""
    global _VBZ_TRIED
    if _VBZ_TRIED:
        return
    _VBZ_TRIED = True
    library = vbz_plugin_file(os.environ)
    if library is not None:
        lib.np5_register_filter(os.fsencode(library))
