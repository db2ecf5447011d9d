"""Read single-read and multi-read FAST5 files into SLOW5 records, the way slow5tools f2s does.

Traversal mirrors slow5tools: groups in name order (Analyses and PreviousReadInfo skipped),
attributes in HDF5 native order (which fixes the aux column order), attributes of the root,
``context_tags`` and ``tracking_id`` groups plus ``run_id``/``pore_type`` become header
attributes (non-strings converted like slow5tools: floats with one decimal), and the known
per-read attributes get slow5tools' fixed aux types.  Unlike slow5tools (which stops on them
unless ``--dump-all``), other per-read attributes are kept as aux columns of their own type, and
``end_reason`` is an enum whatever its stored type (HDF5 enum, integer or string).  What SLOW5
cannot hold is refused with the reason, never dropped: a tab or newline in a name or value, a
read id beginning with '#' or '@', an attribute given twice with different values, an empty
signal, an attribute type SLOW5 has no column type for.

VBZ-compressed signal is read through the ``vbz_h5py_plugin`` package when installed, else via
an ``HDF5_PLUGIN_PATH`` that holds the vbz filter.

Why one ~500-line module: the traversal and the attribute routing mirror slow5tools' f2s
rules as one set of cases (file versions 0.6-2.3, single/multi-read, end_reason types); kept
together they are checked as one against slow5tools' own test inputs (tests/test_convert.py).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from numapore.signal.fast5_core import core_layout
from numapore.signal.slow5 import (
    STRING_TYPE,
    AuxField,
    Fast5Read,
    Record,
    name_problem,
    read_id_problem,
)

try:  # registers the vbz filter directory with h5py (wheel ships a Linux x86_64 build)
    import vbz_h5py_plugin  # noqa: F401
except ImportError:  # fall back on HDF5_PLUGIN_PATH set by the caller
    pass

VBZ_FILTER_ID = 32020
SKIPPED_GROUPS = {"Analyses", "PreviousReadInfo"}
HEADER_GROUPS = {"", "context_tags", "tracking_id"}
PRIMARY_FLOATS = ("digitisation", "offset", "range", "sampling_rate")
# Per-read attributes with the types slow5tools gives them (values are converted to these).
KNOWN_AUX_TYPES = {
    "start_time": "uint64_t",
    "read_number": "int32_t",
    "start_mux": "uint8_t",
    "median_before": "double",
    "channel_number": STRING_TYPE,
}
# end_reason labels for an end_reason stored as a plain integer or a string (not an HDF5 enum):
# such files predate MinKNOW's data_service_unblock_mux_change label, and slow5tools' suite
# stores one read both ways (4 = signal_positive), which fixes this order.
PLAIN_END_REASON_LABELS = (
    "unknown",
    "partial",
    "mux_change",
    "unblock_mux_change",
    "signal_positive",
    "signal_negative",
)
NUMPY_TO_SLOW5 = {
    "i1": "int8_t",
    "i2": "int16_t",
    "i4": "int32_t",
    "i8": "int64_t",
    "u1": "uint8_t",
    "u2": "uint16_t",
    "u4": "uint32_t",
    "u8": "uint64_t",
    "f4": "float",
    "f8": "double",
}


class Fast5Error(Exception):
    """A FAST5 file that cannot be converted; str() names the file and the reason."""

    def __init__(self, path: str | os.PathLike, reason: str) -> None:
        """Keep the path and the reason separately (for the rejected-files TSV)."""
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


@dataclass
class Fast5Contents:
    """Convertible reads of one file (or a slice of its read groups) plus rejected reads.

    ``rejected`` holds (read id or '.', reason); ``groups`` is the number of read groups in a
    multi-read file (1 for a single-read file), so callers can convert big files in slices.
    """

    path: str
    reads: list[Fast5Read] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    groups: int = 1


def list_fast5(inputs: Iterable[str | os.PathLike]) -> list[Path]:
    """Expand folders to their FAST5 files (recursive, sorted by path; the extension in any
    case); keep files as given; each file once, however often it is reached.

    slow5tools lists a folder in readdir() order, which depends on the file system; sorted
    order is reproducible and is the order the slow5tools expected outputs in ../shared show.
    """
    files: list[Path] = []
    for item in map(Path, inputs):
        if item.is_dir():
            found = [p for p in item.rglob("*") if p.suffix.lower() == ".fast5" and p.is_file()]
            files.extend(sorted(found, key=lambda p: str(p).encode()))
        else:
            files.append(item)
    seen: set[str] = set()
    unique = []
    for f in files:
        real = os.path.realpath(f)  # once per file: a path walk (lstat per part)
        if real not in seen:
            seen.add(real)
            unique.append(f)
    return unique


def _text(value: Any) -> str:
    """Decode a string attribute value (tabs/newlines would break SLOW5 columns: refused)."""
    if isinstance(value, np.ndarray):
        text = ",".join(_text(v) for v in value.reshape(-1))
    elif isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
    else:
        text = str(value)
    if "\t" in text or "\n" in text or "\r" in text:
        raise ValueError(f"value {text!r} has a tab or newline, which SLOW5 cannot store")
    return text


def _header_value(value: Any, enum: bool) -> str:
    """Convert a header attribute to text like slow5tools (floats keep one decimal)."""
    if isinstance(value, (bytes, str, np.bytes_, np.str_)):
        return _text(value)
    if isinstance(value, (float, np.floating)):
        return f"{value:.1f}"
    if isinstance(value, (int, np.integer)) or enum:
        return str(int(value))
    return _text(value)


def _natural_type(dtype: np.dtype) -> AuxField | None:
    """Return the slow5 aux type for an attribute dtype (labels for enums), or None."""
    labels = h5py.check_enum_dtype(dtype)
    if labels is not None:
        ordered = sorted(labels.items(), key=lambda kv: kv[1])
        return AuxField("", "enum", tuple(name for name, _ in ordered))
    if dtype.kind in "SUO":
        return AuxField("", STRING_TYPE)
    slow5_type = NUMPY_TO_SLOW5.get(dtype.str[1:])
    return AuxField("", slow5_type) if slow5_type else None


def _convert(value: Any, slow5_type: str) -> Any:
    """Convert an attribute value to the Python value of a slow5 type."""
    if slow5_type == STRING_TYPE:
        return _text(value) if isinstance(value, (bytes, str, np.ndarray)) else str(value)
    if isinstance(value, (bytes, str)):
        value = _text(value)
    if slow5_type in ("float", "double"):
        return float(value)
    return int(value)


def _plain_end_reason(value: Any) -> tuple[AuxField, int]:
    """An end_reason stored as an integer or a string, as an enum column and label position."""
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(-1)[0]
    labels = PLAIN_END_REASON_LABELS
    if isinstance(value, (bytes, str, np.bytes_, np.str_)):
        label = _text(value)
        if label not in labels:
            labels = labels + (label,)
        return AuxField("end_reason", "enum", labels), labels.index(label)
    number = int(value)
    if not 0 <= number < len(labels):
        raise ValueError(f"integer end_reason {number} has no known label")
    return AuxField("end_reason", "enum", labels), number


def _attributes(obj: h5py.HLObject) -> list[tuple[str, Any, np.dtype]]:
    """Return (name, value, dtype) of an object's attributes in HDF5 native order."""
    names: list[bytes] = []
    # Native order is what slow5tools' H5Aiterate2 sees; it fixes the aux column order.
    h5py.h5a.iterate(obj.id, names.append, index_type=h5py.h5.INDEX_NAME, order=h5py.h5.ITER_NATIVE)
    out = []
    for raw in names:
        value, dtype = _read_attribute(obj.id, raw)
        if value is not None:
            out.append((raw.decode(), value, dtype))
    return out


def _read_attribute(oid: Any, raw_name: bytes) -> tuple[Any, np.dtype]:
    """Read one attribute with the low-level API (faster than .attrs[]); None if empty."""
    aid = h5py.h5a.open(oid, raw_name)
    dtype = aid.dtype
    if aid.shape is None:  # null dataspace: no value
        return None, dtype
    value = np.empty(aid.shape, dtype=dtype)
    aid.read(value)
    return (value.reshape(-1)[0] if value.size == 1 else value), dtype


def _peek_run_id(group: h5py.Group) -> str | None:
    """Return a group's run_id attribute without reading the others."""
    if not h5py.h5a.exists(group.id, b"run_id"):
        return None
    return _text(_read_attribute(group.id, b"run_id")[0])


class _ReadBuilder:
    """Collects one read's fields while its groups are visited."""

    def __init__(self, file_header: dict[str, str]) -> None:
        """Start from the file-level (root) header attributes."""
        self.header = dict(file_header)
        self.primary: dict[str, Any] = {}
        self.signal: np.ndarray | None = None
        self.aux: dict[str, Any] = {}
        self.aux_fields: list[AuxField] = []
        self.groups: set[str] = set()
        self.skip_header = False  # run already known: its header attributes are not needed

    def add_attribute(self, group: str, name: str, value: Any, dtype: np.dtype) -> None:
        """Route one attribute to a primary field, an aux column or the header."""
        try:
            self._route(group, name, value, dtype)
        except (ValueError, TypeError, OverflowError) as err:
            where = f"{group or '/'}/{name}"
            where = where if where.isprintable() else repr(where)  # a newline in a name
            raise ValueError(f"bad attribute {where}: {err}") from err

    def _route(self, group: str, name: str, value: Any, dtype: np.dtype) -> None:
        """Store one attribute where slow5tools would (primary, aux or header)."""
        if name in PRIMARY_FLOATS:
            self.primary[name] = float(value)
        elif name == "read_id":
            self.primary[name] = _text(value)
        elif name == "duration":
            pass  # the signal length is taken from the dataset
        elif name in KNOWN_AUX_TYPES:
            self._add_aux(AuxField(name, KNOWN_AUX_TYPES[name]), value)
        elif group in HEADER_GROUPS or name in ("run_id", "pore_type"):
            enum = h5py.check_enum_dtype(dtype) is not None
            self._add_header(name, _header_value(value, enum))
        elif name == "end_reason" and h5py.check_enum_dtype(dtype) is None:
            self._add_aux(*_plain_end_reason(value))
        else:
            natural = _natural_type(dtype)
            if natural is None:
                raise ValueError(f"its type {dtype} cannot be stored in SLOW5")
            if natural.type == "enum":
                # Store the label's position (equal to the raw value for ONT's 0..n-1 enums).
                values = sorted(h5py.check_enum_dtype(dtype).values())
                value = values.index(int(value)) if int(value) in values else None
            self._add_aux(AuxField(name, natural.type, natural.labels), value)

    def _add_header(self, name: str, text: str) -> None:
        """Record a header attribute; refuse a name SLOW5 cannot hold or a second value."""
        problem = name_problem(name)
        if problem:
            raise ValueError(problem)
        # The same name in two header groups (e.g. version in context_tags and tracking_id)
        # would keep one value and drop the other: refused, like slow5tools.
        if self.header.get(name, text) != text:
            raise ValueError(f"given twice with different values ({self.header[name]!r}, {text!r})")
        self.header[name] = text

    def _add_aux(self, aux: AuxField, value: Any) -> None:
        """Record an aux value (first occurrence of a name wins its column position)."""
        problem = name_problem(aux.name)
        if problem:
            raise ValueError(problem)
        if not (aux.type == "enum" or value is None):
            value = _convert(value, aux.type)
        if aux.name in self.aux and self.aux[aux.name] != value:
            raise ValueError("given twice in one read with different values: one would be lost")
        if aux.name not in self.aux:
            self.aux_fields.append(aux)
        self.aux[aux.name] = value

    def problem(self) -> str | None:
        """Why the read cannot be written (read id, empty signal), or None."""
        if self.signal is not None and self.signal.size == 0:
            return "empty signal"
        return read_id_problem(self.primary["read_id"])

    def missing(self) -> list[str]:
        """Names of missing primary fields (read_id, calibration, signal)."""
        need = ("read_id",) + PRIMARY_FLOATS
        gone = [name for name in need if name not in self.primary]
        return gone + (["signal"] if self.signal is None else [])

    def build(self) -> Fast5Read:
        """Return the finished read (call only when missing() is empty)."""
        rec = Record(
            read_id=self.primary["read_id"],
            read_group=-1,
            digitisation=self.primary["digitisation"],
            offset=self.primary["offset"],
            range=self.primary["range"],
            sampling_rate=self.primary["sampling_rate"],
            signal=self.signal,
            aux=self.aux,
        )
        return Fast5Read(rec, self.header.get("run_id", ""), self.header, self.aux_fields)


class _Fast5Walker:
    """Visits the groups of one open FAST5 file in slow5tools' order."""

    def __init__(self, path: str, h5: h5py.File) -> None:
        """Remember the file; cache header groups shared (hard-linked) between reads."""
        self.path = path
        self.h5 = h5
        self.header_cache: dict[Any, list[tuple[str, Any, np.dtype]]] = {}

    def visit(self, group: h5py.Group, name: str, read: _ReadBuilder) -> None:
        """Visit a group: its attributes, then its children in name order."""
        read.groups.add(name)
        if name in ("context_tags", "tracking_id") and read.skip_header:
            attrs = []
        elif name in ("context_tags", "tracking_id"):
            # Multi-read files hard-link one copy into every read: read it once.
            attrs = self.header_cache.get(group.id)
            if attrs is None:
                attrs = self.header_cache[group.id] = _attributes(group)
        else:
            attrs = _attributes(group)
        for attr_name, value, dtype in attrs:
            read.add_attribute(name, attr_name, value, dtype)
        self.visit_children(group, read)

    def visit_children(self, group: h5py.Group, read: _ReadBuilder) -> None:
        """Visit the child groups (and the Signal dataset) of a group in name order."""
        for child_name in sorted(group.keys(), key=str.encode):
            if child_name in SKIPPED_GROUPS:
                continue
            child = group[child_name]
            if isinstance(child, h5py.Group):
                self.visit(child, child_name, read)
            elif isinstance(child, h5py.Dataset) and child_name == "Signal":
                read.signal = self.signal(child)

    def signal(self, ds: h5py.Dataset) -> np.ndarray:
        """Read a raw signal dataset as little-endian int16."""
        try:
            data = ds[()]
        except OSError as err:
            plist = ds.id.get_create_plist()
            filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
            if VBZ_FILTER_ID in filters:
                raise Fast5Error(
                    self.path,
                    "signal is VBZ-compressed but the vbz HDF5 plugin is not loaded "
                    "(install vbz-h5py-plugin or set HDF5_PLUGIN_PATH)",
                ) from err
            raise Fast5Error(self.path, f"cannot read signal {ds.name}: {err}") from err
        return np.asarray(data).reshape(-1).astype("<i2", copy=False)


def _is_multi_read(path: str, h5: h5py.File, root: dict[str, Any] | _RootAttributes) -> bool:
    """Tell multi-read from single-read FAST5 (layout first, then file_type/file_version; root:
    the root attributes, read with .get)."""
    keys = set(h5.keys())
    if "Raw" in keys or "UniqueGlobalKey" in keys:
        return False
    if any(k.startswith("read_") for k in keys):
        return True
    if _text(root.get("file_type", "")) == "multi-read":
        return True
    version = root.get("file_version")
    if isinstance(version, (bytes, str, np.bytes_)):
        major = _text(version).split(".")[0]
        if not major.isdigit():
            raise Fast5Error(path, f"cannot parse file_version {_text(version)!r}")
        return int(major) >= 1
    return False


def read_fast5(
    path: str | os.PathLike,
    start: int = 0,
    stop: int | None = None,
    known_runs: Collection[str] = (),
) -> Fast5Contents:
    """Read the reads of a FAST5 file; raise Fast5Error when the file is unusable.

    For a multi-read file only read groups [start, stop) (in name order) are read.  Reads of a
    run in known_runs skip their context_tags/tracking_id attributes (header = run_id only):
    a converter takes a run's header from its first read anyway.
    """
    path = str(path)
    with _open(path) as h5:
        try:
            return _read_open_file(path, h5, start, stop, known_runs)
        except (ValueError, KeyError) as err:
            raise Fast5Error(path, str(err)) from err


def read_layout(path: str | os.PathLike) -> list[tuple[str, bool]]:
    """(read id, has a non-empty Signal dataset) of each read of a FAST5 file, from its layout alone
    (no signal or header read); Fast5Error when the file cannot be opened.

    The compiled layout (numapore.signal.fast5_core) reads the usual files; what it leaves
    (anything unusual or broken) is read here, so results and errors stay this function's."""
    path = str(path)
    compiled = core_layout()
    reads = compiled.read(path) if compiled is not None else None
    if reads is not None:
        return reads
    with _open(path) as h5:
        try:
            if _is_multi_read(path, h5, _RootAttributes(h5)):
                groups = [(h5[name].id, name) for name in _read_group_names(h5)]
                return [_multi_read_layout(group, name) for group, name in groups]
            if "Raw/Reads" not in h5:
                return []
            reads = h5["Raw/Reads"].id
            return [_single_read_layout(h5py.h5o.open(reads, name), name) for name in reads]
        except (ValueError, KeyError) as err:
            raise Fast5Error(path, str(err)) from err


class _RootAttributes:
    """A file's root attributes, each read when asked for (a file's layout mostly needs none)."""

    def __init__(self, h5: h5py.File) -> None:
        """The root attributes of h5."""
        self.oid = h5.id

    def get(self, name: str, default: Any = None) -> Any:
        """The attribute's value, default when absent or empty."""
        value = _attribute(self.oid, name.encode())
        return default if value is None else value


# The census reads thousands of files per second: the low-level API (object and attribute
# ids, no h5py.Group objects) takes a third of the high-level one's time.
def _multi_read_layout(group: Any, name: str) -> tuple[str, bool]:
    """(read id, has signal) of a multi-read file's read group (an id): the read_id of its Raw,
    else the group's name without read_."""
    raw = h5py.h5o.open(group, b"Raw") if _link(group, b"Raw") else None
    read_id = _attribute(raw, b"read_id") if raw is not None else None
    return (_text(read_id) if read_id else name.removeprefix("read_")), _has_signal(raw)


def _single_read_layout(read: Any, name: bytes) -> tuple[str, bool]:
    """(read id, has signal) of a single-read file's Raw/Reads/<name> (an id): its read_id,
    else its name."""
    read_id = _attribute(read, b"read_id")
    return _text(name if read_id is None else read_id), _has_signal(read)


def _attribute(oid: Any, name: bytes) -> Any:
    """An object's attribute (by id), None when absent or empty."""
    return _read_attribute(oid, name)[0] if h5py.h5a.exists(oid, name) else None


def _link(group: Any, name: bytes) -> bool:
    """Whether group (an id) is a group with a link of that name."""
    return isinstance(group, h5py.h5g.GroupID) and group.links.exists(name)


def _has_signal(group: Any) -> bool:
    """Whether a group (an id) holds a non-empty Signal dataset (its shape only is read)."""
    if not _link(group, b"Signal"):
        return False
    try:
        signal = h5py.h5o.open(group, b"Signal")
    except KeyError:  # a dangling link
        return False
    return (
        isinstance(signal, h5py.h5d.DatasetID)
        and signal.get_space().get_simple_extent_npoints() > 0
    )


def _open(path: str) -> h5py.File:
    """Open a FAST5 file read-only; Fast5Error naming it and the reason when that fails."""
    if not os.path.isfile(path):
        raise Fast5Error(path, "no such file")
    try:
        return h5py.File(path, "r")
    except OSError as err:
        reason = "not an HDF5 file" if not h5py.is_hdf5(path) else f"cannot open: {err}"
        raise Fast5Error(path, reason) from err


def _read_group_names(h5: h5py.File) -> list[str]:
    """The read groups of a multi-read file, in slow5tools' (byte) order."""
    return [n for n in sorted(h5.keys(), key=str.encode) if n not in SKIPPED_GROUPS]


def _read_open_file(
    path: str, h5: h5py.File, start: int, stop: int | None, known_runs: Collection[str]
) -> Fast5Contents:
    """Read the reads of an open FAST5 file (see read_fast5)."""
    walker = _Fast5Walker(path, h5)
    root_attrs = _attributes(h5)
    root = _ReadBuilder({})
    for name, value, dtype in root_attrs:
        root.add_attribute("", name, value, dtype)
    contents = Fast5Contents(path)
    if not _is_multi_read(path, h5, {name: value for name, value, _ in root_attrs}):
        read = _ReadBuilder(root.header)
        if known_runs and "UniqueGlobalKey/tracking_id" in h5:
            _skip_known(read, _peek_run_id(h5["UniqueGlobalKey/tracking_id"]), known_runs)
        walker.visit_children(h5, read)
        if not read.groups:
            raise Fast5Error(path, "empty FAST5 (no groups, no reads)")
        _finish(contents, read, "the single-read FAST5")
        if contents.rejected and contents.rejected[0][0] == ".":
            raise Fast5Error(path, contents.rejected[0][1])  # no read id: the file is rejected
        return contents
    names = _read_group_names(h5)
    contents.groups = len(names)
    if not names:
        raise Fast5Error(path, "empty multi-read FAST5 (no read groups)")
    for name in names[start:stop]:
        group = h5[name]
        read = _ReadBuilder(root.header)
        if known_runs:
            run_id = _peek_run_id(group)
            if run_id is None and "tracking_id" in group:
                run_id = _peek_run_id(group["tracking_id"])
            _skip_known(read, run_id, known_runs)
        try:
            walker.visit(group, name, read)
        except ValueError as err:  # a bad attribute rejects this read, not the whole file
            label = read.primary.get("read_id", name.removeprefix("read_"))
            contents.rejected.append((label, f"read group {name}: {err}"))
            continue
        _finish(contents, read, f"read group {name}")
    return contents


def _skip_known(read: _ReadBuilder, run_id: str | None, known_runs: Collection[str]) -> None:
    """Mark a read of an already known run: keep its run_id, skip its header groups."""
    if run_id is not None and run_id in known_runs:
        read.skip_header = True
        read.header["run_id"] = run_id


def _finish(contents: Fast5Contents, read: _ReadBuilder, where: str) -> None:
    """Add a visited read to the contents, or reject it with the reason."""
    label = read.primary.get("read_id", ".")
    missing = read.missing()
    if "Raw" not in read.groups:
        contents.rejected.append((label, f"{where} has no Raw group (no raw signal)"))
    elif missing:
        contents.rejected.append((label, f"{where} lacks {', '.join(missing)}"))
    elif "run_id" not in read.header:
        contents.rejected.append((label, f"{where} has no run_id"))
    elif read.problem():
        contents.rejected.append((label, f"{where}: {read.problem()}"))
    else:
        contents.reads.append(read.build())
