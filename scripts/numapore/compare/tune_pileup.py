"""Host tuning of the pileup (`tune: on`): how the pileup's jobs split the genome (regions: the
pileup_shard jobs, scatter.pileup) and how many threads each takes, measured on a window of the
tuned sample's modBAM with the real engine (`numapore pileup`, each shard a process of its own,
as the run's jobs are), against the run's untuned setting by the comparison's honest rule
(numapore.compare.recommend.beats); the run's pileup jobs follow the winner (checkpoint
tune_pileup, rules/tune.smk). The one place for the pileup's tuning decision: the candidates,
the window and its size, the estimate of the whole pileup, the cap, the cache key, the files.

Candidates (regions, threads), the simpler first: the baseline, what the run does untuned (the
host file's `pileup:` section, else scatter.pileup regions with the job's threads); one job of
one thread; the genome split into `cores` jobs of one thread each, run at once. One that is the
same command as an earlier one (on one core: all) is dropped.

The workflow imports this module at DAG time: it stays free of heavy imports.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from numapore.compare import tuner
from numapore.compare.tuner import CELLS_OF_CAP, order

# A pileup tuning file's format; a file of another is measured anew.
FORMAT = 1
# The first cell's window: the engine's work unit (pileup_common.DEFAULT_INTERVAL bases).
FIRST_WINDOW = 100_000
# Windows tried at most while sizing (each a baseline cell): the first, then grown.
SIZING_ROUNDS = 4
NOUN = "pileup setting"


def label(setting: Sequence[int]) -> str:
    """A candidate's name in the record and the log: '2 regions x 1 thread'."""
    regions, threads = setting
    return f"{regions} region{'s' * (regions > 1)} x {threads} thread{'s' * (threads > 1)}"


def files(folder: str, name: str = "") -> dict[str, str]:
    """The pileup's tuning record (JSON) and its adoptable host file (YAML), beside host
    tuning's (numapore.compare.tuning.tuning_files; name: tuning_name()): <name>.pileup.json,
    <name>.pileup.yaml."""
    return PILEUP.files(folder, name)


def candidates(
    regions: int, threads: int, cores: int
) -> tuple[list[tuple[int, int]], dict[str, str]]:
    """The settings to measure, the baseline (regions, threads: what the run does untuned)
    first, then one job of one thread and the genome split into `cores` jobs of one thread each
    (run at once); those left out with why (the same command as an earlier one)."""
    threads = max(1, min(threads, cores))
    kept: list[tuple[int, int]] = []
    dropped = {}
    for setting in [(regions, threads), (1, 1), (cores, 1)]:
        if setting in kept:
            dropped[label(setting)] = "the same command as an earlier candidate"
        else:
            kept.append(setting)
    return kept, dropped


def at_once(setting: Sequence[int], cores: int) -> int:
    """The shard jobs of a setting that run at once on `cores` cores (Snakemake's scheduling:
    each holds its threads)."""
    regions, threads = setting
    return max(1, min(regions, cores // max(1, threads)))


def decide(walls: Mapping[str, Sequence[float]], baseline: str, floor_s: float) -> tuple[str, str]:
    """The setting to run and why: the fastest median among those that beat the baseline by the
    honest rule (recommend.beats), else the baseline; the baseline's cells must each run at
    least floor_s (the comparison's MIN_MEASURABLE_S)."""
    return PILEUP.decide(walls, floor_s, baseline=baseline)


def window_regions(
    contigs: Sequence[tuple[str, int]], size: int, at: tuple[int, int] = (0, 0)
) -> list[tuple[str, int, int]]:
    """`size` bases of the genome (contigs in the BAM's order) from `at` (contig index,
    position) on, as (name, start, end)."""
    out = []
    first, pos = at
    for name, length in contigs[first:]:
        if size <= 0:
            break
        end = min(length, pos + size)
        out.append((name, pos, end))
        size -= end - pos
        pos = 0
    return out


def first_mapped(bam, contigs: Sequence[tuple[str, int]]) -> tuple[int, int]:
    """Where the window starts: the engine's work unit (FIRST_WINDOW bases) that holds the
    modBAM's first mapped record (contig index, position); the genome's start without one."""
    for index, (name, _) in enumerate(contigs):
        for record in bam.fetch(name):
            if not record.is_unmapped:
                return index, record.reference_start // FIRST_WINDOW * FIRST_WINDOW
    return 0, 0


def split(window: Sequence[tuple[str, int, int]], parts: int) -> list[list[str]]:
    """A window split into `parts` consecutive shares of equal bases (as scatter_regions splits
    the genome), each a list of regions 'name:start-end' (a share may be empty)."""
    total = sum(e - s for _, s, e in window)
    size = max(1, math.ceil(total / parts))
    shares: list[list[str]] = [[] for _ in range(parts)]
    done = 0
    for name, start, end in window:
        pos = start
        while pos < end:
            share = min(done // size, parts - 1)
            upto = min(end, pos + (share + 1) * size - done)
            shares[share].append(f"{name}:{pos}-{upto}")
            done += upto - pos
            pos = upto
    return shares


def whole_seconds(
    probes: Sequence[tuple[int, float]], total_records: int, jobs: int
) -> tuple[float, str]:
    """The whole pileup estimated from the baseline's cells on windows (records, seconds): per
    job, a fixed start and the rest by mapped records (the BAM index's count; two windows of
    different records tell them apart, one window counts its start in its records), times the
    run's pileup jobs (samples x motifs, taken alike); with how, in words."""
    (r2, t2), fixed = probes[-1], 0.0
    earlier = [(r, t) for r, t in probes[:-1] if r != r2]
    if earlier:
        r1, t1 = earlier[-1]
        per = max(0.0, (t2 - t1) / (r2 - r1))
        fixed = min(t2, max(0.0, t2 - per * r2))
    if not r2:  # a window of no record: all of it the start
        fixed = t2
    per_record = (t2 - fixed) / max(1, r2)
    job = fixed + per_record * total_records
    how = (
        f"{job:.1f} s a job ({fixed:.2f} s start, {per_record * 1000:.3f} ms a record x "
        f"{total_records:,} mapped records) x {jobs} pileup job{'s' * (jobs > 1)}"
    )
    return job * jobs, how


def run_cell(
    bam: str,
    arguments: Sequence[str],
    setting: Sequence[int],
    window: Sequence[tuple[str, int, int]],
    cores: int,
    folder: Path,
) -> tuple[float, bytes]:
    """One cell: the window piled up by the real engine under a setting, each of its regions'
    shares a `numapore pileup` process of its own with the setting's threads, as many at once
    as the run's shard jobs would run; its wall and its rows (the shares' texts in order)."""
    regions, threads = setting
    folder.mkdir(parents=True)
    shares = split(window, regions)
    limit = at_once(setting, cores)
    running: list[tuple[subprocess.Popen, Any]] = []
    start = time.monotonic()
    for i, share in enumerate(shares):
        while len(running) >= limit:
            wait(running.pop(0))
        out = folder / f"{i + 1}-of-{regions}.bed"
        argv = [sys.executable, "-m", __name__, json.dumps(share), bam, str(out), *arguments]
        argv += ["--threads", str(threads), "--read-listing", str(out.with_suffix(".reads.tsv"))]
        log = open(out.with_suffix(".log"), "w")
        running.append((subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), log))
    for item in running:
        wait(item)
    wall = time.monotonic() - start
    rows = b"".join((folder / f"{i + 1}-of-{regions}.bed").read_bytes() for i in range(regions))
    return round(wall, 3), rows


def wait(item: tuple[subprocess.Popen, Any]) -> None:
    """Wait for a cell's process; RuntimeError naming its log when it failed."""
    process, log = item
    status = process.wait()
    log.close()
    if status:
        tail = Path(log.name).read_text().strip().splitlines()[-1:] or ["?"]
        raise RuntimeError(f"pileup cell failed ({log.name}): {tail[0]}")


def tune(
    bam: str,
    arguments: Sequence[str],
    settings: Sequence[tuple[int, int]],
    cores: int,
    jobs: int,
    repeats: int,
    share: float,
    floor_s: float,
    folder: Path,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure the settings on a window of the modBAM (arguments: the run's `numapore pileup`
    options but --threads) and decide. A first cell (the baseline on the first FIRST_WINDOW
    bases) sizes the window, grown until a baseline cell runs 1.5 x floor_s (at most
    SIZING_ROUNDS cells, never past the genome); the whole pileup (all `jobs` of the run) is
    estimated from them (whole_seconds). Not measured: a whole under the least measurement
    (every cell floor_s), or cells costing more than CELLS_OF_CAP of `share` of it. Then every
    setting `repeats` times in alternating order (compare.tuner.order); each cell's rows must
    equal the baseline's (RuntimeError otherwise). The record's measured part."""
    import pysam

    with pysam.AlignmentFile(bam) as handle:
        contigs = list(zip(handle.references, handle.lengths, strict=True))
        total_records = handle.mapped

        def records(window):
            return sum(handle.count(n, s, e) for n, s, e in window)

        at = first_mapped(handle, contigs)
        genome = sum(length for _, length in contigs[at[0] :]) - at[1]
        names = [label(s) for s in settings]
        plan = order(names, repeats)
        least = len(plan) * floor_s
        target = 1.5 * floor_s
        size, probes, spent, rows = min(FIRST_WINDOW, genome), [], 0.0, b""
        result: dict[str, Any] = {"candidates": names, "cells": [], "walls": {}, "sizing": []}
        for round_ in range(SIZING_ROUNDS):
            window = window_regions(contigs, size, at)
            folder_r = folder / f"window{round_ + 1}"
            wall, rows = run_cell(bam, arguments, settings[0], window, cores, folder_r)
            count = records(window)
            probes.append((count, wall))
            spent += wall
            result["sizing"].append({"bases": size, "records": count, "wall_s": wall})
            log(f"tuning: pileup: {names[0]} on {size:,} bases ({count:,} records): {wall:.2f} s")
            whole, how = whole_seconds(probes, total_records, jobs)
            if wall >= target or size >= genome:
                break
            if whole < least or spent + len(plan) * target > CELLS_OF_CAP * share * whole:
                break  # growing would not change the answer: not measured
            if round_ == SIZING_ROUNDS - 1:
                break
            grow = target / max(wall, 1e-3) * 1.2
            if len(probes) > 1 and probes[-2][0] != count:
                fixed = max(0.0, wall - (wall - probes[-2][1]) / (count - probes[-2][0]) * count)
                grow = (target - fixed) / max(wall - fixed, 1e-3) * 1.2
            size = min(genome, math.ceil(size * min(64.0, max(2.0, grow))))
        result |= {"whole_s": round(whole, 1), "whole": how, "total_records": total_records}
        spans = [f"{n}:{s}-{e}" for n, s, e in window]
        result["slice"] = {"bam": bam, "bases": size, "records": probes[-1][0],
                           "contigs": len(window), "from": spans[0], "to": spans[-1]}  # fmt: skip
    cells_s = len(plan) * max(probes[-1][1], target)
    if whole < least:
        why = (
            f"not measured: the whole pileup, estimated at {whole:.1f} s ({how}), is less than "
            f"the least measurement ({len(plan)} cells of at least {floor_s:g} s: {least:g} s)"
        )
        return result | {"choice": None, "why": why}
    if spent + cells_s > CELLS_OF_CAP * share * whole:
        why = (
            f"not measured: {len(plan)} cells of about {max(probes[-1][1], target):.1f} s and "
            f"the sizing's {spent:.1f} s would take more than {CELLS_OF_CAP:.0%} of the "
            f"{share:.0%} cap on the whole pileup's {whole:.1f} s, estimated ({how})"
        )
        return result | {"choice": None, "why": why}
    last = {"rows": rows}

    def measure(name: str, repeat: int) -> dict[str, float]:
        cell = folder / f"{name.replace(' ', '')}.r{repeat}"
        wall, last["rows"] = run_cell(bam, arguments, settings[names.index(name)], window, cores,
                                      cell)  # fmt: skip
        return {"wall_s": wall}

    def check(name: str) -> None:
        if last["rows"] != rows:
            raise RuntimeError(
                f"tuning: pileup: {name}'s bedMethyl rows differ from {names[0]}'s on "
                f"{result['slice']['from']} to {result['slice']['to']}: the setting changed "
                "the output"
            )

    # the last sizing cell ran the baseline's first one
    done = {(names[0], 1): {"wall_s": probes[-1][1]}}
    result["cells"], walls = PILEUP.run_cells(names, repeats, measure, log, "", done, check)
    scale = whole / max(1e-9, statistics.median(walls[names[0]]))
    chosen, why = decide(walls, names[0], floor_s)
    return result | {
        "walls": walls,
        "estimates": {n: [round(w * scale, 1) for w in ws] for n, ws in walls.items()},
        "rows": rows.count(b"\n"),
        "choice": chosen,
        "why": why,
    }


def setting_of(name: str, settings: Sequence[Sequence[int]]) -> dict[str, int]:
    """A candidate's name back to its {regions, threads}."""
    regions, threads = next(s for s in settings if label(s) == name)
    return {"regions": regions, "threads": threads}


def chosen(record: Mapping[str, Any]) -> dict[str, int]:
    """The {regions, threads} a pileup tuning record chose (the baseline when not measured)."""
    return dict(record["pileup"])


def host_yaml(base: Mapping[str, Any], record: Mapping[str, Any], base_file: str) -> str:
    """The host file to adopt (config/hosts/<hostname>.yaml): the base host file (host
    tuning's, when it ran, else the run's) with the pileup's choice as its `pileup:` section,
    the measurements and the reason as comments."""
    lines = [
        f"# numapore: pileup tuned on {record['host']} ({record['measured']}), from {base_file}.",
        f"# Pileup: {label(list(chosen(record).values()))}: {record['why']}",
        *tuner.wall_comments(record.get("walls", {}), {}),
    ]
    return tuner.adoptable(base, {"pileup": chosen(record)}, lines)


# The pileup's tuner: its differences from the other tuners (compare.tuner).
PILEUP = tuner.Tuner(
    noun=NOUN,
    cell_key="setting",
    log_prefix="pileup: ",
    format=FORMAT,
    suffix=".pileup",
    show=lambda parts: f"{parts['wall_s']:.2f} s",
    said=lambda record: label(list(chosen(record).values())),
)


def cell_main(argv: Sequence[str]) -> int:
    """A cell's process: `python -m numapore.compare.tune_pileup REGIONS_JSON IN.bam OUT.bed
    OPTIONS...`, the pileup of those regions (a scatter share's, as rule pileup_shard runs)."""
    from numapore.pileup import cli as pileup_cli

    regions = json.loads(argv[0])
    if not regions:  # an empty share: no rows, as a shard job without regions writes
        Path(argv[2]).write_text("")
        return 0
    return pileup_cli.run(pileup_cli.parse(list(argv[1:])), regions)


if __name__ == "__main__":
    sys.exit(cell_main(sys.argv[1:]))
