"""Bad input fails fast, before any job runs, with one message naming the key or the file."""

from __future__ import annotations

import random
from pathlib import Path

from conftest import run_workflow, write_project


def ecoli(ecoli_dir: Path, reference: Path, **override: str) -> dict[str, str]:
    """A valid sample-sheet row for the shared E. coli reads, with fields overridden."""
    row = {
        "sample": "ecoli",
        "fast5": str(ecoli_dir / "fast5"),
        "reads": str(ecoli_dir / "reads.fasta"),
        "reference": str(reference),
    }
    row.update(override)
    return row


def dry_run_error(work: Path) -> str:
    """Dry-run the workflow, expect failure, return what it printed."""
    result = run_workflow(work, "--dry-run", check=False)
    assert result.returncode != 0, result.stdout
    return result.stdout + result.stderr


def test_unknown_config_key(tmp_path, ecoli_dir, dh10b):
    write_project(tmp_path, [ecoli(ecoli_dir, dh10b)], {"alignr": "bwa"})
    out = dry_run_error(tmp_path)
    assert "alignr" in out and "was unexpected" in out


def test_missing_fast5_folder(tmp_path, ecoli_dir, dh10b):
    missing = tmp_path / "no_such_fast5"
    write_project(tmp_path, [ecoli(ecoli_dir, dh10b, fast5=str(missing))])
    out = dry_run_error(tmp_path)
    assert f"FAST5 path {missing} does not exist" in out
    assert "sample 'ecoli'" in out


def test_empty_reads_file(tmp_path, ecoli_dir, dh10b):
    empty = tmp_path / "empty.fastq"
    empty.write_text("")
    write_project(tmp_path, [ecoli(ecoli_dir, dh10b, reads=str(empty))])
    assert f"reads file {empty} is empty" in dry_run_error(tmp_path)


def test_sample_name_with_a_space(tmp_path, ecoli_dir, dh10b):
    write_project(tmp_path, [ecoli(ecoli_dir, dh10b, sample="my sample")])
    out = dry_run_error(tmp_path)
    assert "'my sample' does not match" in out


def test_reference_without_the_reads_contigs(tmp_path, ecoli_dir):
    """A reference the reads do not come from: the run stops at the alignment check."""
    rng = random.Random(7)
    wrong = tmp_path / "wrong.fa"
    wrong.write_text(">chrZ\n" + "".join(rng.choice("ACGT") for _ in range(50_000)) + "\n")
    write_project(tmp_path, [ecoli(ecoli_dir, wrong)])
    result = run_workflow(tmp_path, check=False)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "none of its 112 reads mapped to the reference" in out
    assert str(wrong) in out
    # Nothing downstream ran, and no summary claims success.
    assert not (tmp_path / "results/ecoli/methylation").exists()
    assert not (tmp_path / "results/ecoli/align/ecoli.minimap2.summary.tsv").exists()
