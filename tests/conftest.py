"""Shared pytest fixtures: where the shared real data and the repository live."""

import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pysam
import pytest
import forked_snakemake
import yaml

from numapore.nanopolish import frequency as methylation
from numapore.methylation.motifs import MOTIFS
from modkit_golden import check_modkit_golden  # noqa: F401 (the golden files' check)
from project import snakemake_command, write_project
from reference_tools import reference_frequency_script
from shared_runs import shared_run

# Shared runs of each route, one plugin module per route: modBAM and short reads; signal.
pytest_plugins = ["runs_modbam_short", "runs_signal", "cpu_budget"]

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
ECOLI = SHARED / "data" / "ecoli_r94"
F2S = SHARED / "data" / "slow5tools_f2s"


@pytest.fixture(scope="session")
def ecoli_dir() -> Path:
    """The 112 real R9.4 E. coli reads (FAST5 folder, reads.fasta, region.fa)."""
    if not ECOLI.is_dir():
        pytest.fail(f"shared data missing: {ECOLI} (tests need ../shared beside the repository)")
    return ECOLI


@pytest.fixture(scope="session")
def f2s_dir() -> Path:
    """The slow5tools f2s conformance suite (raw FAST5 inputs and expected SLOW5 text)."""
    if not F2S.is_dir():
        pytest.fail(f"shared data missing: {F2S}")
    return F2S


DH10B = REPO / "resources" / "ecoli_dh10b.fa"


@pytest.fixture(scope="session")
def dh10b() -> Path:
    """The E. coli K-12 DH10B genome that ./setup.sh extracts from Debian's nanook-examples."""
    if not DH10B.is_file():
        pytest.fail(f"{DH10B} missing: run ./setup.sh first")
    return DH10B


def host_file(path: Path, strategy: str = "none", io_mode: str = "fast5", **extra) -> Path:
    """Write a host file for this machine (layout detected at start-up) with one strategy for
    the alignment and methylation steps; return its path."""
    host = {
        "description": f"test host: {strategy}, {io_mode}",
        "topology": "auto",
        "strategy": {"alignment": strategy, "methylation": strategy},
        "io_mode": io_mode,
        **extra,
    }
    path.write_text(yaml.safe_dump(host))
    return path


def run_workflow(workdir: Path, *args: str, check: bool = True):
    """Run the real workflow with the hpc-numa profile in workdir; return the CompletedProcess."""
    cmd = snakemake_command(workdir, 2, *args)
    result = forked_snakemake.run(cmd, capture_output=True, text=True)
    if check and result.returncode != 0:
        pytest.fail(
            f"workflow failed ({' '.join(cmd)}):\n{result.stdout[-3000:]}\n"
            f"{result.stderr[-5000:]}"
        )
    return result


CALL_KEY = ["chromosome", "start", "read_name", "log_lik_ratio"]


def primary_mapped(bam: Path) -> set[str]:
    """Names of reads with a mapped primary alignment."""
    with pysam.AlignmentFile(str(bam)) as handle:
        return {
            r.query_name
            for r in handle
            if not (r.is_unmapped or r.is_secondary or r.is_supplementary)
        }


def read_calls(path: Path) -> pd.DataFrame:
    """A nanopolish call table, with the log-likelihood ratio kept as printed text."""
    return pd.read_csv(path, sep="\t", dtype={"log_lik_ratio": str})


def call_set(path: Path, reads: set[str] | None = None) -> set[tuple]:
    """Per-read calls as a set of (chromosome, position, read, log-likelihood ratio); only those
    of the given reads when reads is given."""
    calls = set(read_calls(path)[CALL_KEY].itertuples(index=False, name=None))
    return calls if reads is None else {call for call in calls if call[2] in reads}


def shortest_reads(source: Path, target: Path, n: int) -> Path:
    """Write the n shortest reads of a FASTA file (nanopolish's cost and bowtie2's grow with a
    read's length: the 20 shortest E. coli reads are 6 % of the 112 reads' bases)."""
    with pysam.FastxFile(str(source)) as fastx:
        records = sorted(((r.name, r.sequence) for r in fastx), key=lambda r: len(r[1]))[:n]
    target.write_text("".join(f">{name}\n{seq}\n" for name, seq in records))
    return target


def read_names(reads: Path) -> set[str]:
    """The names of the reads of a FASTA or FASTQ file."""
    with pysam.FastxFile(str(reads)) as fastx:
        return {r.name for r in fastx}


# How many of the shortest E. coli reads a run compares with minimap2_run's, by read: minimap2
# maps and nanopolish calls each read on its own (the scattered and instances runs split the
# reads and give the same results), so minimap2_run's alignments and calls of these reads are
# what a run on them gives. All 20 map to DH10B and have CpG calls there (1,116).
FEW_READS = 20
ECOLI_BAM = "results/ecoli/align/ecoli.minimap2.bam"
ECOLI_CALLS = "results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv"


def assert_as_minimap2_run(work: Path, minimap2_run: Path, reads: Path, alignments=True) -> None:
    """The run's ecoli sample (FEW_READS shortest reads, the file reads) has minimap2_run's
    primary alignments (unless alignments is False) and CpG calls of those reads, which map
    and are called there, every one (nothing compared is empty)."""
    names = read_names(reads)
    assert len(names) == FEW_READS
    if alignments:
        baseline = primary_mapped(minimap2_run / ECOLI_BAM) & names
        assert baseline == names
        assert primary_mapped(work / ECOLI_BAM) == baseline
    expected = call_set(minimap2_run / ECOLI_CALLS, names)
    assert {call[2] for call in expected} == names
    assert call_set(work / ECOLI_CALLS) == expected


def ecoli_row(ecoli_dir: Path, reference: Path, reads: Path | None = None) -> dict[str, str]:
    """A sample-sheet row for the shared E. coli reads."""
    return {
        "sample": "ecoli",
        "signal": str(ecoli_dir / "fast5"),
        "reads": str(reads or ecoli_dir / "reads.fasta"),
        "reference": str(reference),
    }


# Every motif nanopolish calls (methylation.motifs), run once in the minimap2_run fixture.
MOTIF_NAMES = ["cpg", "gpc", "dam", "dcm"]


@pytest.fixture(scope="session")
def minimap2_run(tmp_path_factory, ecoli_dir, dh10b) -> Path:
    """The workflow (minimap2) run on the E. coli reads, calling every motif; returns its
    directory. It makes the BAM and every motif's calls, frequency, bedMethyl and modBAM, not
    the report (tests/runs_signal.py: the signal route's runs)."""
    from runs_signal import outputs

    def make(work: Path) -> None:
        methylation = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["methylation"]
        write_project(
            work,
            [ecoli_row(ecoli_dir, dh10b)],
            {"methylation": {**methylation, "motifs": MOTIF_NAMES}},
        )
        kinds = ["bam", "calls", "frequency", "bedmethyl", "modbam"]
        run_workflow(work, *outputs("ecoli", *kinds, motifs=MOTIF_NAMES))

    return shared_run(tmp_path_factory, "wf_minimap2", make)


def reference_output(calls: Path, *options: str) -> str:
    """What nanopolish's calculate_methylation_frequency.py prints for a call table."""
    script = reference_frequency_script()
    run = subprocess.run(
        [sys.executable, str(script), *options, str(calls)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def numapore_output(calls: Path, motif: str, threshold: float, split: bool) -> str:
    """numapore's frequency table for a call table."""
    with tempfile.TemporaryDirectory() as tmp:
        tsv = Path(tmp) / "frequency.tsv"
        methylation.frequency_outputs(calls, MOTIFS[motif], threshold, split, tsv)
        return tsv.read_text()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The emulated 2-node guest's tests first: its one boot runs for many minutes on one worker
    while the other worker goes through the rest (last, it ran alone at the end of the suite)."""
    items.sort(key=lambda item: item.nodeid.split("::")[0] != "tests/test_numa_guest.py")
