"""What a reader process of numapore.signal.convert does with one task: read a FAST5 file (or a
slice of its read groups) with the compiled reader, or like read_fast5 (h5py) where that one
leaves it, and encode its reads for the output, compression included, once the output's aux
columns and the run's read group are known (else the reads go back decoded to the parent, which
fixes them: merge_aux_fields, conform_aux).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from numapore.signal.fast5 import Fast5Error, read_fast5
from numapore.signal.fast5_core import core_reader
from numapore.signal.slow5 import AuxField, Fast5Read, encode_record


@dataclass(frozen=True)
class Task:
    """One unit of work: a file (or a slice of its read groups) and how to encode it."""

    path: str
    start: int
    stop: int | None
    fmt: str
    record_compression: str
    signal_compression: str
    aux_fields: tuple[AuxField, ...] | None
    read_groups: dict[str, int]
    compiled: bool = True  # False: read_fast5 only (a retry after a reader process died)


@dataclass
class Result:
    """A worker's answer: encoded (read_id, blob, samples) or decoded reads, and problems."""

    task: Task
    error: str | None = None
    groups: int = 1
    encoded: list[tuple[str, bytes, int]] = field(default_factory=list)
    decoded: list[Fast5Read] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)


class BadRead(ValueError):
    """A read the output cannot hold without losing something; str() is the reason."""


def merge_aux_fields(reads: Sequence[Fast5Read]) -> tuple[AuxField, ...]:
    """The output columns: every aux field of the reads, each new one placed after the field
    that precedes it in the first read carrying it (slow5tools' order for its suite)."""
    merged: list[AuxField] = []
    names: set[str] = set()
    for read in reads:
        previous = -1
        for aux in read.aux_fields:
            if aux.name in names:
                previous = next(i for i, f in enumerate(merged) if f.name == aux.name)
                continue
            previous += 1
            merged.insert(previous, aux)
            names.add(aux.name)
    return tuple(merged)


def conform_aux(read: Fast5Read, schema: Sequence[AuxField]) -> dict[str, Any]:
    """Map a read's aux values onto the output columns; BadRead if one cannot be kept."""
    own = {f.name: f for f in read.aux_fields}
    dropped = set(own) - {f.name for f in schema}
    if dropped:
        raise BadRead(
            f"aux field(s) {', '.join(sorted(dropped))} not in the output's columns "
            "(taken from the first file's reads); convert this file separately"
        )
    values: dict[str, Any] = {}
    for out in schema:
        value = read.record.aux.get(out.name)
        src = own.get(out.name)
        # Same labels in another order (or a label the header lacks) -> map by label.
        if (
            value is not None
            and out.type == "enum"
            and src is not None
            and src.labels != out.labels
        ):
            label = src.labels[value] if value < len(src.labels) else None
            if label not in out.labels:
                raise BadRead(f"{out.name} label {label!r} is not in the output's enum")
            value = out.labels.index(label)
        elif value is not None and src is not None and src.type != out.type:
            lossy = isinstance(value, float) and out.type not in ("float", "double", "char*")
            if out.type == "enum" or src.type == "enum" or lossy:
                raise BadRead(f"{out.name} is {src.type} here but {out.type} in the output")
        values[out.name] = value
    return values


def encode_read(read: Fast5Read, rg: int, schema: Sequence[AuxField], task: Task) -> bytes:
    """Encode one read for the output; BadRead when a value cannot be kept exactly."""
    values = conform_aux(read, schema)
    rec = replace(read.record, read_group=rg, aux=values)
    try:
        blob = encode_record(
            rec, schema, task.fmt, task.record_compression, task.signal_compression
        )
    except (ValueError, TypeError, OverflowError, struct.error) as err:
        raise BadRead(f"a value its output column cannot hold ({err})") from err
    return blob


def process_batch(tasks: list[Task]) -> list[Result]:
    """Worker entry point: the results of a batch of tasks, in order."""
    return [process_task(task) for task in tasks]


def process_task(task: Task) -> Result:
    """Worker entry point: read a FAST5 file (slice) and encode its reads when possible."""
    reader = task.compiled and core_reader(
        task.fmt,
        task.record_compression,
        task.signal_compression,
        task.aux_fields,
        task.read_groups,
    )
    got = reader.read(task.path, task.start, task.stop) if reader else None
    if got is not None:  # the compiled reader; None: a file it leaves to the Python reader
        return Result(task, groups=got.groups, encoded=got.encoded, decoded=got.decoded)
    result = Result(task)
    try:
        contents = read_fast5(task.path, task.start, task.stop, task.read_groups.keys())
    except Fast5Error as err:
        result.error = err.reason
        return result
    except Exception as err:  # noqa: BLE001 - an unexpected library error is still bad input
        result.error = f"unreadable FAST5 ({type(err).__name__}: {err})"
        return result
    result.groups = contents.groups
    result.rejected = contents.rejected
    known = task.aux_fields is not None and all(
        r.run_id in task.read_groups for r in contents.reads
    )
    if not known:
        # The parent decides the header for this run / the output columns: send reads back.
        result.decoded = contents.reads
        return result
    for read in contents.reads:
        try:
            blob = encode_read(read, task.read_groups[read.run_id], task.aux_fields, task)
        except BadRead as err:
            result.rejected.append((read.record.read_id, str(err)))
            continue
        result.encoded.append((read.record.read_id, blob, len(read.record.signal)))
    return result
