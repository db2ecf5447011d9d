"""The one shape of host tuning's tuners (config `tune`): the I/O mode (numapore.compare.tuning),
the NUMA strategies of the alignment and the calling (tune_strategy), the pileup's regions x
threads (tune_pileup). Each measures its candidates in cells on a slice of the tuned sample,
in alternating order (order), the simpler candidate first; the comparison's honest rule decides
against that baseline (numapore.compare.recommend.choose); the choice is recorded (a JSON
record the run reads, reused while its cache key holds, and a host file the user can adopt).
A tuner states what differs as data (Tuner) and measures its own cells.

The workflow imports this module at DAG time (the cache check): it stays free of heavy imports.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from numapore.base.atomic import atomic_output
from numapore.base.errors import InputError
from numapore.compare.recommend import choose
from numapore.execution.cluster import PARTITION_ENV as PARTITION_ENV

# The share of the cap the cells may take: the rest is the tuning's own fixed costs (its job's
# start, the slices' alignment, nanopolish loading the reference), which the cells do not time.
CELLS_OF_CAP = 0.5
# The share of the storage probe's predicted reading time (what slow storage costs the baseline,
# the most any I/O mode can save: numapore.compare.tuning.pays_back) the tuning may spend, when
# that is more than `tuning.share` of the whole run: on slow storage a short run can save most
# of its time, and the run's length alone would forbid the measurement that finds it.
SAVING_SHARE = 0.5
MODES = ("off", "on", "again")
# The run's tuning name, from its main process to its jobs' (which parse the workflow again on
# a cluster node, where the executor is another and the hostname the node's).
NAME_ENV = "NUMAPORE_TUNING_NAME"
COPY_LINE = "# Copy into config/hosts/<hostname>.yaml to run so without tuning."


def settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The run's tuning settings: config `tuning:` with `mode` from config `tune` (off, on,
    again). InputError naming the key for another value (the schema checks the section)."""
    mode = str(config.get("tune", "off"))
    if mode not in MODES:
        raise InputError(f"config tune: {mode!r} is not one of {', '.join(MODES)}")
    return {**config["tuning"], "mode": mode}


def host_name() -> str:
    """This machine's short hostname (its host file's name in config/hosts/ too, where
    numapore finds it by itself): the tuning files' name on a local run."""
    return socket.gethostname().split(".")[0]


def tuning_name(config: Mapping[str, Any] | None = None, executor: str = "") -> str:
    """The name the tuning files carry: what a tuning holds for. A cluster run (the slurm
    executor, host_check: jobs or a partition in PARTITION_ENV: what profiles/slurm sets)
    measures on a node of the partition its jobs go to, and a partition is one node type:
    `partition-<name>` from PARTITION_ENV (the profile's partition of every job),
    `partition-default` without it (the cluster's default). So a partition is tuned once,
    whichever of its nodes measured and wherever the run was submitted from. A local run:
    host_name(). A job's process takes its run's name from NAME_ENV (its main process's)."""
    if os.environ.get(NAME_ENV):
        return os.environ[NAME_ENV]
    cluster = (config or {}).get("host_check") == "jobs" or executor == "slurm"
    if not (cluster or os.environ.get(PARTITION_ENV)):
        return host_name()
    return partition_tuning_name(os.environ.get(PARTITION_ENV) or "default")


def partition_tuning_name(partition: str) -> str:
    """The tuning files' name of a partition (one node type): partition-<name>."""
    return "partition-" + re.sub(r"[^A-Za-z0-9._-]", "_", partition)


def cached(record_path: str | os.PathLike, key: Mapping[str, Any]) -> tuple[dict | None, str]:
    """The tuning record to reuse (None: measure) and why, in words."""
    path = Path(record_path)
    if not path.is_file():
        return None, f"nothing measured yet: no {path}"  # the host's record, or its pileup's
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, f"{path} is unreadable"
    old = record.get("key", {})
    changed = [k for k in key if old.get(k) != key[k]]
    if changed:
        return None, f"{', '.join(changed)} changed since {path} was measured"
    return record, f"reusing {path} (measured {record.get('measured', '?')}): no measurement"


def again(mode: str) -> int:
    """A tuning job's param for tune=again: one that differs from the last run's (so Snakemake
    runs the job again); 0 otherwise."""
    return time.time_ns() if mode == "again" else 0


def order(candidates: Sequence[str], repeats: int) -> list[tuple[str, int]]:
    """The cells in run order: repeat 1 in the candidates' order, repeat 2 reversed, ... (a
    drifting load falls on no mode in particular; the baseline first: the quick first cell)."""
    cells = []
    for repeat in range(1, repeats + 1):
        modes = list(candidates) if repeat % 2 else list(reversed(candidates))
        cells += [(mode, repeat) for mode in modes]
    return cells


def slice_size(
    probe_s: float,
    probe_reads: int,
    total_reads: int,
    cells: int,
    share: float,
    floor_s: float,
    saving_s: float = 0.0,
) -> tuple[int, str]:
    """The slice's reads, sized from a first quick cell (the baseline on probe_reads reads,
    probe_s seconds): enough that a baseline cell runs 1.5 x floor_s (the comparison's
    MIN_MEASURABLE_S), at least probe_reads; 0 when the cells and the first one would cost more
    than CELLS_OF_CAP of the cap, with the reason in words. The cap: `share` of the whole run
    (the baseline's time per read x the sample's reads), or SAVING_SHARE of saving_s (what the
    storage probe predicts the baseline spends reading, the most a candidate can save) when
    that is more."""
    per_read = probe_s / max(1, probe_reads)
    want = probe_reads
    if probe_s < floor_s:
        want = math.ceil(1.5 * floor_s / per_read) if per_read else total_reads
    want = min(want, total_reads)
    whole = per_read * total_reads
    cost = probe_s + per_read * want * cells
    by_run, by_saving = share * whole, SAVING_SHARE * saving_s
    cap = f"the {share:.0%} cap on the whole run's {whole:.1f} s"
    if by_saving > by_run:
        cap = (
            f"the cap of {by_saving:.1f} s ({SAVING_SHARE:.0%} of the {saving_s:.1f} s the "
            f"storage probe predicts the baseline spends reading; {share:.0%} of the whole "
            f"run's {whole:.1f} s is less)"
        )
    if cost > CELLS_OF_CAP * max(by_run, by_saving):
        return 0, (
            f"measuring {cells} cells of {want} reads would take about {cost:.1f} s, more than "
            f"{CELLS_OF_CAP:.0%} of {cap} (estimated from a first cell of {probe_s:.2f} s on "
            f"{probe_reads} of {total_reads} reads): not measured"
        )
    sized = f"{cells} cells of {want} reads, about {cost:.1f} s of the run's {whole:.1f} s"
    return want, sized + (f", within {CELLS_OF_CAP:.0%} of {cap}" if by_saving > by_run else "")


@dataclass(frozen=True)
class Tuner:
    """What sets a tuner apart from the others, as data: the candidates in the decision's words
    (noun), the key naming a cell's candidate in its record (cell_key), its log lines' prefix,
    the baseline ('': the first candidate, given to decide), its record's format and its files'
    suffix (0 and '': its blocks go into another tuner's record), a cell's parts in its log
    line (show) and its record's choice in words (said, for the cache check). What it measures
    and how its choice goes into the host file stay its own functions (a cell, host_yaml)."""

    noun: str
    cell_key: str
    log_prefix: str = ""
    baseline: str = ""
    format: int = 0
    suffix: str = ""
    show: Callable[[Mapping[str, Any]], str] = str
    said: Callable[[Mapping[str, Any]], str] = str

    def files(self, folder: str | os.PathLike, name: str = "") -> dict[str, str]:
        """The tuning record (JSON, read by the run) and the adoptable host file (YAML), named
        `name` (tuning_name(); default host_name()) and the tuner's suffix."""
        stem = f"{folder}/{name or host_name()}{self.suffix}"
        return {"record": f"{stem}.json", "host": f"{stem}.yaml"}

    def cache(
        self, record_path: str | os.PathLike, key: Mapping[str, Any], mode: str
    ) -> tuple[dict | None, str, int]:
        """The cache check of a run's plan: the record to reuse (cached; the caller measures
        anew on tune=again all the same), why in words (with the reused choice), and the
        tuning job's `again` param."""
        reuse, why = cached(record_path, key)
        if mode == "again":
            why = "tune=again: measuring anew"
        elif reuse is not None:
            why += f"; {self.said(reuse)} ({reuse['why']})"
        return reuse, why, again(mode)

    def say(self, log: Callable[[str], None], text: str) -> None:
        log(f"tuning: {self.log_prefix}{text}")

    def decide(
        self,
        walls: Mapping[str, Sequence[float]],
        floor_s: float,
        estimates: Mapping[str, Sequence[float]] | None = None,
        baseline: str = "",
    ) -> tuple[str, str]:
        """The candidate to run and why: recommend.choose against the baseline (the tuner's,
        or `baseline`)."""
        return choose(walls, baseline or self.baseline, self.noun, floor_s, estimates)

    def first_cell(
        self,
        cut_at: Callable[[int], Any],
        first: int,
        probe: Callable[[Any], dict[str, float]],
        cells: int,
        share: float,
        floor_s: float,
        log: Callable[[str], None],
        saving_s: float = 0.0,
    ) -> tuple[Any, dict[str, float], int, str]:
        """A first quick cell, the baseline on a slice of `first` reads (cut_at(n) cuts one of
        n reads; probe(cut) measures the baseline on it), sizes the slice of `cells` cells
        (slice_size; saving_s: the most a candidate can save, as predicted before any job):
        that slice, the cell's parts, the reads wanted (0: measuring would cost more than the
        cap) and the sizing in words."""
        cut = cut_at(first)
        parts = probe(cut)
        self.say(log, f"first cell, {self.baseline} on {cut.count} of {cut.total} reads: {parts}")
        want, sized = slice_size(
            parts["wall_s"], cut.count, cut.total, cells, share, floor_s, saving_s
        )
        self.say(log, sized)
        return cut, parts, want, sized

    def run_cells(
        self,
        candidates: Sequence[str],
        repeats: int,
        measure: Callable[[str, int], dict[str, float]],
        log: Callable[[str], None],
        on: str = "",
        done: Mapping[tuple[str, int], dict[str, float]] | None = None,
        check: Callable[[str], None] | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
        """Every cell in run order (order): measure(candidate, repeat) its parts (wall_s among
        them), logged (`on`: what it ran on, in words); done: the parts of cells the sizing ran
        already (not run again, not logged); check(candidate) after the log (raising when the
        cell's output is wrong). The record's cells and the walls per candidate."""
        cells, walls = [], {c: [] for c in candidates}
        for candidate, repeat in order(candidates, repeats):
            parts = (done or {}).get((candidate, repeat))
            if parts is None:
                parts = measure(candidate, repeat)
                self.say(log, f"{candidate} repeat {repeat}{on}: {self.show(parts)}")
                if check is not None:
                    check(candidate)
            cells.append({self.cell_key: candidate, "repeat": repeat, **parts})
            walls[candidate].append(parts["wall_s"])
        return cells, walls

    def record(
        self, record_path: str | os.PathLike, host_file: str, key: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A tuning record's head: its format, the machine that measured (on a cluster, a
        partition's node), the name it holds for (tuning_name), when, from which host file and
        its cache key."""
        return {
            "format": self.format,
            "host": host_name(),
            "name": Path(record_path).name.removesuffix(f"{self.suffix}.json"),
            "measured": datetime.now(UTC).isoformat(timespec="seconds"),
            "host_file": host_file,
            "key": key,
        }


def read_record(path: str | os.PathLike) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def write(
    files: Mapping[str, str | os.PathLike],
    record: dict[str, Any],
    host_yaml: Callable[[Mapping[str, Any], Mapping[str, Any], str], str],
    base_file: str,
    started: float,
) -> None:
    """A tuning's files (files: record, host): its time since `started` (time.monotonic) into
    the record, the adoptable host file (host_yaml(base, record, base_file), the base read
    from base_file), then the record."""
    import yaml

    record["seconds"] = round(time.monotonic() - started, 2)
    base = yaml.safe_load(Path(base_file).read_text()) or {}
    with atomic_output(Path(files["host"])) as tmp:
        tmp.write_text(host_yaml(base, record, base_file))
    with atomic_output(Path(files["record"])) as tmp:
        tmp.write_text(json.dumps(record, indent=2) + "\n")


def adoptable(base: Mapping[str, Any], chosen: Mapping[str, Any], comments: Sequence[str]) -> str:
    """A host file the user can adopt as it is (config/hosts/<hostname>.yaml): the base host
    file's settings with the tuning's choices, the measurements and reasons as comments."""
    import yaml

    data = json.loads(json.dumps(dict(base)))
    data.update(chosen)
    lines = [*comments, COPY_LINE]
    return "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False)


def wall_comments(
    walls: Mapping[str, Sequence[float]], estimates: Mapping[str, Sequence[float]]
) -> list[str]:
    """The host file's comment lines of a tuning's measured candidates: their walls on the
    slice, and their estimates for the whole run when there are."""
    lines = []
    for name, cells in walls.items():
        if cells:
            whole = ", ".join(f"{w:.0f} s" for w in estimates.get(name, []))
            lines.append(
                f"#   {name}: " + ", ".join(f"{w:.2f} s" for w in cells)
                + (f" on the slice; the whole run, estimated: {whole}" if whole else "")
            )  # fmt: skip
    return lines


def add_to_run_record(
    run_record: Path,
    key: str,
    tuning_record: Path,
    picked: Callable[[Mapping[str, Any]], dict[str, Any]],
) -> None:
    """Add the tuning behind a job's setting to its run record (the provenance page shows
    it), under `key`: the tuning file and picked(its record)."""
    record = json.loads(run_record.read_text())
    record[key] = {"record": str(tuning_record)} | picked(read_record(tuning_record))
    run_record.write_text(json.dumps(record, indent=2) + "\n")
