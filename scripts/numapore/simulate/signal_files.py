"""The raw-signal files of simulated reads: single- and multi-read FAST5 (MinKNOW's layouts of an
R9.4 run, written with h5py's low-level API) and BLOW5 records (through numapore.signal.slow5,
with the header attributes and aux fields slow5tools takes from such FAST5 files).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import h5py
import numpy as np

from numapore.signal.slow5 import Record
from numapore.simulate.read_model import SimConfig, SimRead

_SCALAR = h5py.h5s.create(h5py.h5s.SCALAR)
_VLEN_ASCII = h5py.string_dtype("ascii")


def _num_attr(obj: h5py.Group, name: str, value: np.generic) -> None:
    """Write a scalar numeric attribute (low-level API: ~2x faster than obj.attrs[...])."""
    arr = np.asarray(value)
    attr = h5py.h5a.create(obj.id, name.encode(), h5py.h5t.py_create(arr.dtype), _SCALAR)
    attr.write(arr)


def _str_attr(obj: h5py.Group, name: str, value: str, variable: bool) -> None:
    """Write an ASCII string attribute: variable-length, or fixed-length null-terminated."""
    data = value.encode("ascii")
    if variable:
        tid = h5py.h5t.py_create(_VLEN_ASCII, logical=True)
        arr = np.array(data, dtype=_VLEN_ASCII)
    else:
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(len(data) + 1)
        tid.set_strpad(h5py.h5t.STR_NULLTERM)
        arr = np.array(data, dtype=f"S{len(data) + 1}")
    h5py.h5a.create(obj.id, name.encode(), tid, _SCALAR).write(arr)


def _tracking(cfg: SimConfig) -> dict[str, str]:
    """Return tracking_id attributes in the style of a 2016 MinKNOW R9.4 run."""
    run_id = cfg.run_id()
    return {
        "asic_id": "0",
        "asic_temp": "30.0",
        "device_id": "MNSIM",
        "exp_script_name": "numapore/simulate",
        "exp_script_purpose": "sequencing_run",
        "exp_start_time": "1481657610",
        "flow_cell_id": "SIM000",
        "heatsink_temp": "34.0",
        "hostname": "numapore-sim",
        "protocol_run_id": str(uuid.UUID(run_id[:32])),
        "run_id": run_id,
        "version": "1.1.21",
    }


def _context() -> dict[str, str]:
    """Return context_tags attributes of a genomic DNA run at 4 kHz."""
    return {
        "experiment_kit": "genomic_dna",
        "filename": "numapore_sim",
        "sample_frequency": "4000",
        "user_filename_input": "numapore_sim",
    }


def _write_meta(
    grp: h5py.Group,
    read: SimRead,
    cfg: SimConfig,
    variable: bool,
    shared: h5py.Group | None = None,
) -> None:
    """Write channel_id, context_tags and tracking_id under grp (the last two linked to shared)."""
    ch = grp.create_group("channel_id")
    _str_attr(ch, "channel_number", str(read.channel), variable)
    _num_attr(ch, "digitisation", np.float64(read.digitisation))
    _num_attr(ch, "offset", np.float64(read.offset))
    _num_attr(ch, "range", np.float64(read.range_pa))
    _num_attr(ch, "sampling_rate", np.float64(read.sampling_rate))
    if shared is not None:
        # As MinKNOW does in multi-read files: one copy of the run's groups, hard-linked.
        grp["context_tags"] = shared["context_tags"]
        grp["tracking_id"] = shared["tracking_id"]
        return
    for name, attrs in (("context_tags", _context()), ("tracking_id", _tracking(cfg))):
        g = grp.create_group(name)
        for k, v in attrs.items():
            _str_attr(g, k, v, variable)


def _write_raw_attrs(grp: h5py.Group, read: SimRead, multi: bool) -> None:
    """Write the read attributes (duration, read_id, ...) that ONT puts on the raw read group."""
    _num_attr(grp, "duration", np.uint32(read.signal.size))
    _num_attr(grp, "median_before", np.float64(read.median_before))
    _str_attr(grp, "read_id", read.read_id, variable=False)
    # Integer widths as in real files: single-read (MinKNOW 1.x) vs multi-read (2.x).
    _num_attr(grp, "read_number", np.int32(read.index) if multi else np.uint32(read.index))
    _num_attr(grp, "start_mux", np.uint8(read.start_mux) if multi else np.int32(read.start_mux))
    _num_attr(grp, "start_time", np.uint64(read.start_time))


def single_fast5_name(read: SimRead) -> str:
    """Return the MinKNOW-style file name of a single-read FAST5."""
    return f"numapore_sim_ch{read.channel}_read{read.index}_strand.fast5"


def write_single_fast5(path: Path, read: SimRead, cfg: SimConfig) -> None:
    """Write one read as a single-read FAST5 (file_version 0.6 layout, gzip signal)."""
    with h5py.File(path, "w") as f:
        _num_attr(f, "file_version", np.float64(0.6))
        rg = f.create_group(f"Raw/Reads/Read_{read.index}")
        _write_raw_attrs(rg, read, multi=False)
        rg.create_dataset(
            "Signal",
            data=read.signal,
            compression="gzip",
            compression_opts=1,
            chunks=(min(read.signal.size, 20000),),
        )
        _write_meta(f.create_group("UniqueGlobalKey"), read, cfg, variable=True)


def write_multi_fast5(path: Path, reads: list[SimRead], cfg: SimConfig) -> None:
    """Write reads as one multi-read FAST5 (file_version 2.2: read_<id>/Raw/Signal, ...)."""
    with h5py.File(path, "w") as f:
        _str_attr(f, "file_type", "multi-read", variable=False)
        _str_attr(f, "file_version", "2.2", variable=False)
        first = None
        for read in reads:
            g = f.create_group(f"read_{read.read_id}")
            _str_attr(g, "run_id", cfg.run_id(), variable=False)
            _str_attr(g, "pore_type", "not_set", variable=False)
            raw = g.create_group("Raw")
            _write_raw_attrs(raw, read, multi=True)
            raw.create_dataset(
                "Signal",
                data=read.signal,
                compression="gzip",
                compression_opts=1,
                chunks=(max(read.signal.size, 1),),
            )
            _write_meta(g, read, cfg, variable=False, shared=first)
            if first is None:
                first = g


def slow5_record(read: SimRead) -> Record:
    """Return a read as a numapore.signal.slow5.Record with the aux fields slow5tools writes."""
    return Record(
        read_id=read.read_id,
        read_group=0,
        digitisation=read.digitisation,
        offset=read.offset,
        range=read.range_pa,
        sampling_rate=read.sampling_rate,
        signal=read.signal,
        aux={
            "start_time": read.start_time,
            "read_number": read.index,
            "start_mux": read.start_mux,
            "median_before": read.median_before,
            "channel_number": str(read.channel),
        },
    )


def read_group_attrs(cfg: SimConfig) -> dict[str, str]:
    """Return the BLOW5 read-group header attributes (as slow5tools takes them from FAST5)."""
    return {
        "file_type": "multi-read",
        "file_version": "2.2",
        "pore_type": "not_set",
        **_tracking(cfg),
        **_context(),
    }
