"""The strategy comparison: a matrix of benchmark cells, each one heavy step run once with one
strategy, I/O mode and thread count, and what is made of their measurements.

A cell is named `<step>.<aligner>.<strategy>.<io_mode>.t<threads>.r<repeat>` (io_mode `na` for
alignment). Its measurements come from three raw files: the launcher's run record (wall and exact
CPU seconds of the tool processes), `/usr/bin/time -v` around the whole cell (maximum RSS) and
Snakemake's benchmark file (the job's wall seconds). The summary is computed from those files
only, so a test can recompute it.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from numapore.run.atomic import atomic_output
from numapore.execution.probe import parse_numactl_show, parse_proc_status
from numapore.execution.topology import format_cpulist

STEPS = ("alignment", "methylation")
NOT_APPLICABLE = "na"
# The baseline each cell's speed-up is measured against (same step, aligner, threads).
BASELINE = {"strategy": "none", "io_mode": "fast5"}
CELL_PATTERN = re.compile(
    r"^(?P<step>alignment|methylation)\.(?P<aligner>[a-z0-9]+)\.(?P<strategy>[a-z]+)"
    r"\.(?P<io_mode>[a-z0-9-]+)\.t(?P<threads>\d+)\.r(?P<repeat>\d+)$"
)
SUMMARY_COLUMNS = [
    "step",
    "aligner",
    "strategy",
    "io_mode",
    "threads",
    "repeat",
    "wall_s",
    "cpu_s",
    "cpu_utilisation",
    "core_hours",
    "max_rss_mb",
    "speedup",
    "job_wall_s",
    "storage_latency_ms",
    "storage_disks",
    "storage_requests",
    "placement",
    "too_short",
    "identical_to",
]
# A cell whose tool processes ran for less than this many seconds is too short to measure: start-up
# and scheduling noise is as large as the differences between strategies.
MIN_MEASURABLE_S = 2.0
# What `compare.reads` is sized for when cells are too short: the baseline cell's seconds.
TARGET_CELL_S = 5.0
# The smallest effect a recommendation stands on, as a fraction of the simpler one's time.
MIN_EFFECT = 0.05


@dataclass(frozen=True)
class Cell:
    """One benchmark cell: a step with one aligner, strategy, I/O mode, thread count, repeat."""

    step: str
    aligner: str
    strategy: str
    io_mode: str
    threads: int
    repeat: int

    @property
    def name(self) -> str:
        """The cell's name, used in its file paths."""
        return (
            f"{self.step}.{self.aligner}.{self.strategy}.{self.io_mode}"
            f".t{self.threads}.r{self.repeat}"
        )

    @property
    def label(self) -> str:
        """What is compared, without threads and repeat (a line in the plots)."""
        if self.step == "alignment":
            return f"{self.aligner} {self.strategy}"
        return f"{self.io_mode} {self.strategy}"

    @classmethod
    def parse(cls, name: str) -> Cell:
        """The cell a name stands for (ValueError for a name that is not a cell's)."""
        match = CELL_PATTERN.match(name)
        if not match:
            raise ValueError(f"{name!r} is not a benchmark cell name")
        fields = match.groupdict()
        return cls(**{**fields, "threads": int(fields["threads"]), "repeat": int(fields["repeat"])})


def matrix(compare: Mapping[str, Any], aligner: str) -> list[Cell]:
    """Every cell of the config's `compare:` block in run order: all cells of repeat 1, then all
    of repeat 2, ... (interleaved, so a slow phase of the machine hits every cell alike).
    Methylation cells use the alignments of `aligner` (the workflow's)."""
    configs = []
    for step in compare["steps"]:
        for threads in compare["threads"]:
            for strategy in compare["strategies"]:
                if step == "alignment":
                    configs += [
                        ("alignment", a, strategy, NOT_APPLICABLE, threads)
                        for a in compare["aligners"]
                    ]
                else:
                    configs += [
                        ("methylation", aligner, strategy, io, threads)
                        for io in compare["io_modes"]
                    ]
    return [
        Cell(*config, repeat)
        for repeat in range(1, compare["repeats"] + 1)
        for config in sorted(set(configs), key=configs.index)
    ]


def cell_host(base: Mapping[str, Any], cell: Cell) -> dict[str, Any]:
    """The host file of a cell: the base host file with the cell's strategy and I/O mode."""
    host = json.loads(json.dumps(dict(base)))  # deep copy of plain YAML data
    host.setdefault("strategy", {})[cell.step] = cell.strategy
    host["description"] = f"benchmark cell {cell.name} (from: {host.get('description', '')})"
    if cell.step == "methylation":
        host["io_mode"] = cell.io_mode
        host.pop("io_processes", None)  # a pool of the cell's threads, one process per thread
    return host


def parse_time_v(text: str) -> dict[str, float]:
    """Wall, user and system seconds and maximum RSS (kB) from GNU time's `-v` report."""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.strip().rpartition(": ")
        fields[key] = value
    try:
        wall = fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")
        return {
            "wall_s": sum(float(part) * 60**i for i, part in enumerate(reversed(wall))),
            "user_s": float(fields["User time (seconds)"]),
            "system_s": float(fields["System time (seconds)"]),
            "max_rss_kb": float(fields["Maximum resident set size (kbytes)"]),
            "exit_status": float(fields.get("Exit status", "0")),
        }
    except (KeyError, ValueError) as err:
        raise ValueError(f"not a complete GNU time -v report (missing {err})") from err


def parse_benchmark(text: str) -> dict[str, float]:
    """The first row of a Snakemake benchmark file as numbers (columns s, max_rss, cpu_time...)."""
    header, row, *_ = text.splitlines()
    values = {}
    for key, value in zip(header.split("\t"), row.split("\t"), strict=True):
        try:
            values[key] = float(value)
        except ValueError:
            values[key] = float("nan")
    return values


def memory_policy(show: Mapping[str, Any], mems_allowed: Sequence[int]) -> str:
    """A process's memory placement in words: its one allowed memory node (any policy then
    places memory there), else the policy in force with its nodes."""
    if len(mems_allowed) == 1:
        return f"node {mems_allowed[0]}"
    policy = str(show.get("policy", "?"))
    nodes = show.get("membind") if policy == "bind" else show.get("interleavemask")
    if policy in ("bind", "interleave") and isinstance(nodes, list):
        return f"{policy} {format_cpulist(nodes)}"
    return policy


def placement(record: Mapping[str, Any]) -> str:
    """Where a cell's tool processes ran, as measured in each (its threads, allowed CPUs and
    memory placement), in words; two cells with the same placement ran the same way."""
    parts = []
    for process in record.get("processes", []):
        if not process.get("policy"):
            return "unknown"  # no policy probe output: never taken as identical to another
        status = parse_proc_status(process["policy"])
        cpus = format_cpulist(status.get("Cpus_allowed_list", ()))
        memory = memory_policy(
            parse_numactl_show(process["policy"]), status.get("Mems_allowed_list", ())
        )
        parts.append(f"{process['threads']}t cpus {cpus} mem {memory}")
    return "; ".join(sorted(parts)) or "unknown"


def cell_row(
    cell: Cell, record: Mapping[str, Any], time_v: Mapping[str, float], benchmark: Mapping
) -> dict[str, Any]:
    """A summary row from a cell's raw measurements: the tool processes' wall and CPU seconds
    (run record), the largest process's RSS (time -v), the job's wall seconds (benchmark), where
    the processes ran (placement) and whether the cell was too short to measure."""
    wall, cpu = record["wall_seconds"], record["cpu_seconds"]
    storage = record.get("storage") or {}
    return {
        **asdict(cell),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "cpu_utilisation": round(cpu / (wall * cell.threads), 3),
        "core_hours": round(cell.threads * wall / 3600, 6),
        "max_rss_mb": round(time_v["max_rss_kb"] / 1024, 1),
        "speedup": float("nan"),
        "job_wall_s": round(benchmark["s"], 3),
        "storage_latency_ms": storage.get("latency_ms", 0),
        "storage_disks": storage.get("disks", 0),
        "storage_requests": storage.get("requests", 0),
        "placement": placement(record),
        "too_short": int(wall < MIN_MEASURABLE_S),
        "identical_to": "",
    }


def summarise(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The summary table: every cell's row, then one `median` row per configuration (median
    over repeats), each with its speed-up: the median wall of the baseline (strategy none,
    I/O mode fast5) with the same step, aligner and threads over its own wall; and
    `identical_to` none when the configuration ran exactly as strategy none did (e.g. every
    strategy on a one-node host)."""
    rows = [dict(r) for r in rows]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["step"], r["aligner"], r["strategy"], r["io_mode"], r["threads"])
        groups.setdefault(key, []).append(r)
    medians = []
    for (step, aligner, strategy, io_mode, threads), members in groups.items():
        median = {
            "step": step,
            "aligner": aligner,
            "strategy": strategy,
            "io_mode": io_mode,
            "threads": threads,
            "repeat": "median",
        }
        for column in SUMMARY_COLUMNS[6:-3]:
            values = [m[column] for m in members]
            median[column] = round(statistics.median(values), 6)
        places = {m["placement"] for m in members}
        median["placement"] = places.pop() if len(places) == 1 else "varied"
        median["too_short"] = int(median["wall_s"] < MIN_MEASURABLE_S)
        median["identical_to"] = ""
        medians.append(median)
    for row in rows + medians:
        base = baseline_of(row, medians)
        row["speedup"] = round(base["wall_s"] / row["wall_s"], 3) if base else float("nan")
    # Same step, aligner, I/O mode and threads, another strategy, the same placement in every
    # repeat: the same command as strategy none on this host, whatever its name.
    for median in medians:
        plain = [m for m in medians if same_but_strategy(m, median, BASELINE["strategy"])]
        if (
            median["strategy"] != BASELINE["strategy"]
            and plain
            and median["placement"] not in ("varied", "unknown")
            and plain[0]["placement"] == median["placement"]
        ):
            median["identical_to"] = BASELINE["strategy"]
            for r in rows:
                if _config(r) == _config(median):
                    r["identical_to"] = BASELINE["strategy"]
    return rows + medians


def same_but_strategy(row: Mapping[str, Any], other: Mapping[str, Any], strategy: str) -> bool:
    """Whether row is other's configuration with the given strategy instead of its own."""
    return row["strategy"] == strategy and all(
        row[k] == other[k] for k in ("step", "aligner", "io_mode", "threads")
    )


def baseline_of(row: Mapping[str, Any], medians: Sequence[Mapping[str, Any]]) -> dict | None:
    """The median row a row's speed-up is measured against, None if the matrix lacks it."""
    io_mode = NOT_APPLICABLE if row["step"] == "alignment" else BASELINE["io_mode"]
    for m in medians:
        if (m["step"], m["aligner"], m["threads"], m["strategy"], m["io_mode"]) == (
            row["step"],
            row["aligner"],
            row["threads"],
            BASELINE["strategy"],
            io_mode,
        ):
            return dict(m)
    return None


def write_tsv(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Write summary rows as a tab-separated table with the summary's columns."""
    lines = ["\t".join(SUMMARY_COLUMNS)]
    lines += ["\t".join(str(r[c]) for c in SUMMARY_COLUMNS) for r in rows]
    with atomic_output(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n")


def read_tsv(path: Path) -> list[dict[str, Any]]:
    """Read a summary table back (numbers as numbers, `median` repeats as text)."""
    header, *lines = path.read_text().splitlines()
    columns = header.split("\t")
    rows = []
    for line in lines:
        row: dict[str, Any] = {}
        for column, value in zip(columns, line.split("\t"), strict=True):
            try:
                row[column] = int(value) if value.isdigit() else float(value)
            except ValueError:
                row[column] = value
        rows.append(row)
    return rows


def fastest(rows: Iterable[Mapping[str, Any]], step: str) -> dict[str, Any] | None:
    """The fastest median configuration of a step at its highest thread count measured."""
    medians = [r for r in rows if r["repeat"] == "median" and r["step"] == step]
    if not medians:
        return None
    top = max(r["threads"] for r in medians)
    return dict(min((r for r in medians if r["threads"] == top), key=lambda r: r["wall_s"]))


def _config(row: Mapping[str, Any]) -> tuple:
    """A row's configuration: everything but the repeat."""
    return tuple(row[k] for k in ("step", "aligner", "strategy", "io_mode", "threads"))


def simpler_configs(row: Mapping[str, Any]) -> list[tuple]:
    """The configurations a row's one simplifies to: strategy none and/or I/O mode fast5
    (same step, aligner and threads), without the row's own."""
    step, aligner, strategy, io_mode, threads = _config(row)
    plain_io = NOT_APPLICABLE if io_mode == NOT_APPLICABLE else BASELINE["io_mode"]
    variants = {
        (step, aligner, s, i, threads)
        for s in {strategy, BASELINE["strategy"]}
        for i in {io_mode, plain_io}
    }
    return sorted(variants - {_config(row)})


def clearly_faster(rows: Sequence[Mapping[str, Any]], config: tuple, than: tuple) -> bool:
    """Whether one configuration was faster than another beyond noise: every repeat faster
    than every repeat of the other (ranges do not overlap), a difference of medians larger
    than either's spread over repeats and at least MIN_EFFECT of the other's median, and no
    cell of either too short to measure."""
    runs = {
        c: [r for r in rows if r["repeat"] != "median" and _config(r) == c] for c in (config, than)
    }
    if any(r["too_short"] for c in runs.values() for r in c):
        return False
    walls = {c: [r["wall_s"] for r in members] for c, members in runs.items()}
    effect = statistics.median(walls[than]) - statistics.median(walls[config])
    spread = max(max(w) - min(w) for w in walls.values())
    return (
        max(walls[config]) < min(walls[than])
        and effect > spread
        and effect >= MIN_EFFECT * statistics.median(walls[than])
    )


def recommended(rows: Sequence[Mapping[str, Any]], step: str) -> dict[str, Any] | None:
    """The configuration to adopt for a step: the fastest median at the highest thread count
    among those clearly faster (clearly_faster) than each simpler configuration measured
    (strategy none, I/O mode fast5), leaving out strategies that ran exactly as none; a
    difference within the repeats' spread, under 5 % or in too short cells is not a reason."""
    best = fastest(rows, step)
    if best is None:
        return None
    measured = {_config(r) for r in rows}
    candidates = [
        r
        for r in rows
        if r["repeat"] == "median"
        and r["step"] == step
        and r["threads"] == best["threads"]
        and not r["identical_to"]
        and all(clearly_faster(rows, _config(r), s) for s in simpler_configs(r) if s in measured)
    ]
    # Empty only when the matrix lacks the baseline and every configuration overlaps another.
    return dict(min(candidates, key=lambda r: r["wall_s"])) if candidates else best


def recommendation(rows: Sequence[Mapping[str, Any]], base_host: str) -> str:
    """A host YAML fragment with the configuration to adopt per step (`recommended`),
    commented with its numbers (the user copies it into config/hosts/<host>.yaml)."""
    lines = [
        "# numapore: configuration per step measured on this host "
        f"(results/compare/summary.tsv; base host file: {base_host}).",
        "# Chosen: the fastest median at the highest thread count that beat the simpler",
        "# configurations (strategy none, I/O mode fast5) in every repeat, by more than the",
        f"# repeats' spread and by >= {MIN_EFFECT:.0%}, in cells of >= {MIN_MEASURABLE_S:g} s; "
        "a strategy that",
        "# ran exactly as none (same processes, CPUs, memory: one NUMA node) is never chosen.",
        "# Copy into config/hosts/<hostname>.yaml (topology and the rest as they are there).",
    ]
    strategy = {}
    io = None
    for step in STEPS:
        best = recommended(rows, step)
        if best is None:
            lines.append(f"# {step}: not in the comparison")
            continue
        what = best["aligner"] if step == "alignment" else f"{best['io_mode']} I/O"
        lines.append(
            f"# {step}: {best['strategy']} ({what}) at {best['threads']} threads: "
            f"{best['wall_s']:.2f} s, x{best['speedup']:.2f} vs none/fast5, "
            f"CPU utilisation {best['cpu_utilisation']:.2f}"
        )
        top = fastest(rows, step)
        if top is not None and _config(top) != _config(best):
            what = top["aligner"] if step == "alignment" else f"{top['io_mode']} I/O"
            why = (
                f"identical to {top['identical_to']} on this host (same processes, CPUs and "
                "memory)"
                if top["identical_to"]
                else (
                    "too short to measure"
                    if top["too_short"]
                    else f"not faster than a simpler configuration by more than the repeats' "
                    f"spread and {MIN_EFFECT:.0%}"
                )
            )
            lines.append(
                f"#   (fastest median: {top['strategy']} ({what}) {top['wall_s']:.2f} s, "
                f"{why}: not recommended)"
            )
        strategy[step] = best["strategy"]
        if step == "methylation":
            io = best["io_mode"]
    if strategy:
        lines.append("strategy:")
        lines += [f"  {step}: {value}" for step, value in strategy.items()]
    if io:
        lines.append(f"io_mode: {io}")
    return "\n".join(lines) + "\n"


def identical_strategies(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Per step, the strategies that ran exactly as strategy none in every configuration
    measured (summarise's identical_to: e.g. all of them on a one-node host)."""
    out: dict[str, list[str]] = {}
    for step in STEPS:
        medians = [r for r in rows if r["repeat"] == "median" and r["step"] == step]
        strategies = dict.fromkeys(r["strategy"] for r in medians if r["identical_to"])
        same = [
            s for s in strategies if all(r["identical_to"] for r in medians if r["strategy"] == s)
        ]
        if same:
            out[step] = same
    return out


def identical_note(rows: Sequence[Mapping[str, Any]]) -> str:
    """The report's lines on strategies that ran as strategy none did ('' if there are none)."""
    lines = []
    for step, strategies in identical_strategies(rows).items():
        names = ", ".join(f"`{s}`" for s in strategies)
        lines.append(
            f"- {step}: {names} ran exactly as `{BASELINE['strategy']}` on this host (the same "
            "processes, threads, CPUs and memory placement, as on a host with one NUMA node): "
            "the same command, so their times differ by noise only. They are identical; none "
            "is recommended over another."
        )
    return "\n".join(lines)


def reads_advice(rows: Sequence[Mapping[str, Any]], reads: int) -> str:
    """The report's lines on cells too short to measure ('' if there are none), with the
    compare.reads that makes the shortest baseline cell last about TARGET_CELL_S seconds (from
    its measured seconds per read; reads: how many reads the cells ran on)."""
    cells = [r for r in rows if r["repeat"] != "median"]
    short = [r for r in cells if r["too_short"]]
    if not short:
        return ""
    lines = [
        f"- {len(short)} of {len(cells)} cells ran for less than {MIN_MEASURABLE_S:g} s "
        "(column `too_short` of summary.tsv): too short to measure, start-up noise is as large "
        "as any difference; no strategy is recommended on them."
    ]
    baselines = [
        r
        for r in rows
        if r["repeat"] == "median"
        and r["strategy"] == BASELINE["strategy"]
        and r["io_mode"] in (NOT_APPLICABLE, BASELINE["io_mode"])
    ]
    if not baselines or reads < 1:
        return "\n".join(lines)
    base = min(baselines, key=lambda r: r["wall_s"])
    per_read = max(base["wall_s"], 1e-3) / reads
    wanted = int(-(-TARGET_CELL_S // per_read))  # ceiling
    total_s = sum(r["wall_s"] for r in cells) * wanted / reads
    what = base["aligner"] if base["step"] == "alignment" else "fast5 I/O"
    lines.append(
        f"- The shortest baseline cell ({base['step']}, {what}, strategy "
        f"`{BASELINE['strategy']}`, {base['threads']} threads) took {base['wall_s']:.2f} s for "
        f"{reads} reads ({per_read * 1000:.2f} ms per read): set `compare.reads` to {wanted} "
        f"so that it runs about {TARGET_CELL_S:g} s (every cell then takes about "
        f"{total_s / 60:.0f} min in all; a sample with fewer reads needs a larger sample, "
        "`compare.sample`)."
    )
    return "\n".join(lines)


def subsample_reads(source: Path, output: Path, n: int) -> list[str]:
    """Write the first n reads of a FASTA/FASTQ (all when n is 0); return their names."""
    import pysam

    names = []
    with pysam.FastxFile(str(source)) as fastx, open(output, "w") as out:
        for record in fastx:
            if n and len(names) == n:
                break
            out.write(str(record) + "\n")
            names.append(record.name)
    return names


def subsample_alignments(source: Path, reads: Path, output: Path) -> int:
    """Write the alignments of the reads in a FASTA/FASTQ (sorted as in source); return count."""
    import pysam

    with pysam.FastxFile(str(reads)) as fastx:
        names = {record.name for record in fastx}
    count = 0
    with pysam.AlignmentFile(str(source)) as bam:
        with pysam.AlignmentFile(str(output), "wb", template=bam) as out:
            for record in bam:
                if record.query_name in names:
                    out.write(record)
                    count += 1
    return count


def signal_files(readdb: Path) -> list[Path]:
    """The raw-signal files a nanopolish read index points at (FAST5 files, or the BLOW5 and
    its .idx), as absolute paths."""
    paths = {Path(line.split("\t")[1]).absolute() for line in readdb.read_text().splitlines()}
    files = set(paths)
    files |= {Path(f"{p}.idx") for p in paths if p.suffix == ".blow5"}
    return sorted(files)


def signal_view(reads: Path, workdir: Path, relocate) -> Path:
    """A copy of nanopolish's view of the reads in workdir whose read index points at the
    signal files where relocate(path) puts them (e.g. under an emulated-storage mount)."""
    workdir.mkdir(parents=True, exist_ok=True)
    view = workdir / reads.name
    for suffix in ("", ".index", ".index.fai", ".index.gzi"):
        target = workdir / f"{reads.name}{suffix}"
        target.unlink(missing_ok=True)
        target.symlink_to(Path(f"{reads}{suffix}").absolute())
    lines = []
    for line in Path(f"{reads}.index.readdb").read_text().splitlines():
        read, path = line.split("\t")
        lines.append(f"{read}\t{relocate(Path(path).absolute())}")
    Path(f"{view}.index.readdb").write_text("\n".join(lines) + "\n")
    return view


def run_cell(request: Mapping[str, Any]) -> dict[str, Any]:
    """Run one cell (what `python -m numapore.compare.matrix REQUEST.json` does under
    /usr/bin/time -v): its host file, the step with the cell's threads, on emulated storage if
    asked; the record (launcher's run record + cell + storage) is written to request['record']."""
    import yaml

    from numapore.execution.hosts import host_config_from_dict
    from numapore.execution.steps import run_alignment, run_methylation

    cell = Cell.parse(request["cell"])
    workdir, record = Path(request["workdir"]), Path(request["record"])
    workdir.mkdir(parents=True, exist_ok=True)
    base = Path(request["host"])
    host = host_config_from_dict(
        cell_host(yaml.safe_load(base.read_text()), cell),
        source=f"{base} (cell {cell.name})", name=cell.name, path=base,
    )  # fmt: skip
    storage = None
    if cell.step == "alignment":
        index_files = [Path(p) for p in request["index_files"]]
        run_alignment(
            host, cell.aligner, request["index"], index_files, Path(request["reads"]),
            workdir / "aligned.bam", cell.threads, record,
        )  # fmt: skip
    else:
        reads, latency = Path(request["reads"]), request["storage"]["latency_ms"]

        def call(reads: Path) -> None:
            """nanopolish on the cell's alignments, one process per thread in fast5-pool."""
            run_methylation(
                host, reads, Path(request["bam"]), Path(request["genome"]), workdir / "calls.tsv",
                cell.threads, request["min_mapq"], cell.io_mode, cell.threads, record,
            )  # fmt: skip

        if latency:
            from numapore.compare.slowfs import mounted

            folders = sorted(
                {p.resolve().parent for p in signal_files(Path(f"{reads}.index.readdb"))}
            )
            sources = {f"source{i}": folder for i, folder in enumerate(folders)}
            with mounted(sources, latency, request["storage"]["disks"]) as mount:
                call(signal_view(reads, workdir / "view", lambda p: mount.path(p.resolve())))
            stats = mount.stats
            storage = {
                "latency_ms": latency,
                "disks": request["storage"]["disks"],
                "requests": stats.read_requests if stats else 0,
                "queue_wait_s": round(stats.queue_wait_s, 3) if stats else 0,
            }
        else:
            call(reads)
    data = json.loads(record.read_text())
    data.update(cell=asdict(cell), storage=storage)
    record.write_text(json.dumps(data, indent=2) + "\n")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the cell described by a JSON request file."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m numapore.compare.matrix REQUEST.json", file=sys.stderr)
        return 2
    run_cell(json.loads(Path(args[0]).read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def pivot_table(rows: Sequence[Mapping[str, Any]], step: str) -> str:
    """A Markdown table of a step's median seconds per thread count, one row per aligner x
    strategy (alignment) or I/O mode x strategy (methylation), with CPU utilisation and the
    speed-up at the highest thread count (the studies' aligner x policy table)."""
    medians = [r for r in rows if r["repeat"] == "median" and r["step"] == step]
    if not medians:
        return f"_{step}: not in the comparison_\n"
    threads = sorted({r["threads"] for r in medians})
    first = "aligner" if step == "alignment" else "I/O mode"
    key = "aligner" if step == "alignment" else "io_mode"
    header = [first, "strategy", *(f"{t} threads (s)" for t in threads)]
    header += [f"CPU util. at {threads[-1]}", f"speed-up at {threads[-1]}"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    configs = sorted({(r[key], r["strategy"]) for r in medians}, key=lambda c: (c[0], c[1]))
    for config in configs:
        cells = {r["threads"]: r for r in medians if (r[key], r["strategy"]) == config}
        top = cells.get(threads[-1])
        values = [f"{cells[t]['wall_s']:.2f}" if t in cells else "-" for t in threads]
        values += [f"{top['cpu_utilisation']:.2f}", f"x{top['speedup']:.2f}"] if top else ["-"] * 2
        same = {r["identical_to"] for r in cells.values()}
        strategy = f"{config[1]} (= {same.pop()})" if same != {""} and len(same) == 1 else config[1]
        lines.append("| " + " | ".join([config[0], strategy, *values]) + " |")
    return "\n".join(lines) + "\n"


def storage_description(rows: Sequence[Mapping[str, Any]]) -> str:
    """The storage the raw signal was read from, in words (emulated or not)."""
    emulated = [r for r in rows if r["step"] == "methylation" and r["storage_latency_ms"]]
    if not emulated:
        return "raw signal read directly (no storage emulation; page cache)"
    r = emulated[0]
    return (
        f"raw signal on emulated storage: {r['storage_latency_ms']:g} ms per read request, "
        f"{int(r['storage_disks'])} disks (requests served at once)"
    )
