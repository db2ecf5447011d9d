"""Host tuning (`tune: on`): before a run's heavy steps, the candidates that can differ on this
host are measured on a slice of the user's own sample, and the whole run uses the winner. The
one place for the decision: which candidates there are, how the slice is cut, the honest rule
(numapore.compare.recommend.beats: a candidate wins only if it beats the simpler one in every
repeat, by more than the repeats' spread and by at least 5 %), the time cap, the cache key and
the files written (results/tuning/<host>.json, the record the run reads; <host>.yaml, a host
file the user can adopt as it is). The shape it shares with the strategies' and the pileup's
tuners (cells, decision, record, cache check) is numapore.compare.tuner's.

What is tuned in this version: the I/O mode of the methylation calling (fast5, fast5-pool,
slow5: those that read every sample's raw signal; fast5 is the simpler one); on a host of more
than one NUMA node the alignment's strategy too (numapore.compare.tune_strategy). A mode's cost
on the slice is everything that mode adds to a run: nanopolish's index of the signal, the
calling, and for slow5 the conversion to BLOW5 first.

The workflow imports this module at DAG time (the cache check): it stays free of heavy imports.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from numapore.base.errors import InputError
from numapore.compare import tune_strategy, tuner
from numapore.execution.io_modes import IO_MODES, io_mode

# What the workflow and the other tuners import from here, shared by every tuner (tuner).
from numapore.compare.tuner import CELLS_OF_CAP as CELLS_OF_CAP
from numapore.compare.tuner import NAME_ENV as NAME_ENV
from numapore.compare.tuner import cached as cached
from numapore.compare.tuner import host_name as host_name
from numapore.compare.tuner import order as order
from numapore.compare.tuner import settings as settings
from numapore.compare.tuner import slice_size as slice_size
from numapore.compare.tuner import tuning_name as tuning_name

# The simpler I/O mode every other is measured against (the comparison's baseline).
BASELINE = "fast5"
# A tuning file's format; a file of another is measured anew (2: nanopolish's start timed
# apart and the conversion's readers counted, so a format-1 choice may differ).
FORMAT = 2
# Read requests the baseline (fast5) makes per read of signal: h5py reading one read's signal
# ~26, ~34 with the channel and read attributes nanopolish also reads (measured through the
# emulated storage, numapore.compare.slowfs). With the storage's time per request, it bounds
# what any I/O mode can save: none saves more than the baseline spends reading.
FAST5_REQUESTS_PER_READ = 34
# Small reads timed to tell the storage's time per request (spread over the first files).
LATENCY_PROBES = 8
# The main process's answer of the payback check, for the job processes that parse the workflow
# again (worth measuring: "measure", else "skip").
PAYBACK_ENV = "NUMAPORE_TUNING_PAYBACK"
# Its prediction, for the tuning job's cap (seconds the baseline spends reading the signal):
# through the environment, not params, so that a timing that moves does not rerun the job.
SAVING_ENV = "NUMAPORE_TUNING_SAVING"
PROBE_BYTES = 4096
# The I/O mode's tuner: its differences from the other tuners (compare.tuner).
IO = tuner.Tuner(
    noun="mode",
    cell_key="io_mode",
    baseline=BASELINE,
    format=FORMAT,
    said=lambda record: f"I/O mode {record['io_mode']}",
)


def tuning_files(folder: str | os.PathLike, name: str = "") -> dict[str, str]:
    """The tuning record (JSON, read by the run) and the adoptable host file (YAML), named
    `name` (tuning_name(); default host_name())."""
    return IO.files(folder, name)


def io_candidates(signal_formats: Iterable[str]) -> list[str]:
    """The I/O modes that read every sample's raw signal, the simpler first (fast5, fast5-pool,
    slow5); POD5 or BLOW5 signal: slow5 only, nothing to measure."""
    formats = set(signal_formats)
    return [name for name, mode in IO_MODES.items() if mode.converts_signal or formats <= {"fast5"}]


def cache_key(
    tools: Mapping[str, str],
    aligner: str,
    reference: str | os.PathLike,
    signal: Sequence[str | os.PathLike],
    storage: Mapping[str, Any],
    candidates: Sequence[str],
) -> dict[str, Any]:
    """What a tuning holds for: the tools' versions, the aligner and the reference its index is
    built from, the I/O source (the tuned sample's signal paths, the emulated storage) and the
    candidates; another key: measured anew. Paths only: a change of those files' contents
    reruns the tuning as any job whose inputs changed (Snakemake's own rule), and files a run
    makes (a simulated sample's signal) exist only after the DAG is built."""
    return {
        "format": FORMAT,
        "tools": dict(tools),
        "aligner": aligner,
        "reference": str(Path(reference).absolute()),
        "signal": [str(Path(p).absolute()) for p in signal],
        "storage": dict(storage),
        "candidates": list(candidates),
    }


def count_reads(path: str | os.PathLike) -> int:
    """The records of a FASTQ (4 lines each) or FASTA (a '>' line each) file, gzipped or not,
    counted in bytes without parsing (a run's DAG counts the tuned sample's reads)."""
    from numapore.base.textfiles import open_maybe_gzip

    lines = headers = 0
    with open_maybe_gzip(path, "rb") as handle:
        first = handle.read(1)
        fasta, last = first == b">", first
        headers += fasta
        while chunk := handle.read(1 << 20):
            lines += chunk.count(b"\n")
            if fasta:
                headers += chunk.count(b"\n>") + (last == b"\n" and chunk[:1] == b">")
            last = chunk[-1:]
    if not first:
        return 0
    if fasta:
        return headers
    return (lines + (last != b"\n")) // 4


def first_signal_files(paths: Iterable[str | os.PathLike], count: int) -> list[Path]:
    """The first `count` FAST5 files of a sample's signal (files as given, folders' files in
    path order), without reading them."""
    found: list[Path] = []
    for item in map(Path, paths):
        if item.is_dir():
            inside = (p for p in item.rglob("*") if p.suffix.lower() == ".fast5")
            found += sorted(inside, key=lambda p: str(p).encode())[: count - len(found)]
        elif item.suffix.lower() == ".fast5":
            found.append(item)
        if len(found) >= count:
            break
    return found[:count]


def request_seconds(files: Sequence[str | os.PathLike], probes: int = LATENCY_PROBES) -> float:
    """The storage's time per small read request: the median of `probes` reads of PROBE_BYTES
    spread over the files (each file's offsets evenly apart), as the run would see them now
    (data in the page cache answers at once; slow storage, each time)."""
    per_file = math.ceil(probes / max(1, len(files)))
    times = []
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            for i in range(per_file):
                offset = size * (2 * i + 1) // (2 * per_file) // PROBE_BYTES * PROBE_BYTES
                start = time.perf_counter()
                os.pread(fd, PROBE_BYTES, offset)
                times.append(time.perf_counter() - start)
        finally:
            os.close(fd)
        if len(times) >= probes:
            break
    return statistics.median(times) if times else 0.0


def pays_back(reads: int, request_s: float, cells: int, floor_s: float) -> tuple[bool, str]:
    """Whether measuring can pay back, from the sample's reads and its storage's time per
    request alone (before any slice is cut): no I/O mode saves more than the baseline spends
    reading the signal (reads x FAST5_REQUESTS_PER_READ requests), and the cells take at least
    `cells` x floor_s (each at least the comparison's floor to be told apart). With why."""
    reading = reading_seconds(reads, request_s)
    least = cells * floor_s
    what = (
        f"the signal answers a read request in {request_s * 1000:.3f} ms; {BASELINE} makes "
        f"about {FAST5_REQUESTS_PER_READ} per read, so reading the signal of {reads:,} reads "
        f"costs about {reading:.1f} s"
    )
    if reading < least:
        return False, (
            f"not measured: {what}, less than the least measurement ({cells} cells of at "
            f"least {floor_s:g} s: {least:g} s): no I/O mode can save what tuning would cost"
        )
    return True, f"{what}, more than the least measurement ({least:g} s): measuring"


def reading_seconds(reads: int, request_s: float) -> float:
    """What the baseline spends reading the signal of `reads` reads at request_s a request:
    the most any I/O mode can save."""
    return reads * FAST5_REQUESTS_PER_READ * request_s


def worth_measuring(
    reads: str | os.PathLike,
    signal: Sequence[str | os.PathLike],
    latency_ms: float,
    cells: int,
    floor_s: float,
) -> tuple[bool, str, float]:
    """pays_back for a sample: its reads counted, its storage's time per request timed on its
    first signal files (emulated storage: latency_ms, what the tuner will see); with why and
    the reading it predicts (reading_seconds: the tuning job's cap weighs it). (True, why, 0)
    when the files are not there yet (a run makes them): the first cell decides."""
    files = first_signal_files(signal, LATENCY_PROBES)
    if not Path(reads).is_file() or not files:
        return True, "the sample's files are made by the run: measuring", 0.0
    request_s = latency_ms / 1000 if latency_ms else request_seconds(files)
    reads_count = count_reads(reads)
    worth, why = pays_back(reads_count, request_s, cells, floor_s)
    return worth, why, reading_seconds(reads_count, request_s)


def decide(
    walls: Mapping[str, Sequence[float]],
    min_measurable: float,
    estimates: Mapping[str, Sequence[float]] | None = None,
) -> tuple[str, str]:
    """The I/O mode to run and why: the fastest median among the candidates that beat the
    baseline (fast5) by the honest rule (recommend.beats); else the baseline. The baseline's
    cells must each run at least min_measurable seconds on the slice (the comparison's
    MIN_MEASURABLE_S): a faster candidate may run shorter, its difference from a measurable
    time being the effect the rule weighs against the spread. estimates: each cell's time
    scaled to the whole run part by part (whole_run_seconds), which the rule then weighs
    instead of the slice's walls."""
    return IO.decide(walls, min_measurable, estimates)


def further_read_s(start_s: float, all_s: float, reads: int) -> float:
    """A part timed on one read (start_s: its start and that read) and on the slice's reads
    (all_s): the time of each further read."""
    return max(0.0, all_s - start_s) / max(1, reads - 1)


def start_and_rest(
    start_s: float, all_s: float, reads: int, total_reads: int, starts: int
) -> float:
    """Such a part (further_read_s) to total_reads: `starts` starts, and each further read at
    the slice's pace."""
    return start_s * starts + further_read_s(start_s, all_s, reads) * max(0, total_reads - starts)


def whole_run_seconds(
    parts: Mapping[str, float],
    reads: int,
    files: int,
    total_reads: int,
    total_files: int,
    processes: int = 1,
    call_jobs: int = 1,
) -> float:
    """What a cell's mode would add to the whole sample, each part scaled by what it grows
    with (a cell of 10 reads is mostly fixed costs: scaled whole by reads, they would be
    multiplied too). nanopolish's calls: their start (loading the reference and the read
    index; call_start_s, a call on one read) once per call job of the run (call_jobs), the rest
    by reads. Its index of FAST5 files by files (it reads every read group of each file the
    slice links); of a BLOW5, its start (index_start_s, the one-read BLOW5) once and the rest
    by reads. The conversion's start (its process pool, the first file read whole into memory:
    convert_start_s, one read converted) once; then the run's conversion reads its first task
    (convert.SLICE_READS read groups, which fix the output's columns) alone, and the rest
    with its `processes` readers at once, where the slice's few reads were one reader's. The
    slice reads its file whole too, so its pace per read is the encoding's; the run's other
    files, each read whole by the readers that convert it, are not counted: size / 1 MiB
    requests (fast5_core.CORE_MAX_BYTES), e.g. 0.3 s at 5 ms for 1,000 reads' 60 MB against
    their ~7 s of encoding."""
    calls = start_and_rest(parts["call_start_s"], parts["call_s"], reads, total_reads, call_jobs)
    if "convert_s" not in parts:
        return calls + parts["index_s"] * total_files / max(1, files)
    from numapore.signal.convert import SLICE_READS  # here: convert imports h5py (DAG time)

    index = start_and_rest(parts["index_start_s"], parts["index_s"], reads, total_reads, 1)
    start = parts["convert_start_s"]
    per_read = further_read_s(start, parts["convert_s"], reads)
    alone = min(SLICE_READS, total_reads) - 1
    rest = max(0, total_reads - 1 - alone) / max(1, processes)
    return calls + index + start + per_read * (alone + rest)


def first_groups(
    layout: Sequence[tuple[str, bool]], need: int, among: Container[str] | None = None
) -> tuple[int, list[str]]:
    """Of a FAST5 file's read groups (read_layout: read id, has signal, in name order), the
    fewest first ones that hold `need` reads with signal (all when they hold fewer), and those
    reads: the slice is cut by read, as the conversion's first_groups reads it. among: only
    reads of the sample count (its reads may be some of the signal's: basecalls that passed a
    filter)."""
    taken = []
    for i, (read, has_signal) in enumerate(layout):
        if has_signal and (among is None or read in among):
            taken.append(read)
            if len(taken) == need:
                return i + 1, taken
    return len(layout), taken


def host_yaml(base: Mapping[str, Any], record: Mapping[str, Any], base_file: str) -> str:
    """The host file the user can adopt as it is (config/hosts/<hostname>.yaml): the base host
    file's settings with the chosen I/O mode and strategies (tune_strategy.adopted), and the
    measurements and the reasons as comments."""
    lines = [
        f"# numapore: tuned on {record['host']} ({record['measured']}), from {base_file}.",
        f"# I/O mode: {record['io_mode']}: {record['why']}",
        *tuner.wall_comments(record.get("walls", {}), record.get("estimates", {})),
    ]
    if record.get("slice"):
        s = record["slice"]
        lines.append(
            f"#   slice: {s['reads']} of {s['total_reads']} reads of sample '{s['sample']}' "
            f"({s['files']} signal files); tuning took {record.get('seconds', 0):.1f} s"
        )
    lines.append(f"# Strategies: {record.get('strategies_why', '')}")
    chosen = {
        "io_mode": record["io_mode"],
        "description": f"tuned by numapore on {record['measured']} (from: {base_file})",
    }
    return tuner.adoptable(tune_strategy.adopted(base, record), chosen, lines)


def add_to_record(run_record: Path, tuning_record: Path) -> None:
    """Add the tuning behind a step's I/O mode to its job's run record (the provenance page
    shows it): the tuning file, when it was measured, the choice, the reason and the walls."""
    fields = ("measured", "io_mode", "why", "walls", "estimates", "slice")
    tuner.add_to_run_record(
        run_record, "tuning", tuning_record, lambda tuned: {k: tuned.get(k) for k in fields}
    )


def group_names(path: str | os.PathLike) -> list[tuple[str, bool]]:
    """A FAST5 file's reads as read_layout gives them (read id, has signal), cheaply for a
    multi-read file: its read groups by name (read_<id>, in name order), without opening each
    (on slow storage every group costs read requests), each taken to have signal; other files:
    read_layout."""
    import h5py

    from numapore.signal.fast5 import SKIPPED_GROUPS, read_layout

    with h5py.File(path, "r") as h5:
        names = [n for n in sorted(h5.keys(), key=str.encode) if n not in SKIPPED_GROUPS]
    if names and all(n.startswith("read_") for n in names):
        return [(n.removeprefix("read_"), True) for n in names]
    return read_layout(path)


class Slice:
    """A slice in a scratch folder: its reads, their alignments (and those of its first read
    alone, for the calls' start), its signal (the files, and the read groups of each that it
    takes)."""

    def __init__(self, workdir: Path, groups: Mapping[str, int], reads: Path) -> None:
        self.workdir, self.groups, self.reads = workdir, dict(groups), reads
        self.files = list(groups)
        self.count = self.total = 0
        self.bam = workdir / "slice.bam"
        self.first_bam = workdir / "first.bam"


def cut_slice(
    workdir: Path, reads: Path, signal: Sequence[str], want: int, layout: Callable
) -> Slice:
    """The slice of a sample: the first read groups of its first signal files that hold `want`
    of the sample's reads (layout(path): the file's read_layout; files with none of them are
    passed over), and those reads, as FASTQ/FASTA (uncompressed). InputError when the signal
    holds none of the sample's reads."""
    import pysam

    from numapore.inputs.sheet import reads_format
    from numapore.signal.fast5 import list_fast5

    with pysam.FastxFile(str(reads)) as fastx:
        names = {record.name for record in fastx}
    groups, wanted = {}, set()
    for path in map(str, list_fast5(signal)):
        count, ids = first_groups(layout(path), want - len(wanted), names)
        if ids:
            groups[path] = count
            wanted.update(ids)
        if len(wanted) >= want:
            break
    if not wanted:
        raise InputError(
            f"tuning: reads file {reads}: none of its {len(names):,} reads is in its sample's "
            f"signal files ({', '.join(map(str, signal))})"
        )
    fmt = reads_format(reads).removesuffix(".gz")
    out = Slice(workdir, groups, workdir / f"slice.{fmt}")
    out.total = len(names)
    with pysam.FastxFile(str(reads)) as fastx, open(out.reads, "w") as handle:
        for record in fastx:
            if record.name in wanted:
                handle.write(str(record) + "\n")
                out.count += 1
    return out


def aligned_slice(
    folder: Path, reads: Path, signal: Sequence[str], want: int, align: Callable, layout: Callable
) -> Slice:
    """cut_slice in a folder of its own, its reads aligned (align(reads, bam): the align
    job's command, numapore.execution.steps.run_alignment) into slice.bam, indexed; the
    alignments of its first mapped read into first.bam."""
    import pysam

    folder.mkdir(parents=True)
    cut = cut_slice(folder, reads, signal, want, layout)
    align(cut.reads, cut.bam)
    pysam.index(str(cut.bam))
    with pysam.AlignmentFile(str(cut.bam)) as bam:
        records = list(bam)
        mapped = (r.query_name for r in records if not (r.is_unmapped or r.is_secondary))
        first = next(mapped, None)
        with pysam.AlignmentFile(str(cut.first_bam), "wb", template=bam) as out:
            for record in records:
                if record.query_name == first:
                    out.write(record)
    pysam.index(str(cut.first_bam))
    return cut


def signal_index(reads: Path, fast5_files: Sequence[str], blow5: Path | None) -> None:
    """nanopolish index of the slice's reads (in a folder of their own, where it writes the
    index) against FAST5 files (linked into one folder) or a BLOW5."""
    from numapore.execution.tools import nanopolish_index_command
    from numapore.signal.hdf5plugin import vbz_plugin_env

    dirs = []
    if blow5 is None:
        folder = reads.parent / "fast5"
        folder.mkdir(exist_ok=True)
        for i, path in enumerate(fast5_files):
            (folder / f"{i}_{Path(path).name}").symlink_to(Path(path).absolute())
        dirs = [str(folder)]
    command = nanopolish_index_command(reads, dirs, blow5)
    with vbz_plugin_env(sys.stderr):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run(command, shell=True, check=True, stdout=sys.stderr, env=env)


def indexed_reads(cut: Slice, mode: str, folder: Path, processes: int) -> Path:
    """The slice's reads in folder with nanopolish's index of their signal as the I/O mode
    reads it (slow5: the slice's read groups converted to folder/slice.blow5 first): what the
    calling's cells under that mode read (tune_strategy.tune_calling)."""
    from numapore.signal.convert import convert

    folder.mkdir(parents=True)
    reads = folder / cut.reads.name
    reads.symlink_to(cut.reads.absolute())
    blow5 = None
    if io_mode(mode).converts_signal:
        blow5 = folder / "slice.blow5"
        convert(cut.files, blow5, processes=processes, progress=None, first_groups=cut.groups)
    signal_index(reads, cut.files, blow5)
    return reads


def measure_mode(
    cut: Slice,
    mode: str,
    cell: Path,
    run_calls: Callable[[Path, Path, str, Path], Any],
    processes: int,
) -> dict[str, float]:
    """One cell: what the mode adds to a run, on the slice, timed part by part, each fixed cost
    apart where the run pays it once (whole_run_seconds): the conversion to BLOW5 (slow5; of
    one read first: its start), nanopolish's index (slow5: of that one-read BLOW5 first), the
    calls (run_calls(reads, bam, mode, folder): into folder's calls.tsv and record.json; of the
    slice's first read first, in cell/start: nanopolish's start)."""
    from numapore.signal.convert import convert

    start = cell / "start"
    start.mkdir(parents=True)
    reads = cell / cut.reads.name
    reads.symlink_to(cut.reads.absolute())
    marks = [time.monotonic()]  # each part ends where the next begins: the parts sum to the wall
    names = []
    blow5 = None
    if io_mode(mode).converts_signal:
        first = cut.files[0]
        convert([first], start / "start.blow5", processes=processes, progress=None,
                first_groups={first: 1})  # fmt: skip
        marks.append(time.monotonic())
        blow5 = cell / "slice.blow5"
        convert(cut.files, blow5, processes=processes, progress=None, first_groups=cut.groups)
        marks.append(time.monotonic())
        (start / cut.reads.name).symlink_to(cut.reads.absolute())
        signal_index(start / cut.reads.name, [], start / "start.blow5")
        marks.append(time.monotonic())
        names = ["convert_start_s", "convert_s", "index_start_s"]
    signal_index(reads, cut.files, blow5)
    marks.append(time.monotonic())
    run_calls(reads, cut.first_bam, mode, start)
    marks.append(time.monotonic())
    run_calls(reads, cut.bam, mode, cell)
    marks.append(time.monotonic())
    names += ["index_s", "call_start_s", "call_s"]
    parts = {n: b - a for n, a, b in zip(names, marks[:-1], marks[1:], strict=True)}
    parts["wall_s"] = marks[-1] - marks[0]
    return {k: round(v, 3) for k, v in parts.items()}


def tune(
    cut_at: Callable[[int], Slice],
    first_reads: int,
    candidates: Sequence[str],
    repeats: int,
    share: float,
    min_measurable: float,
    run_calls: Callable[[Path, Path, str, Path], Any],
    processes: int,
    log: Callable[[str], None] = print,
    total_files: int = 0,
    call_jobs: int = 1,
    saving_s: float = 0.0,
) -> dict[str, Any]:
    """A first quick cell (the baseline on a slice of first_reads reads; cut_at(n) cuts and
    aligns a slice of n reads) sizes the slice (slice_size) or says that measuring would cost
    more than `share` of the whole run; then every candidate is measured on the slice (order)
    and the rule decides (decide) on each cell's time scaled to the whole run (whole_run_seconds;
    total_files: the sample's signal files, 0: the slice's; processes: the conversion's and
    fast5-pool's readers; call_jobs: the run's call jobs of the sample; saving_s: what the
    storage probe predicts the baseline spends reading, which may raise the cap). Returns the
    record's measured part: the probe, the cells, the walls per mode on the slice and their
    estimates for the whole run, the chosen mode (None: not measured), why, and the slice."""
    plan = order(candidates, repeats)

    def probe(cut: Slice) -> dict[str, float]:
        return measure_mode(cut, BASELINE, cut.workdir / "probe", run_calls, processes)

    cut, parts, want, sized = IO.first_cell(
        cut_at, first_reads, probe, len(plan), share, min_measurable, log, saving_s
    )
    result = {"probe": {"reads": cut.count, **parts}, "sizing": sized}
    if not want:
        return result | {"walls": {}, "cells": [], "io_mode": None, "why": sized, "slice": cut}
    if want > cut.count:
        cut = cut_at(want)
    files = len(cut.files)

    def measure(mode: str, repeat: int) -> dict[str, float]:
        parts = measure_mode(cut, mode, cut.workdir / f"{mode}.r{repeat}", run_calls, processes)
        run_s = whole_run_seconds(
            parts, cut.count, files, cut.total, total_files or files, processes, call_jobs
        )
        return parts | {"run_s": round(run_s, 1)}

    cells, walls = IO.run_cells(candidates, repeats, measure, log, f" on {cut.count} reads")
    estimates = {m: [c["run_s"] for c in cells if c["io_mode"] == m] for m in candidates}
    chosen, why = decide(walls, min_measurable, estimates)
    return result | {
        "cells": cells, "walls": walls, "estimates": estimates, "io_mode": chosen, "why": why,
        "slice": cut,
    }  # fmt: skip
