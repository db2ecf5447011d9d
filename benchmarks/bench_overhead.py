"""Benchmark: the workflow end to end versus the same tools run directly, and where the
difference goes. Prints tables; measures, never asserts.

    .venv/bin/python benchmarks/bench_overhead.py [--route signal|modbam|short] [--simulate N |
        --replicate N] [--repeats R] [--reads FILE [--reads2 FILE] --fast5 DIR --reference FASTA]
        [--baseline REPO | --tune]

One route per input kind (ROUTES: the sample the workflow gets, the tools by hand, which hand
steps each workflow job stands for, the step that is most of both runs):
- signal (default): the 112 E. coli reads in ../shared against the DH10B genome from ./setup.sh;
  --replicate N copies them N times with new read ids (27: 3,024 reads); --simulate N uses N
  reads of numapore's simulator. By hand: minimap2 | samtools sort, samtools index, nanopolish
  index, nanopolish call-methylation.
- modbam: --simulate N basecaller reads (default 10,000) of numapore's simulator (an unaligned
  modBAM with 5mC MM/ML tags, numapore.simulate.modbam; 2 % basecalling errors), or --reads.
  By hand: samtools fastq -T MM,ML,MN | minimap2 -y -Y | samtools sort, samtools index, then
  `numapore pileup` with the options the workflow's pileup job logs, bgzip and tabix; both
  runs must write the same bedMethyl (Route.same).
- short: --simulate N pairs of 150 bp reads from the reference's first sequence (Debian's
  art_illumina, HiSeq 2500 profile, fixed seed), or --reads/--reads2. By hand, the workflow's
  preset and defaults: bwa index; bwa mem -K (the kind's batch) -R (read group) | samtools
  fixmate -m | samtools sort; samtools markdup -s; samtools index, flagstat, stats. (The
  workflow's fixmate writes the pipe uncompressed (-u) and its sort writes at -l 1 the BAM that
  markdup reads once; by hand, the tools' defaults.)

The workflow run is timed twice: its pipeline (everything but the report figures and MultiQC, and
the samtools stats and flagstat reports on routes whose hand run makes none: the hand run has no
counterpart for them, `--omit-from`), then, in the first repeat only, those rules alone (a second
invocation on the finished pipeline). R repeats, medians, and each repeat's ratio; the order
alternates (repeat 1: by hand first, repeat 2: the workflow first, ...) so that a machine getting
busier or quieter does not favour one side. Wall and CPU seconds (CPU: rusage of the waited-for
process trees) per step, side by side. --baseline names another numapore checkout (e.g. /work/main,
with its .venv) whose workflow runs too, in the same conditions: before/after figures side by side.
--tune runs this checkout's workflow twice per repeat, with host tuning off and on (config
`tune`), and prints the ratio of their medians (what tuning costs when it keeps the baseline) and
what the tuning said (its log lines, its record). The workflow versions swap places from one
repeat to the next too.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import benchpath  # noqa: F401  (scripts/ and tests/ on the path)
from bench_io import replicate_reads
import yaml
from project import snakemake_command, write_project

from numapore.inputs.kinds import KINDS

REPO = Path(__file__).resolve().parent.parent
ECOLI = REPO.parent / "shared" / "data" / "ecoli_r94"
SAMPLE = "bench"
HAND = "by hand"  # the hand run's name in the run order


@dataclass(frozen=True)
class Timing:
    """Wall and CPU seconds (user + system of the process and its waited-for children)."""

    wall: float
    cpu: float

    def utilisation(self, threads: int) -> float:
        """CPU seconds per wall second and thread (1.0: every thread busy all along)."""
        return self.cpu / (self.wall * threads) if self.wall else 0.0


def children_cpu() -> float:
    """CPU seconds of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: str, cwd: Path, said_lines: list[str] | None = None) -> Timing:
    """Run a shell command (pipefail), return its wall and CPU seconds (and add the lines it
    wrote to stderr to said_lines); on failure stop with the command and the end of what it
    said."""
    cpu, start = children_cpu(), time.perf_counter()
    with tempfile.TemporaryFile("w+") as said:
        done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd,
                              stdout=subprocess.DEVNULL, stderr=said)  # fmt: skip
        timing = Timing(time.perf_counter() - start, children_cpu() - cpu)
        said.seek(0)
        if done.returncode:
            raise SystemExit(f"failed ({done.returncode}): {cmd}\n{said.read()[-3000:]}")
        if said_lines is not None:
            said_lines += said.read().splitlines()
    return timing


@dataclass(frozen=True)
class Inputs:
    """A route's data: the sample sheet row the workflow gets (its files absolute) and what the
    first line of the figures says it is."""

    row: dict[str, str]
    what: str

    def path(self, key: str) -> Path:
        """A file of the row."""
        return Path(self.row[key])


@dataclass(frozen=True)
class Route:
    """One input kind through the benchmark. hand(workdir, inputs, threads) runs the tools by
    hand and returns each step's Timing; groups: side-by-side lines, each a label, the hand steps
    and the workflow rules doing the same work; main: the hand step that is most of both runs
    and the workflow rule whose tool processes (its jobs' run records) run the same command
    (short: but for fixmate's -u and the sort's -l 1, numapore.execution.tools.align_command).
    The fixed cost is measured without the main step on either side: its noise would swamp
    what the workflow adds."""

    name: str
    prepare: Callable[[argparse.Namespace, Path], Inputs]
    hand: Callable[[Path, Inputs, int], dict[str, Timing]]
    groups: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]
    main: tuple[str, str]
    config: Mapping = field(default_factory=dict)
    # A gzip file of the hand run and its counterpart in the workflow's project, whose text must
    # be equal: the two runs did one job. None: not compared.
    same: tuple[str, str] | None = None
    # QC rules besides REPORT_RULES whose outputs this route's hand run does not make (and no
    # pipeline output needs): timed with the report rules, not in the pipeline.
    qc_without_hand: tuple[str, ...] = ()


# --- signal: raw nanopore signal, nanopolish ------------------------------------------------


def signal_inputs(args: argparse.Namespace, tmp: Path) -> Inputs:
    """The E. coli reads (replicated), simulated reads, or the given ones."""
    fast5, reads = args.fast5 or ECOLI / "fast5", args.reads or ECOLI / "reads.fasta"
    if args.replicate:
        fast5, reads = replicate_reads(tmp / "data", args.replicate)
    if args.simulate:  # numapore's simulator: raw R9.4 signal of reads from the reference
        sim = tmp / "sim"
        subprocess.run(
            [sys.executable, "-m", "numapore.simulate.reads", "--reference",
             str(args.reference), "--out", str(sim), "--reads", str(args.simulate),
             "--processes", str(args.threads), "--quiet"],
            check=True, env={**os.environ, "PYTHONPATH": str(REPO / "scripts")},
        )  # fmt: skip
        fast5, reads = sim / "fast5_single", sim / "reads.fastq"
    with open(reads) as handle:  # FASTA or FASTQ records (FASTQ: every 4th line)
        lines = [line[:1] for line in handle]
    count = lines.count(">") or len(lines) // 4
    files = {"signal": fast5, "reads": reads, "reference": args.reference}
    row = {"sample": SAMPLE, **{k: str(Path(v).resolve()) for k, v in files.items()}}
    return Inputs(row, f"{count} reads")


def signal_by_hand(work: Path, inputs: Inputs, threads: int) -> dict[str, Timing]:
    """The tools by hand: align+sort, index BAM, nanopolish index, call-methylation."""
    shutil.copy(inputs.path("reads"), work / "reads.fasta")
    shutil.copy(inputs.path("reference"), work / "genome.fa")
    return {
        "align+sort": timed(
            f"minimap2 -ax map-ont -t {threads} genome.fa reads.fasta"
            f" | samtools sort -@ {threads} -o aln.bam -",
            work,
        ),
        "index_bam": timed("samtools index aln.bam", work),
        "nanopolish_index": timed(f"nanopolish index -d {inputs.path('signal')} reads.fasta", work),
        "call_methylation": timed(
            f"nanopolish call-methylation -t {threads} -r reads.fasta -b aln.bam -g genome.fa"
            " > calls.tsv",
            work,
        ),
    }


# --- modbam: basecaller modBAMs, realigned keeping their calls, piled up ----------------------

MODBAM_READS = 10_000  # simulated reads when --simulate is not given


def modbam_inputs(args: argparse.Namespace, tmp: Path) -> Inputs:
    """Simulated basecaller reads (R10.4.1-like: 2 % basecalling errors), or the given modBAM."""
    reads = args.reads
    if reads is None:
        sim = tmp / "sim"
        subprocess.run(
            [sys.executable, "-m", "numapore.simulate.reads", "--reference",
             str(args.reference), "--out", str(sim), "--reads", str(args.simulate or MODBAM_READS),
             "--processes", str(args.threads), "--quiet", "--formats", "modbam",
             "--error-rate", "0.02"],
            check=True, env={**os.environ, "PYTHONPATH": str(REPO / "scripts")},
        )  # fmt: skip
        reads = sim / "reads.modbam.bam"
    count = subprocess.run(["samtools", "view", "-c", "-F", "0x900", str(reads)],
                           capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    row = {"sample": SAMPLE, "kind": "modbam", "reads": str(Path(reads).resolve()),
           "reference": str(args.reference.resolve())}  # fmt: skip
    return Inputs(row, f"{count} reads")


def modbam_by_hand(work: Path, inputs: Inputs, threads: int) -> dict[str, Timing]:
    """Primary records to FASTQ with their tags, aligned keeping them (the kind's minimap2
    options) and sorted, indexed, piled up with the workflow's default pileup options, the
    bedMethyl bgzipped and indexed."""
    from numapore.pileup.settings import numapore_arguments
    from numapore.workflow.jobs import options_of

    shutil.copy(inputs.path("reference"), work / "genome.fa")
    settings = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["pileup"]
    pileup = shlex.join(
        [sys.executable, "-m", "numapore", "pileup", "aln.bam", "calls.bed",
         *numapore_arguments(options_of(settings, "genome.fa", threads))]
    )  # fmt: skip
    return {
        "fastq+align+sort": timed(
            f"samtools fastq -F 0x900 -T MM,ML,MN {shlex.quote(inputs.row['reads'])}"
            f" | minimap2 -ax map-ont -y -Y -t {threads} genome.fa -"
            f" | samtools sort -@ {threads} -o aln.bam -",
            work,
        ),
        "index_bam": timed("samtools index aln.bam", work),
        "pileup": timed(f"PYTHONPATH={REPO / 'scripts'} {pileup}", work),
        "bgzip+tabix": timed(f"bgzip -@ {threads} calls.bed && tabix -p bed calls.bed.gz", work),
    }


# --- short: paired short reads, bwa ---------------------------------------------------------

SHORT = KINDS["short"]
READ_LENGTH, FRAGMENT, FRAGMENT_SD = 150, 400, 50


def simulate_pairs(reference: Path, pairs: int, out: Path) -> tuple[Path, Path]:
    """pairs read pairs (READ_LENGTH bp, fragments of FRAGMENT +- FRAGMENT_SD) from the first
    sequence of reference with art_illumina (HiSeq 2500 profile, fixed seed): R1 and R2 FASTQ."""
    import pysam

    out.mkdir(parents=True)
    with pysam.FastxFile(str(reference)) as fasta:
        first = next(iter(fasta))
    genome = out / "genome.fa"
    genome.write_text(f">{first.name}\n{first.sequence}\n")
    command = ["art_illumina", "-ss", "HS25", "-p", "-na", "-rs", "1", "-i", str(genome)]
    command += ["-l", str(READ_LENGTH), "-m", str(FRAGMENT), "-s", str(FRAGMENT_SD)]
    command += ["-c", str(pairs), "-o", str(out / "pairs")]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"failed ({done.returncode}): {shlex.join(command)}\n{done.stderr}")
    return out / "pairs1.fq", out / "pairs2.fq"


def short_inputs(args: argparse.Namespace, tmp: Path) -> Inputs:
    """Simulated pairs, or the given reads (and mates)."""
    reads, reads2 = args.reads, args.reads2
    if args.simulate:
        reads, reads2 = simulate_pairs(args.reference, args.simulate, tmp / "sim")
    if reads is None:
        raise SystemExit("numapore: the short route needs --simulate N or --reads (and --reads2)")
    import pysam

    with pysam.FastxFile(str(reads)) as fastx:
        count = sum(1 for _ in fastx)
    row = {
        "sample": SAMPLE,
        "kind": "short",
        "reads": str(reads.resolve()),
        "reads2": str(reads2.resolve()) if reads2 else "",
        "reference": str(args.reference.resolve()),
    }
    return Inputs(row, f"{count} {'pairs' if reads2 else 'single-end reads'}")


def short_by_hand(work: Path, inputs: Inputs, threads: int) -> dict[str, Timing]:
    """The tools by hand with the workflow's preset and defaults (duplicates marked): bwa index;
    bwa mem | fixmate -m | sort; markdup -s; index, flagstat, stats."""
    shutil.copy(inputs.path("reference"), work / "genome.fa")
    mates = " ".join(shlex.quote(inputs.row[k]) for k in ("reads", "reads2") if inputs.row[k])
    preset = SHORT.aligner_preset("bwa", SAMPLE)
    return {
        "bwa_index": timed("bwa index genome.fa", work),
        "align+fixmate+sort": timed(
            f"bwa {preset} -t {threads} genome.fa {mates}"
            f" | samtools fixmate -m -@ {threads} - -"
            f" | samtools sort -@ {threads} -o sorted.bam -",
            work,
        ),
        "markdup": timed(f"samtools markdup -s -@ {threads} sorted.bam aln.bam", work),
        "index+flagstat+stats": timed(
            f"samtools index -@ {threads} aln.bam && samtools flagstat -@ {threads} aln.bam"
            f" > flagstat.txt && samtools stats -@ {threads} aln.bam > stats.txt",
            work,
        ),
    }


ROUTES = {
    route.name: route
    for route in (
        Route(
            name="signal",
            prepare=signal_inputs,
            hand=signal_by_hand,
            groups=(
                ("alignment", ("align+sort", "index_bam"), ("minimap2_index", "align")),
                ("read index", ("nanopolish_index",), ("nanopolish_index",)),
                ("calls", ("call_methylation",), ("call_methylation",)),
            ),
            main=("call_methylation", "call_methylation"),
            qc_without_hand=("alignment_reports", "calls_qc"),
        ),
        Route(
            name="modbam",
            prepare=modbam_inputs,
            hand=modbam_by_hand,
            groups=(
                # staging streams into the align job, beside it: among the other jobs
                ("alignment", ("fastq+align+sort", "index_bam"), ("minimap2_index", "align")),
                ("pileup", ("pileup", "bgzip+tabix"), ("pileup",)),
            ),
            main=("fastq+align+sort", "align"),
            same=(
                "calls.bed.gz",
                f"results/{SAMPLE}/methylation/{SAMPLE}.minimap2.cpg.bedmethyl.gz",
            ),
            qc_without_hand=("alignment_reports", "calls_qc"),
        ),
        Route(
            name="short",
            prepare=short_inputs,
            hand=short_by_hand,
            groups=(
                ("index", ("bwa_index",), ("bwa_index",)),
                (
                    "alignment",
                    ("align+fixmate+sort", "markdup", "index+flagstat+stats"),
                    ("align",),
                ),
            ),
            main=("align+fixmate+sort", "align"),
            config={"aligner": "bwa"},
        ),
    )
}

REPORT_RULES = [
    "report_alignment_qc", "report_methylation", "report_accounting", "report_accuracy",
    "report_provenance", "report_calls_qc", "report_tracks", "report_regions", "report_dmr",
    "igv_session", "multiqc_custom_content", "multiqc_calls_qc", "multiqc_dmr", "multiqc",
]  # fmt: skip


@dataclass
class WorkflowRun:
    """One workflow run: its pipeline and report rules (Timing), each job's benchmark file
    (wall s, CPU s as Snakemake sampled it) and its main job's tool processes (run record)."""

    pipeline: Timing
    report_rules: Timing | None  # timed in the first repeat only
    jobs: dict[str, Timing]
    tools: dict[str, Timing]
    tuning: list[str] = field(default_factory=list)  # the run's "numapore: tuning:" lines
    tuning_record: dict | None = None  # results/tuning/<host>.json, when the tuning ran


@dataclass(frozen=True)
class Version:
    """A workflow version: a checkout and the config it runs with besides the route's."""

    repo: Path
    config: Mapping = field(default_factory=dict)


def workflow_run(
    work: Path, route: Route, inputs: Inputs, threads: int, version: Version, reports: bool
) -> WorkflowRun:
    """The workflow of a version in a fresh project directory: its pipeline (no report rules,
    nor the route's QC without a hand counterpart), then, if reports, those rules run on the
    finished pipeline."""
    repo = version.repo
    write_project(work, [inputs.row], {**route.config, **version.config}, repo=repo)
    # Each checkout's rule scripts import its own package (a --baseline beside this one).
    command = [
        "env",
        f"PYTHONPATH={repo / 'scripts'}",
        *snakemake_command(work, threads, repo=repo),
    ]
    omitted = [*REPORT_RULES, *route.qc_without_hand]
    said: list[str] = []
    pipeline = timed(shlex.join([*command, "--omit-from", *omitted]), work, said)
    report_rules = timed(shlex.join(command), work) if reports else None
    # host tuning's record (the pileup's, <name>.pileup.json, apart)
    records = sorted((work / "results" / "tuning").glob("*.json"))
    records = [r for r in records if not r.name.endswith(".pileup.json")]
    return WorkflowRun(
        pipeline, report_rules, job_timings(work), tool_timings(work),
        [line for line in said if line.startswith("numapore: tuning:")],
        json.loads(records[0].read_text()) if records else None,
    )  # fmt: skip


def job_timings(work: Path) -> dict[str, Timing]:
    """Wall and CPU seconds per rule from the workflow's benchmark files (CPU is Snakemake's
    sampling of the job's processes: NA, counted 0, for jobs shorter than its interval)."""
    totals: dict[str, Timing] = {}
    for path in sorted((work / "results" / "benchmarks").glob("*/*.tsv")):
        with open(path) as handle:
            row = next(csv.DictReader(handle, delimiter="\t"))
        cpu = float(row["cpu_time"]) if row.get("cpu_time", "NA") not in ("NA", "-") else 0.0
        old = totals.get(path.parent.name, Timing(0.0, 0.0))
        totals[path.parent.name] = Timing(old.wall + float(row["s"]), old.cpu + cpu)
    return totals


def tool_timings(work: Path) -> dict[str, Timing]:
    """Per rule, the wall and exact CPU seconds of the tool processes its jobs ran (the run
    records, *.run.json, of the heavy steps)."""
    totals: dict[str, Timing] = {}
    for path in sorted((work / "results" / "logs").glob("*/*.run.json")):
        record = json.loads(path.read_text())
        old = totals.get(path.parent.name, Timing(0.0, 0.0))
        totals[path.parent.name] = Timing(
            old.wall + record["wall_seconds"], old.cpu + record["cpu_seconds"]
        )
    return totals


@dataclass
class Repeat:
    """One repeat: the order its runs went in, the hand steps, and each workflow version's run."""

    order: list[str]
    hand: dict[str, Timing] = field(default_factory=dict)
    workflows: dict[str, WorkflowRun] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)  # run -> digest of Route.same's file

    @property
    def hand_total(self) -> Timing:
        """The hand run: its steps summed."""
        return summed(self.hand, tuple(self.hand))


def text_digest(path: Path) -> str:
    """SHA-256 of a gzip file's text (bgzip blocks may differ where the text does not)."""
    return hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest()


def run_order(repeat: int, versions: list[str]) -> list[str]:
    """The order of a repeat's runs (repeat counted from 0): by hand first in even repeats, the
    workflow versions first in odd ones, in reverse order (two versions swap places too)."""
    return [HAND, *versions] if repeat % 2 == 0 else [*reversed(versions), HAND]


def run_repeats(
    route: Route,
    inputs: Inputs,
    threads: int,
    repeats: int,
    versions: Mapping[str, Version],
    tmp: Path,
) -> list[Repeat]:
    """Every repeat's runs, in alternating order (run_order)."""
    done = []
    for number in range(repeats):
        repeat = Repeat(run_order(number, list(versions)))
        for name in repeat.order:
            work = Path(tmp, f"run{number}.{repeat.order.index(name)}")
            work.mkdir()
            if name == HAND:
                repeat.hand = route.hand(work, inputs, threads)
                timing = repeat.hand_total
            else:
                # The report rules enter no ratio: timed once, they leave the machine to the
                # runs compared sooner.
                repeat.workflows[name] = workflow_run(
                    work, route, inputs, threads, versions[name], reports=number == 0
                )
                timing = repeat.workflows[name].pipeline
            if route.same:
                repeat.outputs[name] = text_digest(work / route.same[name != HAND])
            shutil.rmtree(work)
            # Progress, for long runs: each run's figures as soon as it ends, with its main
            # step (by hand, or the main rule's tool processes: their wall and CPU seconds).
            if name == HAND:
                steps = ", ".join(f"{k} {v.wall:.1f}" for k, v in repeat.hand.items())
            else:
                main = summed(repeat.workflows[name].tools, (route.main[1],))
                steps = f"{route.main[1]}'s tool processes {main.wall:.1f} s, CPU {main.cpu:.1f} s"
            print(f"repeat {number + 1}: {name}: {timing.wall:.1f} s wall, {timing.cpu:.1f} s CPU"
                  f" ({steps})", file=sys.stderr, flush=True)  # fmt: skip
        if len(set(repeat.outputs.values())) > 1:
            hand_file, workflow_file = route.same
            raise SystemExit(
                f"bench_overhead: repeat {number + 1}: {hand_file} (by hand) and {workflow_file}"
                " (workflow) differ: the runs did not do one job"
            )
        done.append(repeat)
    return done


def median_timing(timings: list[Timing]) -> Timing:
    """Median wall and median CPU seconds."""
    return Timing(
        statistics.median(t.wall for t in timings), statistics.median(t.cpu for t in timings)
    )


def summed(timings: Mapping[str, Timing], names: tuple[str, ...]) -> Timing:
    """The sum of the named timings (missing names count 0)."""
    chosen = [timings[n] for n in names if n in timings]
    return Timing(sum(t.wall for t in chosen), sum(t.cpu for t in chosen))


def cells(timing: Timing, threads: int) -> str:
    """Wall, CPU and CPU utilisation as table cells."""
    return f"{timing.wall:8.1f} {timing.cpu:8.1f} {timing.utilisation(threads):5.2f}"


def report(route: Route, name: str, repeats: list[Repeat], threads: int) -> None:
    """Print one workflow version's figures against the hand runs of the same repeats."""
    runs = [r.workflows[name] for r in repeats]
    hand_total = median_timing([r.hand_total for r in repeats])
    pipeline = median_timing([w.pipeline for w in runs])
    print(f"{name}:")
    print(f"workflow pipeline:  {pipeline.wall:7.1f} s  ratio {pipeline.wall / hand_total.wall:.3f}"
          f"  (CPU {pipeline.cpu:.1f} s, ratio {pipeline.cpu / hand_total.cpu:.3f})")  # fmt: skip
    main_step, main_rule = route.main

    def fixed_cost(repeat: Repeat, run: WorkflowRun) -> float:
        """The pipeline without the main rule's tool processes, minus the hand run without its
        main step."""
        hand = repeat.hand_total.wall - repeat.hand[main_step].wall
        return run.pipeline.wall - summed(run.tools, (main_rule,)).wall - hand

    each = [fixed_cost(r, w) for r, w in zip(repeats, runs, strict=True)]
    print(
        f"fixed cost:         {statistics.median(each):7.1f} s  (pipeline without its "
        f"{main_rule} tool processes minus the hand run without {main_step}"
        + (f"; per repeat: {', '.join(f'{s:.1f}' for s in each)} s)" if len(each) > 1 else ")")
    )
    ratios = [w.pipeline.wall / r.hand_total.wall for r, w in zip(repeats, runs, strict=True)]
    if len(ratios) > 1:
        print(f"ratio per repeat:   {', '.join(f'{x:.3f}' for x in ratios)}")
    report_rules = median_timing([w.report_rules for w in runs if w.report_rules])
    print(
        f"report rules alone: {report_rules.wall:7.1f} s  (figures, MultiQC"
        + "".join(f", {r}" for r in route.qc_without_hand)
        + ": no hand counterpart; first repeat)"
    )
    print(f"side by side (medians; wall s, CPU s, CPU utilisation of {threads} threads):")
    print(f"  {'step':12s} {'by hand':>23s} | {'workflow jobs':>23s}")
    for label, hand_steps, rules in route.groups:
        hand = median_timing([summed(r.hand, hand_steps) for r in repeats])
        jobs = median_timing([summed(w.jobs, rules) for w in runs])
        print(f"  {label:12s} {cells(hand, threads)} | {cells(jobs, threads)}")
    hand = median_timing([r.hand[main_step] for r in repeats])
    tools = median_timing([summed(w.tools, (main_rule,)) for w in runs])
    print(
        f"  the main step, {main_step} by hand against {main_rule}'s tool processes:\n"
        f"  {'':12s} {cells(hand, threads)} | {cells(tools, threads)}"
        f"  (x{tools.wall / hand.wall:.3f} wall, x{tools.cpu / hand.cpu:.3f} CPU)"
    )
    grouped = {rule for _, _, rules in route.groups for rule in rules}
    jobs = runs[len(runs) // 2].jobs
    reports = {*REPORT_RULES, *route.qc_without_hand}
    others = {k: v for k, v in jobs.items() if k not in grouped and k not in reports}
    print("  other workflow jobs (benchmark files, middle repeat):")
    for rule, timing in sorted(others.items(), key=lambda kv: -kv[1].wall):
        print(f"    {rule:28s} {cells(timing, threads)}")
    job_sum = sum(v.wall for k, v in jobs.items() if k not in reports)
    print(
        f"  scheduling, start-up, DAG: {runs[len(runs) // 2].pipeline.wall - job_sum:7.2f} s"
        "  (pipeline wall - its jobs; jobs that run side by side make it smaller, even negative)"
    )
    for number, run in enumerate(runs, 1):
        for line in run.tuning:
            print(f"  repeat {number}: {line}")
        if run.tuning_record:
            tuned = run.tuning_record
            print(
                f"  repeat {number}: tuning record: {tuned.get('seconds', 0):.1f} s, I/O mode "
                f"{tuned['io_mode']}: {tuned['why']}; first cell: {tuned.get('probe')}"
            )


def compare_tuning(repeats: list[Repeat], off: str, on: str) -> None:
    """Tuning on against off: the ratio of the medians of their pipelines, wall and CPU, and
    each repeat's (the runs side by side in one repeat, their order alternating)."""
    runs = {name: [r.workflows[name].pipeline for r in repeats] for name in (off, on)}
    medians = {name: median_timing(timings) for name, timings in runs.items()}
    each = [f"{b.wall / a.wall:.3f}" for a, b in zip(runs[off], runs[on], strict=True)]
    print(
        f"{on} / {off}: x{medians[on].wall / medians[off].wall:.3f} wall "
        f"({medians[on].wall:.1f} / {medians[off].wall:.1f} s), "
        f"x{medians[on].cpu / medians[off].cpu:.3f} CPU "
        f"({medians[on].cpu:.1f} / {medians[off].cpu:.1f} s); per repeat (wall): {', '.join(each)}"
    )


def main(argv: list[str] | None = None) -> None:
    """Run the tools and the workflow(s) side by side and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--route", choices=sorted(ROUTES), default="signal")
    parser.add_argument("--fast5", type=Path, help="signal route: the raw signal")
    parser.add_argument("--reads", type=Path, help="the reads (modbam route: a modBAM)")
    parser.add_argument("--reads2", type=Path, help="short route: the mates (R2)")
    parser.add_argument("--reference", type=Path, default=REPO / "resources" / "ecoli_dh10b.fa")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--replicate", type=int, default=0, help="copies of the E. coli reads")
    parser.add_argument("--simulate", type=int, default=0, help="simulated reads (short: pairs)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="another numapore checkout, run beside")
    parser.add_argument(
        "--tune", action="store_true", help="this checkout with host tuning off and on, beside"
    )
    args = parser.parse_args(argv)
    route = ROUTES[args.route]
    versions = {"this checkout": Version(REPO)}
    if args.baseline:
        versions[f"baseline {args.baseline}"] = Version(args.baseline.resolve())
    if args.tune:
        versions = {"tune: off": Version(REPO), "tune: on": Version(REPO, {"tune": "on"})}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = route.prepare(args, Path(tmp))
        repeats = run_repeats(route, inputs, args.threads, args.repeats, versions, Path(tmp))
    hand_total = median_timing([r.hand_total for r in repeats])
    print(f"route {route.name}: {inputs.what}, {args.threads} threads, medians of {args.repeats}")
    for number, repeat in enumerate(repeats, 1):
        print(f"repeat {number} order: {' -> '.join(repeat.order)}")
    steps = ", ".join(
        f"{k} {median_timing([r.hand[k] for r in repeats]).wall:.1f}" for k in repeats[0].hand
    )
    print(f"direct tools:       {hand_total.wall:7.1f} s  (CPU {hand_total.cpu:.1f} s; {steps})")
    if route.same:
        print(f"same output:        {route.same[0]} (by hand) = {route.same[1]} (workflow)")
    for name in versions:
        report(route, name, repeats, args.threads)
    if args.tune:
        compare_tuning(repeats, "tune: off", "tune: on")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
