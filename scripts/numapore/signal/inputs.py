"""Raw signal readers other than FAST5: each turns a sample's input into the one indexed BLOW5
that nanopolish reads in I/O mode slow5 (FAST5 has its own converter, numapore.signal.convert).

    use_blow5(Path("run.blow5"), Path("results/s/signal/s.blow5"))   # checked, linked, indexed
    pod5_to_blow5([Path("pod5/")], Path("results/s/signal/s.blow5"), processes=2)

A new input format is a new function here and a rule calling it (rules/methylation.smk).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from numapore.signal.slow5 import FAST5_AUX_FIELDS, SIGNAL_COMPRESSIONS, AuxField, Record
from numapore.signal.slow5_files import Slow5Writer, blow5_problem

# The byte of a BLOW5 header holding its signal compression (after magic, version, record
# compression and the read group count).
SIGNAL_COMPRESSION_BYTE = 14
# end_reason labels in SLOW5's order (as slow5tools and blue-crab write them).
END_REASONS = (
    "unknown",
    "mux_change",
    "unblock_mux_change",
    "data_service_unblock_mux_change",
    "signal_positive",
    "signal_negative",
    "api_request",
    "device_data_error",
    "analysis_config_change",
    "paused",
)
POD5_AUX_FIELDS = (*FAST5_AUX_FIELDS, AuxField("end_reason", "enum", END_REASONS))


class SignalError(Exception):
    """A raw signal input cannot be used; the message names the file and the reason."""


def blow5_signal_compression(path: Path) -> str:
    """The signal compression named in a BLOW5 file's header ('none', 'svb-zd', ...)."""
    with open(path, "rb") as handle:
        handle.seek(SIGNAL_COMPRESSION_BYTE)
        code = handle.read(1)
    names = {v: k for k, v in SIGNAL_COMPRESSIONS.items()}
    return names.get(code[0], f"unknown ({code[0]})") if code else "none"


def use_blow5(source: Path, output: Path) -> int:
    """Check a user's BLOW5 (whole, readable header and last record, signal nanopolish 0.14
    reads), link it as output with its index (its own .idx, else one made beside the link);
    return its read count."""
    import pyslow5

    problem = blow5_problem(source)
    if problem:
        raise SignalError(f"BLOW5 {source}: {problem}")
    compression = blow5_signal_compression(source)
    if compression != "none":
        raise SignalError(
            f"BLOW5 {source}: signal compression {compression}, which Debian's nanopolish 0.14 "
            "cannot read; rewrite it with `slow5tools view -c zlib -s none`"
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    for link in (output, Path(f"{output}.idx")):
        link.unlink(missing_ok=True)
    os.symlink(source.resolve(), output)
    if Path(f"{source}.idx").is_file():
        os.symlink(Path(f"{source}.idx").resolve(), f"{output}.idx")
    try:
        handle = pyslow5.Open(str(output), "r")  # makes output.idx when there is none
        ids, count = handle.get_read_ids()
        last = handle.get_read(ids[-1]) if count else None
    except Exception as err:  # noqa: BLE001 - slow5lib's errors carry no type of their own
        raise SignalError(f"BLOW5 {source}: cannot be read ({err})") from err
    if count == 0:
        raise SignalError(f"BLOW5 {source}: holds no reads")
    if last is None or len(last["signal"]) != last["len_raw_signal"]:
        raise SignalError(f"BLOW5 {source}: its last record ({ids[-1]}) cannot be read")
    return count


def list_pod5(inputs: Sequence[Path]) -> list[Path]:
    """POD5 files of files/folders (recursive, sorted by path; extension in any case)."""
    files: list[Path] = []
    for item in inputs:
        if item.is_dir():
            found = [p for p in item.rglob("*") if p.suffix.lower() == ".pod5" and p.is_file()]
            files += sorted(found, key=lambda p: str(p).encode())
        else:
            files.append(item)
    return files


def _clean(value: object, where: str) -> str:
    """A header value as text; tabs and newlines would break the SLOW5 header: refused."""
    text = str(value)
    if "\t" in text or "\n" in text:
        raise SignalError(f"{where}: header value {text!r} holds a tab or newline")
    return text


def float32_decimal(value: float) -> float:
    """A float32 calibration value as the shortest decimal that is that float32 (1444.86, not
    1444.8599853515625): POD5 keeps the scale as float32, FAST5 and BLOW5 the decimal as
    float64, and nanopolish's calls change with the last bits."""
    return float(str(np.float32(value)))


def _pod5_batch(path: Path, batch: int) -> tuple[dict[str, dict[str, str]], list[Record]]:
    """Read one batch of a POD5 file: its runs' header attributes and its records (read group
    left -1; the parent numbers runs)."""
    import pod5

    runs: dict[str, dict[str, str]] = {}
    records: list[Record] = []
    with pod5.Reader(path) as reader:
        for read in reader.get_batch(batch).reads():
            info = read.run_info
            run_id = info.acquisition_id
            if run_id not in runs:
                attrs = {**dict(info.context_tags), **dict(info.tracking_id), "run_id": run_id}
                runs[run_id] = {k: _clean(v, f"POD5 {path}") for k, v in attrs.items()}
            reason = read.end_reason.reason.name.lower()
            records.append(
                Record(
                    read_id=str(read.read_id),
                    read_group=-1,
                    digitisation=float(read.calibration_digitisation),
                    offset=float32_decimal(read.calibration.offset),
                    range=float32_decimal(read.calibration_range),
                    sampling_rate=float(info.sample_rate),
                    signal=np.asarray(read.signal, dtype=np.int16),
                    aux={
                        "start_time": read.start_sample,
                        "read_number": read.read_number,
                        "start_mux": read.pore.well,
                        "median_before": read.median_before,
                        "channel_number": str(read.pore.channel),
                        "end_reason": END_REASONS.index(reason) if reason in END_REASONS else 0,
                        "__run_id": run_id,
                    },
                )
            )
    return runs, records


def _batches(path: Path) -> list[tuple[Path, int]]:
    """The (file, batch) tasks of a POD5 file; SignalError naming it if it cannot be read."""
    import pod5

    try:
        with pod5.Reader(path) as reader:
            return [(path, i) for i in range(reader.batch_count)]
    except Exception as err:  # noqa: BLE001 - the pod5 library raises many kinds
        raise SignalError(f"POD5 {path}: cannot be read ({type(err).__name__}: {err})") from err


def _in_order(pool: ProcessPoolExecutor, tasks: list[tuple[Path, int]], processes: int):
    """The tasks' results in task order, at most 2K batches in flight (bounded memory)."""
    pending = deque()
    for task in tasks:
        pending.append(pool.submit(_pod5_batch, *task))
        if len(pending) >= 2 * max(1, processes):
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def pod5_to_blow5(
    inputs: Sequence[Path],
    output: Path,
    record_compression: str = "zlib",
    signal_compression: str = "none",
    processes: int = 1,
) -> int:
    """Convert POD5 files/folders into one BLOW5 (+ .idx) with K reader processes, one read
    group per run (acquisition id), records in input order; return the read count."""
    tasks = [task for path in list_pod5(inputs) for task in _batches(path)]
    groups: dict[str, int] = {}
    seen: dict[str, Path] = {}
    with (
        Slow5Writer(
            output, "blow5", record_compression, signal_compression, POD5_AUX_FIELDS
        ) as writer,
        ProcessPoolExecutor(max(1, processes)) as pool,
    ):
        for (path, _), (runs, records) in zip(
            tasks, _in_order(pool, tasks, processes), strict=True
        ):
            for run_id, attrs in runs.items():
                if run_id not in groups:
                    groups[run_id] = writer.add_read_group(attrs)
            for rec in records:
                if rec.read_id in seen:
                    raise SignalError(
                        f"POD5 {path}: read {rec.read_id} is also in {seen[rec.read_id]}; "
                        "a read may be given once"
                    )
                seen[rec.read_id] = path
                rec.read_group = groups[rec.aux.pop("__run_id")]
                writer.write_record(rec)
    return writer.records
