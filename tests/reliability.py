"""Helpers of the reliability tests (interruption, disk errors, concurrency): a small real sample,
its project folder, and a snapshot of a run's outputs to compare byte for byte."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import h5py
import pysam

from project import write_project

SAMPLE = "ecoli"
CALLS = f"results/{SAMPLE}/methylation/{SAMPLE}.minimap2.cpg.calls.tsv"
BAM = f"results/{SAMPLE}/align/{SAMPLE}.minimap2.bam"


def fast5_read_id(path: Path) -> str:
    """The read id of a single-read FAST5 file."""
    with h5py.File(path, "r") as handle:
        (read,) = handle["Raw/Reads"].values()
        rid = read.attrs["read_id"]
    return rid.decode() if isinstance(rid, bytes) else str(rid)


def small_data(folder: Path, ecoli_dir: Path, n: int, offset: int = 0) -> dict[str, Path]:
    """Copy n of the shared FAST5 files (from offset, in name order) and their reads to folder."""
    fast5 = folder / "fast5"
    fast5.mkdir(parents=True)
    seqs = {r.name: r.sequence for r in pysam.FastxFile(str(ecoli_dir / "reads.fasta"))}
    records = []
    for src in sorted((ecoli_dir / "fast5").glob("*.fast5"))[offset : offset + n]:
        shutil.copyfile(src, fast5 / src.name)
        rid = fast5_read_id(src)
        records.append(f">{rid}\n{seqs[rid]}\n")
    (folder / "reads.fasta").write_text("".join(records))
    return {"signal": fast5, "reads": folder / "reads.fasta", "reference": ecoli_dir / "region.fa"}


def project(work: Path, samples: dict[str, dict[str, Path]]) -> Path:
    """A project folder running the given samples (name -> small_data paths)."""
    rows = [
        {"sample": name, **{k: str(v) for k, v in data.items()}} for name, data in samples.items()
    ]
    return write_project(work, rows)


def is_output(rel: str) -> bool:
    """True for a result file (not a log, benchmark, the MultiQC report or a hidden
    temporary/scratch file)."""
    parts = rel.split("/")
    # MultiQC's report records when and from which folder it was made: not comparable.
    return parts[1] not in ("logs", "benchmarks", "multiqc") and not any(
        p.startswith(".") for p in parts
    )


# Parts of temp() outputs: whether a run keeps them depends on how it was started (targets,
# --notemp), so complete runs are compared without them.
TEMPORARY_OUTPUTS = ("/shards/", ".pileup_reads.tsv")


def without_temporary(snap: dict[str, bytes | str]) -> dict[str, bytes | str]:
    """A snapshot without the temp() outputs (TEMPORARY_OUTPUTS)."""
    return {k: v for k, v in snap.items() if not any(part in k for part in TEMPORARY_OUTPUTS)}


def snapshot(work: Path) -> dict[str, bytes | str]:
    """Every result file of a run under results/ (logs and benchmarks left out): its bytes, or
    'link -> target' for a symbolic link."""
    out: dict[str, bytes | str] = {}
    for path in sorted((work / "results").rglob("*")):
        rel = path.relative_to(work).as_posix()
        if not is_output(rel) or (path.is_dir() and not path.is_symlink()):
            continue
        out[rel] = f"link -> {os.readlink(path)}" if path.is_symlink() else path.read_bytes()
    return out


def debris(work: Path) -> list[str]:
    """Hidden temporary files or scratch folders (.tmp.*) left under results/."""
    return sorted(
        p.relative_to(work).as_posix()
        for p in (work / "results").rglob(".tmp.*")
        if "logs" not in p.parts
    )
