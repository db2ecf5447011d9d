"""Running one benchmark cell: the step with the cell's strategy, I/O mode and threads, on
emulated slow storage if asked, measured by GNU time.

The rule script (scripts/compare_cell.py) calls measure_cell, which runs this module as
`/usr/bin/time -v python -m numapore.compare.run REQUEST-JSON`: a process of its own, so that
GNU time's maximum RSS is the cell's own process tree (this Python and the tool processes it
starts), not Snakemake's script process. In that process run_cell makes the cell's host object
(the base host file's data with the cell's settings, validated once) and gives it to the step,
whose run record (wall, CPU seconds and placement of the tool processes) is the cell's record.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from numapore.compare.cells import Cell, cell_host
from numapore.base.atomic import scratch_dir

SCRIPTS_DIR = Path(__file__).resolve().parents[2]


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


def cell_host_config(base_file: str | os.PathLike, cell: Cell):
    """The host object a cell runs with: the base host file's data with the cell's strategy and
    I/O mode (cells.cell_host), validated once; errors name the base host file."""
    import yaml

    from numapore.execution.hosts import host_config_from_dict

    path = Path(base_file)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    source = f"{path} (benchmark cell {cell.name})"
    return host_config_from_dict(
        cell_host(data, cell), source=source, name=f"{path.stem}, cell {cell.name}", path=path
    )


def run_cell(request: Mapping[str, Any]) -> dict[str, Any]:
    """Run one cell (what `python -m numapore.compare.run REQUEST-JSON` does under
    /usr/bin/time -v): the step with the cell's host and threads, on emulated storage if asked;
    the record (launcher's run record + cell + storage + its place in the run order) is written
    to request['record']."""
    from numapore.execution.steps import run_alignment, run_methylation

    cell = Cell.parse(request["cell"])
    workdir, record = Path(request["workdir"]), Path(request["record"])
    workdir.mkdir(parents=True, exist_ok=True)
    host = cell_host_config(request["host"], cell)
    storage = None
    if cell.step == "alignment":
        # The align job's command for the sample's kind: its preset, mates, read group and
        # fixmate (numapore.execution.tools.align_command).
        index_files = [Path(p) for p in request["index_files"]]
        run_alignment(
            host, cell.aligner, request["index"], index_files, Path(request["reads"]),
            workdir / "aligned.bam", cell.threads, record, kind=request["kind"],
            reads2=Path(request["reads2"]) if request["reads2"] else None,
            sample=request["sample"], mark_duplicates=request["mark_duplicates"],
            batch=request.get("batch", 0),
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
    data.update(cell=asdict(cell), storage=storage, order=request["order"])
    record.write_text(json.dumps(data, indent=2) + "\n")
    return data


def measure_cell(request: Mapping[str, Any], record: Path, time_report: Path) -> dict[str, Any]:
    """Run a cell (request: run_cell's, without workdir and record) in a process of its own
    under `/usr/bin/time -v`, its output on stderr (the rule's log); write its run record and
    GNU time's report, each complete or not at all; return the record."""
    with scratch_dir(record) as workdir:
        request = {**request, "workdir": str(workdir), "record": str(workdir / "record.json")}
        env = {**os.environ, "PYTHONPATH": str(SCRIPTS_DIR)}
        command = ["/usr/bin/time", "-v", "-o", str(workdir / "time.txt")]
        command += [sys.executable, "-m", "numapore.compare.run", json.dumps(request)]
        print(shlex.join(command), file=sys.stderr, flush=True)
        subprocess.run(command, stdout=sys.stderr, stderr=sys.stderr, env=env, check=True)
        # Outputs appear complete or not at all: renamed into place only now.
        os.replace(workdir / "time.txt", time_report)
        data = json.loads((workdir / "record.json").read_text())
        os.replace(workdir / "record.json", record)
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the cell described by a JSON request (run_cell's)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m numapore.compare.run REQUEST-JSON", file=sys.stderr)
        return 2
    run_cell(json.loads(args[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
