"""Benchmark: the workflow end to end versus the same tools run directly, and where the
difference goes. Prints a table; measures, never asserts.

    .venv/bin/python benchmarks/bench_overhead.py [--route signal|modbam]
        [--simulate N | --replicate N] [--repeats R]
        [--fast5 DIR --reads FASTA --reference FASTA] [--baseline REPO]

Defaults to the 112 E. coli reads in ../shared against the DH10B genome from ./setup.sh;
--replicate N copies them N times with new read ids (27: 3,024 reads); --simulate N uses N
reads of numapore's simulator instead. The by-hand run makes
the alignments and the calls; the workflow run is timed twice: its pipeline (everything but the
report figures and MultiQC, which the hand run has no counterpart for: `--omit-from`), then the
report rules alone (a second invocation on the finished pipeline). Runs are interleaved, R
repeats, medians. --baseline names another numapore checkout (e.g. /work/main, with its .venv)
whose workflow runs too, in the same conditions: before/after figures side by side.

Routes (ROUTES): signal (above) and modbam: N simulated basecaller reads (an unaligned modBAM
with 5mC MM/ML tags, numapore.simulate.modbam; 10,000 by default) against the workflow's modbam
sample, by hand `samtools fastq -T MM,ML,MN | minimap2 -y -Y | samtools sort`, `samtools index`,
then `numapore pileup` with the options the workflow's pileup job logs, bgzip and tabix.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import benchpath  # noqa: F401  (scripts/ and tests/ on the path)
from bench_io import replicate_reads
import yaml
from project import snakemake_command, write_project

REPO = Path(__file__).resolve().parent.parent
ECOLI = REPO.parent / "shared" / "data" / "ecoli_r94"


def timed(cmd: str, cwd: Path) -> float:
    """Run a shell command (pipefail), fail loudly, return its wall time in seconds."""
    start = time.perf_counter()
    subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - start


def direct_run(work: Path, fast5: Path, reads: Path, reference: Path, threads: int) -> dict:
    """The tools by hand: align+sort, index BAM, nanopolish index, call-methylation."""
    shutil.copy(reads, work / "reads.fasta")
    shutil.copy(reference, work / "genome.fa")
    return {
        "align+sort": timed(
            f"minimap2 -ax map-ont -t {threads} genome.fa reads.fasta"
            f" | samtools sort -@ {threads} -o aln.bam -",
            work,
        ),
        "index_bam": timed("samtools index aln.bam", work),
        "nanopolish_index": timed(f"nanopolish index -d {fast5} reads.fasta", work),
        "call_methylation": timed(
            f"nanopolish call-methylation -t {threads} -r reads.fasta -b aln.bam -g genome.fa"
            " > calls.tsv",
            work,
        ),
    }


def modbam_direct_run(work: Path, inputs: dict[str, Path], threads: int) -> dict:
    """The modBAM route by hand: primary records to FASTQ with their tags, aligned keeping them
    (the workflow's minimap2 options for the kind) and sorted, indexed, piled up with the
    workflow's default pileup options, the bedMethyl bgzipped and indexed."""
    from numapore.methylation.pileup_settings import pileup_arguments

    shutil.copy(inputs["reference"], work / "genome.fa")
    settings = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["pileup"]
    pileup = shlex.join(
        [sys.executable, "-m", "numapore", "pileup", "aln.bam", "calls.bed",
         *pileup_arguments(settings, "genome.fa", threads)]
    )  # fmt: skip
    return {
        "fastq+align+sort": timed(
            f"samtools fastq -F 0x900 -T MM,ML,MN {inputs['reads']}"
            f" | minimap2 -ax map-ont -y -Y -t {threads} genome.fa -"
            f" | samtools sort -@ {threads} -o aln.bam -",
            work,
        ),
        "index_bam": timed("samtools index aln.bam", work),
        "pileup": timed(f"PYTHONPATH={REPO / 'scripts'} {pileup}", work),
        "bgzip+tabix": timed(f"bgzip -@ {threads} calls.bed && tabix -p bed calls.bed.gz", work),
    }


@dataclass(frozen=True)
class Route:
    """One route through the workflow, and the same tools by hand."""

    simulator: tuple[str, ...]  # the simulator's options for its reads (--simulate)
    inputs: Callable[[Path], dict[str, Path]]  # the sheet's files, from the simulator's folder
    direct: Callable[[Path, dict[str, Path], int], dict[str, float]]  # by hand: step -> s
    # The hand step (and workflow job) left out of the fixed cost: most of both runs and the
    # noisiest part on a shared machine; "" for none.
    noisy: str
    default_reads: int = 0  # simulated reads when --simulate is not given (0: ../shared's)
    # A file of the hand run and the workflow's counterpart (in its project), whose contents
    # must be equal: the two runs did the same work. None: not compared.
    same: tuple[str, str] | None = None


ROUTES = {
    "signal": Route(
        simulator=("--formats", "fastq,single"),
        inputs=lambda sim: {"signal": sim / "fast5_single", "reads": sim / "reads.fastq"},
        direct=lambda work, i, threads: direct_run(
            work, i["signal"], i["reads"], i["reference"], threads
        ),
        noisy="call_methylation",
    ),
    "modbam": Route(
        simulator=("--formats", "modbam", "--error-rate", "0.02"),  # R10.4.1-like basecalls
        inputs=lambda sim: {"signal": "", "reads": sim / "reads.modbam.bam"},
        direct=modbam_direct_run,
        noisy="",
        default_reads=10_000,
        same=("calls.bed.gz", "results/bench/methylation/bench.minimap2.cpg.bedmethyl.gz"),
    ),
}


REPORT_RULES = [
    "report_alignment_qc", "report_methylation", "report_accounting", "report_accuracy",
    "report_provenance", "multiqc_custom_content", "multiqc",
]  # fmt: skip


def workflow_run(
    work: Path, inputs: dict[str, Path], threads: int, repo: Path = REPO
) -> tuple[float, float]:
    """The workflow of repo in a fresh project directory on one sample (its sheet's signal,
    reads and reference): wall seconds of its pipeline (no report rules), then of the report
    rules run on the finished pipeline."""
    write_project(work, [{"sample": "bench", **inputs}], repo=repo)
    command = snakemake_command(work, threads, repo=repo)
    pipeline = timed(shlex.join([*command, "--omit-from", *REPORT_RULES]), work)
    return pipeline, timed(shlex.join(command), work)


def count_reads(path: Path) -> int:
    """Records of a FASTA or FASTQ (FASTQ: every 4th line) or BAM file."""
    if path.suffix == ".bam":
        return int(subprocess.run(["samtools", "view", "-c", str(path)], check=True,
                                  capture_output=True, text=True).stdout)  # fmt: skip
    with open(path) as handle:
        lines = [line[:1] for line in handle]
    return lines.count(">") or len(lines) // 4


def check_same(hand: Path, workflow: Path) -> None:
    """Fail unless the two (gzip) files hold the same text: the runs compared did one job."""
    if gzip.decompress(hand.read_bytes()) != gzip.decompress(workflow.read_bytes()):
        sys.exit(f"bench_overhead: {hand} and {workflow} differ: the runs did not do one job")


def rule_seconds(work: Path) -> dict[str, float]:
    """Wall seconds per rule from the workflow's benchmark files."""
    totals: dict[str, float] = {}
    for path in sorted((work / "results" / "benchmarks").glob("*/*.tsv")):
        with open(path) as handle:
            row = next(csv.DictReader(handle, delimiter="\t"))
        totals[path.parent.name] = totals.get(path.parent.name, 0.0) + float(row["s"])
    return totals


Run = tuple[dict, float, float, dict]  # hand steps, pipeline s, report rules s, jobs' s


def fixed_cost(run: Run, noisy: str) -> float:
    """One repeat's fixed cost: pipeline minus its noisy job, minus the hand run's other steps."""
    steps, pipeline, _, rules = run
    hand = sum(steps.values()) - steps.get(noisy, 0.0)
    return pipeline - rules.get(noisy, 0.0) - hand


def report(name: str, runs: list[Run], noisy: str) -> None:
    """Print one workflow version's figures against the hand runs of the same repeats."""
    direct_total = statistics.median(sum(r[0].values()) for r in runs)
    pipeline = statistics.median(r[1] for r in runs)
    report_rules = statistics.median(r[2] for r in runs)
    rules = runs[len(runs) // 2][3]
    print(f"{name}:")
    print(f"workflow pipeline:  {pipeline:7.1f} s  ratio {pipeline / direct_total:.2f}")
    # The cost the workflow adds is measured without the route's noisy step (each run's own).
    by_hand = statistics.median(r[0].get(noisy, 0.0) for r in runs)
    in_workflow = statistics.median(r[3].get(noisy, 0.0) for r in runs)
    fixed = (pipeline - in_workflow) - (direct_total - by_hand)
    without = f" without its {noisy} job" if noisy else ""
    print(
        f"fixed cost:         {fixed:7.1f} s  (pipeline{without}, "
        f"{pipeline - in_workflow:.1f} s, minus the hand run{without and ' without it'}, "
        f"{direct_total - by_hand:.1f} s)"
    )
    if len(runs) > 1:  # the spread says whether the median can be trusted on a busy machine
        each = [fixed_cost(r, noisy) for r in runs]
        print(f"  per repeat:        {', '.join(f'{s:.1f}' for s in each)} s")
    print(f"report rules alone: {report_rules:7.1f} s  (figures, MultiQC: no hand-run counterpart)")
    print("workflow jobs (benchmark: wall s):")
    for rule, seconds in sorted(rules.items(), key=lambda kv: -kv[1]):
        print(f"  {rule:28s} {seconds:7.2f}")
    jobs = sum(v for k, v in rules.items() if k not in REPORT_RULES)
    print(f"  {'sum of pipeline jobs':28s} {jobs:7.2f}")
    print(
        f"  {'scheduling, start-up, DAG':28s} {pipeline - jobs:7.2f}  (pipeline wall - its jobs;"
        " jobs that run side by side make it smaller, even negative)"
    )


def main() -> None:
    """Run the tools and the workflow(s) side by side and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast5", type=Path, default=ECOLI / "fast5")
    parser.add_argument("--reads", type=Path, default=ECOLI / "reads.fasta")
    parser.add_argument("--reference", type=Path, default=REPO / "resources" / "ecoli_dh10b.fa")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--replicate", type=int, default=0, help="copies of the E. coli reads")
    parser.add_argument("--simulate", type=int, default=0, help="simulated reads instead")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="another numapore checkout, run beside")
    parser.add_argument("--route", choices=sorted(ROUTES), default="signal")
    args = parser.parse_args()
    route = ROUTES[args.route]
    args.simulate = args.simulate or route.default_reads
    versions = {"this checkout": REPO}
    if args.baseline:
        versions[f"baseline {args.baseline}"] = args.baseline.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        if args.replicate:
            args.fast5, args.reads = replicate_reads(Path(tmp, "data"), args.replicate)
        if args.simulate:  # numapore's simulator: the route's reads drawn from the reference
            sim = Path(tmp, "sim")
            subprocess.run(
                [sys.executable, "-m", "numapore.simulate.reads", "--reference",
                 str(args.reference), "--out", str(sim), "--reads", str(args.simulate),
                 "--processes", str(args.threads), "--quiet", *route.simulator],
                check=True, env={**os.environ, "PYTHONPATH": str(REPO / "scripts")},
            )  # fmt: skip
            inputs = route.inputs(sim)
        else:
            inputs = {"signal": args.fast5, "reads": args.reads}
        inputs = {k: Path(v).resolve() if v else v for k, v in inputs.items()}
        inputs["reference"] = args.reference.resolve()
        reads = count_reads(inputs["reads"])
        runs: dict[str, list[Run]] = {name: [] for name in versions}
        for repeat in range(args.repeats):  # interleaved: a busy phase hits all alike
            direct_dir = Path(tmp, f"direct{repeat}")
            direct_dir.mkdir()
            steps = route.direct(direct_dir, inputs, args.threads)
            for number, (name, repo) in enumerate(versions.items()):
                wf_dir = Path(tmp, f"workflow{repeat}.{number}")
                wf_dir.mkdir()
                pipeline, report_rules = workflow_run(wf_dir, inputs, args.threads, repo)
                runs[name].append((steps, pipeline, report_rules, rule_seconds(wf_dir)))
                if route.same:
                    check_same(direct_dir / route.same[0], wf_dir / route.same[1])
                shutil.rmtree(wf_dir)
            shutil.rmtree(direct_dir)
    hand = next(iter(runs.values()))
    direct_total = statistics.median(sum(r[0].values()) for r in hand)
    parts = ", ".join(f"{k} {v:.1f}" for k, v in hand[len(hand) // 2][0].items())
    print(f"route {args.route}: {reads} reads, {args.threads} threads, medians of {args.repeats}")
    print(f"direct tools:       {direct_total:7.1f} s  ({parts})")
    if route.same:
        print(f"same output:        {route.same[0]} (by hand) = {route.same[1]} (workflow)")
    for name, version_runs in runs.items():
        report(name, version_runs, route.noisy)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
