"""FAST5 -> SLOW5/BLOW5 conversion: K reader processes, the parent writes one file per sample.

API::

    report = convert([fast5_dir], "sample.blow5", record_compression="zlib",
                     signal_compression="none", processes=K, on_bad_fast5="fail")
    report.reads_written, report.reads_per_second, report.signal_bytes, report.seconds
    list_fast5([folder])               # the files convert() would read, in that order
    check_nanopolish_compatible(sig)   # ValueError for svb-zd (Debian nanopolish 0.14 segfaults)

Output is the slow5tools f2s layout: header from the first read of each run_id (one read group
per run_id), aux columns from the reads of the first file (slice), in their order.  Nothing is
dropped silently: a later read with an aux field the columns lack, an enum label the column
lacks, or a value its column type cannot hold stops the run (fail) or is rejected (skip).
slow5tools does not check read ids; convert() does (allow_duplicate_ids=True reproduces
slow5tools, e.g. for its test files).

Workers read FAST5 files (each process has its own HDF5) and encode records, compression included,
so the parent only checks read ids and appends bytes.  A worker reads a file with the compiled
reader (numapore.signal.fast5_core: one C call from file to encoded records) and leaves what it
cannot read like read_fast5 to read_fast5 (h5py), which gives the same bytes.  Results are written
in input order, so the output does not depend on K.  A worker encodes only once it knows the
output's aux columns and the read group of the run; the first file, and any file that brings a new
run_id, comes back decoded and is encoded by the parent.  Multi-read files are split into slices of
SLICE_READS read groups so that K workers share a big file.  The compiled reader reads a file up to
fast5_core.CORE_MAX_BYTES whole, in one sequential pass, and a worker keeps it for the file's next
slice: on slow storage (NFS, a seek-bound disk) a few large requests, not ~18 small ones a read.

Reading happens only in worker processes, also at K=1, because a damaged file can crash an HDF5
library (Debian's 1.10 segfaults on some flipped bytes that h5py's newer HDF5 refuses cleanly).
A crash costs the worker, not the conversion: the files it held are read again by read_fast5 in
a fresh process, one by one if that dies too, and a file that still kills its reader is a bad
file (fail: the error names it; skip: it is listed with that reason).

CLI::

    numapore convert FAST5_DIR_OR_FILE... -o sample.blow5 \\
        [--to blow5|slow5] [-c zlib|zstd|none] [-s none|svb-zd] [-p K] \\
        [--on-bad-fast5 fail|skip] [--allow-duplicate-ids] [--no-index] [--quiet]

Here: the parent's side (the pool, the batching, the output order, bad-file handling and the
progress line, all on one converter state, _Converter); a worker's task is
numapore.signal.convert_worker's.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import h5py

from numapore.base.atomic import atomic_output
from numapore.signal.convert_worker import (
    BadRead,
    Result,
    Task,
    encode_read,
    merge_aux_fields,
    process_batch,
)
from numapore.signal.fast5 import list_fast5
from numapore.signal.slow5 import (  # noqa: F401 - check_nanopolish_compatible is re-exported
    RECORD_COMPRESSIONS,
    SIGNAL_COMPRESSIONS,
    AuxField,
    Fast5Read,
    check_nanopolish_compatible,
    check_compression,
)
from numapore.signal.slow5_files import Slow5Writer, format_from_path

STDERR: Any = object()  # default progress stream: sys.stderr as it is at call time (logs)
SLICE_READS = 256  # read groups per task for multi-read files (bounds memory in flight)
# Files per worker task (K > 1): up to BATCH_FILES files or BATCH_BYTES of FAST5, so that the
# parent's per-task cost (futures, pickling, the pool's queues) is shared by many small
# single-read files, while a big multi-read file stays a task of its own.
BATCH_FILES = 32
BATCH_BYTES = 8 << 20
BAD_FAST5_MODES = ("fail", "skip")


@dataclass
class ConversionReport:
    """What a conversion did: counts, throughput and the files it wrote."""

    output: Path
    fmt: str
    record_compression: str
    signal_compression: str
    processes: int
    files: int = 0
    files_converted: int = 0
    files_skipped: int = 0
    reads_written: int = 0
    reads_skipped: int = 0
    samples: int = 0
    seconds: float = 0.0
    output_bytes: int = 0
    index: Path | None = None
    rejected_tsv: Path | None = None

    @property
    def signal_bytes(self) -> int:
        """Raw signal bytes converted (int16 samples x 2)."""
        return 2 * self.samples

    @property
    def reads_per_second(self) -> float:
        """Reads written per wall-clock second."""
        return self.reads_written / self.seconds if self.seconds > 0 else 0.0

    @property
    def signal_mb_per_second(self) -> float:
        """Raw signal megabytes (1e6) converted per wall-clock second."""
        return self.signal_bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """One line for logs."""
        return (
            f"{self.reads_written} reads from {self.files_converted}/{self.files} files -> "
            f"{self.output} in {self.seconds:.2f} s ({self.reads_per_second:.1f} reads/s, "
            f"{self.signal_mb_per_second:.1f} MB/s signal); skipped {self.files_skipped} files, "
            f"{self.reads_skipped} reads"
        )


class ConversionError(Exception):
    """Conversion stopped on bad input (on_bad_fast5='fail'); the message names file and reason."""


class _Converter:
    """Parent-side state: the writer, output columns, read groups, seen read ids, report."""

    def __init__(
        self,
        writer: Slow5Writer,
        report: ConversionReport,
        on_bad_fast5: str,
        allow_duplicate_ids: bool,
        progress: TextIO | None,
        progress_interval: float,
    ) -> None:
        """Start an empty conversion."""
        self.writer = writer
        self.report = report
        self.on_bad_fast5 = on_bad_fast5
        self.allow_duplicate_ids = allow_duplicate_ids
        self.progress = progress
        self.progress_interval = progress_interval
        self.schema: tuple[AuxField, ...] | None = None
        self.read_groups: dict[str, int] = {}
        self.seen: dict[str, int] = {}
        self.paths: list[str] = []
        self.rejected: list[tuple[str, str, str]] = []
        self.t0 = time.monotonic()
        self.last_progress = self.t0
        # Per file: convert only its first N read groups (a slice of the reads: host tuning).
        self.stops: Mapping[str, int] = {}

    def task(self, path: str, start: int = 0, stop: int | None = None) -> Task:
        """Build a task carrying what is known so far about the output."""
        w = self.writer
        return Task(
            path,
            start,
            stop,
            w.fmt,
            w.record_compression,
            w.signal_compression,
            self.schema,
            dict(self.read_groups),
        )

    def batch(self, todo: deque[str]) -> list[Task]:
        """Take the next files off todo as one worker task list (see BATCH_FILES): the tasks
        share one copy of what is known, so it is pickled once per batch. One file while the
        output's columns are unknown (its reads come back decoded for the parent to encode)."""
        first = self.task(todo[0], 0, self.stop(todo.popleft(), SLICE_READS))
        tasks, size = [first], _file_size(first.path)
        while self.schema is not None and todo and len(tasks) < BATCH_FILES and size < BATCH_BYTES:
            size += _file_size(todo[0])
            tasks.append(replace(first, path=todo[0], stop=self.stop(todo.popleft(), SLICE_READS)))
        return tasks

    def stop(self, path: str, stop: int) -> int:
        """A task's end (read groups) in a file: stop, or less where only a slice is converted."""
        return min(stop, self.stops.get(os.path.abspath(path), stop))

    def bad(self, path: str, read_id: str, reason: str, whole_file: bool = False) -> None:
        """Fail, or record a rejected file/read for the TSV."""
        if self.on_bad_fast5 == "fail":
            what = f" (read {read_id})" if read_id != "." else ""
            raise ConversionError(f"{path}{what}: {reason}")
        self.rejected.append((path, read_id, reason))
        if whole_file:
            self.report.files_skipped += 1
        else:
            self.report.reads_skipped += 1

    def handle(self, result: Result) -> None:
        """Write one worker result (in input order)."""
        path = result.task.path
        if result.error is not None:
            # An error in a later slice of a multi-read file leaves the earlier reads written.
            self.bad(path, ".", result.error, whole_file=result.task.start == 0)
            return
        if result.task.start == 0:
            self.report.files_converted += 1
            self.paths.append(path)
        for read_id, reason in result.rejected:
            self.bad(path, read_id, reason)
        if self.schema is None and result.decoded:
            # The first file's reads fix the output columns (all of their aux fields).
            self.schema = merge_aux_fields(result.decoded)
            self.writer.set_aux_fields(self.schema)
        for read in result.decoded:
            if self.repeated(path, read.record.read_id):
                continue
            try:
                blob = self.encode_here(read)
            except BadRead as err:
                self.bad(path, read.record.read_id, str(err))
                continue
            self.write(read.record.read_id, blob, len(read.record.signal))
        for read_id, blob, samples in result.encoded:
            if not self.repeated(path, read_id):
                self.write(read_id, blob, samples)
        self.maybe_progress()

    def repeated(self, path: str, read_id: str) -> bool:
        """Whether a read id was already written (then fail, or reject it as a duplicate)."""
        first = None if self.allow_duplicate_ids else self.seen.get(read_id)
        if first is not None:
            self.bad(
                path, read_id, f"duplicate read id (already converted from {self.paths[first]})"
            )
        return first is not None

    def encode_here(self, read: Fast5Read) -> bytes:
        """Encode a read in the parent, adding its run's read group when it is new."""
        assert self.schema is not None  # set by handle() from the first decoded reads
        blob = None
        rg = self.read_groups.get(read.run_id)
        if rg is None:
            # Check the read first: a rejected read must not leave its run in the header.
            blob = encode_read(read, len(self.writer.read_groups), self.schema, self.task(""))
            rg = self.read_groups[read.run_id] = self.writer.add_read_group(read.header)
        return blob or encode_read(read, rg, self.schema, self.task(""))

    def write(self, read_id: str, blob: bytes, samples: int) -> None:
        """Append one encoded record (its id is then taken)."""
        self.writer.write_encoded(read_id, blob)
        if not self.allow_duplicate_ids:
            self.seen[read_id] = len(self.paths) - 1
        self.report.reads_written += 1
        self.report.samples += samples

    def note(self, text: str) -> None:
        """Tell the user something on the progress stream (when there is one)."""
        if self.progress is not None:
            print(f"[numapore.convert] {text}", file=self.progress, flush=True)

    def maybe_progress(self, final: bool = False) -> None:
        """Print progress to stderr at most once per progress_interval seconds."""
        now = time.monotonic()
        if self.progress is None or (
            not final and now - self.last_progress < self.progress_interval
        ):
            return
        self.last_progress = now
        elapsed = max(now - self.t0, 1e-9)
        r = self.report
        done = r.files_converted + r.files_skipped
        print(
            f"[numapore.convert] {r.reads_written} reads converted, "
            f"{done}/{r.files} files ({100 * done / max(r.files, 1):.0f}%), "
            f"{r.reads_written / elapsed:.1f} reads/s",
            file=self.progress,
            flush=True,
        )

    def slices(self, result: Result) -> list[tuple[int, int]]:
        """Remaining read-group slices of a multi-read file after its first slice."""
        end = self.stop(result.task.path, result.groups)
        if result.error is not None or result.task.start != 0 or end <= SLICE_READS:
            return []
        return [(s, min(s + SLICE_READS, end)) for s in range(SLICE_READS, end, SLICE_READS)]

    def run_pool(self, files: list[str], processes: int) -> None:
        """Convert with K worker processes, writing results in input order."""
        window = 2 * processes  # batches in flight: keeps workers busy, bounds memory
        todo = deque(files)
        # Batches in input order: a future of a batch's results, or results already in hand.
        pending: deque[tuple[list[Task], Future | list[Result]]] = deque()
        # A process pool that notices dead workers: a crash inside HDF5 must not hang us.
        pool = ProcessPoolExecutor(processes, mp_context=_pool_context())
        try:
            while todo or pending:
                # Until the first file's reads have fixed the output's columns, one batch only:
                # workers can encode only once they know them.
                while todo and len(pending) < window and (self.schema is not None or not pending):
                    tasks = self.batch(todo)
                    pending.append((tasks, pool.submit(process_batch, tasks)))
                tasks, batch = pending.popleft()
                try:
                    results = batch if isinstance(batch, list) else batch.result()
                except BrokenProcessPool:
                    # A worker died: this batch's or one running beside it. Read this batch
                    # again apart; resubmit the others as they were to a new pool.
                    pool.shutdown(wait=True, cancel_futures=True)
                    self.note(
                        f"a reader process died (in HDF5?): rereading its {len(tasks)} file(s)"
                    )
                    results = _isolated(tasks)
                    pool = ProcessPoolExecutor(processes, mp_context=_pool_context())
                    pending = deque((t, _resubmit(pool, t, f)) for t, f in pending)
                for i, result in enumerate(results):
                    slices = self.slices(result)
                    if slices:
                        # The other slices of a big multi-read file go right after its first
                        # slice, before the rest of its batch.
                        path = result.task.path
                        slice_tasks = [self.task(path, start, stop) for start, stop in slices]
                        more = [([t], pool.submit(process_batch, [t])) for t in slice_tasks]
                        rest = results[i + 1 :]
                        more += [(tasks[i + 1 :], rest)] if rest else []
                        pending.extendleft(reversed(more))
                    self.handle(result)
                    if slices:
                        break
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _resubmit(
    pool: ProcessPoolExecutor, tasks: list[Task], batch: Future | list[Result]
) -> Future | list[Result]:
    """A pending batch after its pool broke: its results if it finished, else a new future."""
    if isinstance(batch, list):
        return batch
    if batch.done() and not batch.cancelled() and batch.exception() is None:
        return batch.result()
    return pool.submit(process_batch, tasks)


def _isolated(tasks: list[Task]) -> list[Result]:
    """Results of a batch whose worker died: read_fast5 (h5py's HDF5) reads it again in a fresh
    process, one file per process once that dies too; a file that still kills it is bad input."""
    retry = [replace(t, compiled=False) for t in tasks]
    with ProcessPoolExecutor(1, mp_context=_pool_context()) as pool:
        try:
            return pool.submit(process_batch, retry).result()
        except BrokenProcessPool:
            pass
    if len(tasks) > 1:
        return [result for task in tasks for result in _isolated([task])]
    return [Result(tasks[0], error="unreadable FAST5 (reading it crashed the reader process)")]


def _file_size(path: str) -> int:
    """A file's size in bytes (0 when it cannot be read: the worker reports why)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _pool_context() -> multiprocessing.context.BaseContext:
    """Fork workers when that is safe for HDF5, else spawn fresh interpreters.

    Each worker gets its own copy of the HDF5 library either way.  Forking is ~100x faster to
    start (spawn re-imports numpy/h5py: seconds on a loaded host) but only safe when the parent
    has no HDF5 file open and no other thread (which could hold h5py's lock) is running.
    """
    open_files = h5py.h5f.get_obj_count(h5py.h5f.OBJ_ALL, h5py.h5f.OBJ_FILE)
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and open_files == 0 and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def convert(
    inputs: Iterable[str | os.PathLike],
    output: str | os.PathLike,
    fmt: str | None = None,
    record_compression: str = "zlib",
    signal_compression: str = "none",
    processes: int = 1,
    on_bad_fast5: str = "fail",
    allow_duplicate_ids: bool = False,
    write_index: bool = True,
    progress: TextIO | None = STDERR,
    progress_interval: float = 5.0,
    first_groups: Mapping[str, int] | None = None,
) -> ConversionReport:
    """Convert FAST5 files/folders into one SLOW5/BLOW5 file and return a ConversionReport.

    fmt defaults to the output suffix. first_groups: of those files, only their first N read
    groups (in name order, as read_layout lists them): a slice of the reads (host tuning).
    on_bad_fast5='fail' raises ConversionError naming the file and reason; 'skip' leaves bad
    files/reads out and lists them in <output>.rejected.tsv.
    A BLOW5 gets a slow5lib index (<output>.idx) unless write_index is False or read ids repeat.
    """
    output = Path(output)
    # Resolved now, not at import: a Snakemake script redirects sys.stderr to its log first.
    progress = sys.stderr if progress is STDERR else progress
    fmt = fmt or format_from_path(output)
    check_compression(record_compression, signal_compression)
    if on_bad_fast5 not in BAD_FAST5_MODES:
        raise ValueError(f"on_bad_fast5 must be one of {BAD_FAST5_MODES}, not {on_bad_fast5!r}")
    if processes < 1:
        raise ValueError("processes must be >= 1")
    inputs = [str(i) for i in inputs]
    files = [str(p) for p in list_fast5(inputs)]
    if not files:
        raise ConversionError(f"no FAST5 files found in {inputs}")
    report = ConversionReport(output, fmt, record_compression, signal_compression, processes)
    report.files = len(files)
    t0 = time.monotonic()
    writer = Slow5Writer(
        output, fmt, record_compression, signal_compression, write_index=write_index
    )
    conv = _Converter(
        writer, report, on_bad_fast5, allow_duplicate_ids, progress, progress_interval
    )
    conv.stops = {os.path.abspath(path): n for path, n in (first_groups or {}).items()}
    try:
        conv.run_pool(files, processes)
        if report.reads_written == 0:
            raise ConversionError(f"no reads converted from {len(files)} FAST5 files")
        writer.close()
    except BaseException:
        writer.abort()
        if on_bad_fast5 == "skip" and conv.rejected:
            write_rejected(output, conv.rejected)  # explains why nothing was converted
        raise
    report.seconds = time.monotonic() - t0
    report.output_bytes = output.stat().st_size
    report.index = writer.index_path
    if fmt == "blow5" and write_index and report.index is None and progress is not None:
        conv.note("read ids repeat: no index written")
    if on_bad_fast5 == "skip":
        report.rejected_tsv = write_rejected(output, conv.rejected)
    if progress is not None:
        conv.maybe_progress(final=True)
        print(f"[numapore.convert] {report.summary()}", file=progress, flush=True)
    return report


def write_rejected(output: Path, rows: list[tuple[str, str, str]]) -> Path:
    """Write <output>.rejected.tsv (path, read_id or '.', reason) and return its path."""
    path = Path(str(output) + ".rejected.tsv")
    lines = ["path\tread_id\treason\n"]
    lines += ["\t".join(map(_tsv_field, row)) + "\n" for row in rows]
    with atomic_output(path) as tmp:
        tmp.write_text("".join(lines))
    return path


def _tsv_field(text: str) -> str:
    """A TSV field: tabs and line breaks (e.g. in a refused name) escaped as \\t, \\n, \\r."""
    return text.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def main(argv: Sequence[str] | None = None, prog: str = "numapore convert") -> int:
    """Command-line entry point; returns the exit status."""
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="+", help="FAST5 files or folders (searched recursively)")
    ap.add_argument("-o", "--output", required=True, help="output .blow5 or .slow5 file")
    ap.add_argument("--to", choices=("blow5", "slow5"), help="output format (default: suffix)")
    ap.add_argument("-c", "--compress", default="zlib", choices=RECORD_COMPRESSIONS)
    ap.add_argument("-s", "--sig-compress", default="none", choices=SIGNAL_COMPRESSIONS)
    ap.add_argument("-p", "--processes", type=int, default=1, help="reader processes K")
    ap.add_argument("--on-bad-fast5", choices=BAD_FAST5_MODES, default="fail")
    ap.add_argument("--allow-duplicate-ids", action="store_true", help="keep repeated read ids")
    ap.add_argument("--no-index", action="store_true", help="do not write <output>.idx")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args(argv)
    try:
        if args.to and args.to != format_from_path(args.output):
            ap.error(f"--to {args.to} does not match the suffix of {args.output}")
        report = convert(
            args.inputs,
            args.output,
            fmt=args.to,
            record_compression=args.compress,
            signal_compression=args.sig_compress,
            processes=args.processes,
            on_bad_fast5=args.on_bad_fast5,
            allow_duplicate_ids=args.allow_duplicate_ids,
            write_index=not args.no_index,
            progress=None if args.quiet else sys.stderr,
        )
    except (ConversionError, ValueError, OSError) as err:
        print(f"numapore.convert: error: {err}", file=sys.stderr)
        return 1
    if report.files_skipped or report.reads_skipped:
        print(
            f"numapore.convert: skipped {report.files_skipped} files and "
            f"{report.reads_skipped} reads (see {report.rejected_tsv})",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
