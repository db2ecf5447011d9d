"""Bad input fails fast, before any job runs, with one message naming the key or the file."""

from __future__ import annotations

import random
from pathlib import Path

from conftest import host_file, run_workflow

from project import write_project

# The calls the full runs here are checked on: what they ask for (not the report, not MultiQC).
CPG_CALLS = "results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv"


def ecoli(ecoli_dir: Path, reference: Path, **override: str) -> dict[str, str]:
    """A valid sample-sheet row for the shared E. coli reads, with fields overridden."""
    row = {
        "sample": "ecoli",
        "signal": str(ecoli_dir / "fast5"),
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


# An unknown config key: test_first_hour.py's test_unknown_config_key_in_the_file_and_on_the_
# command_line (the same config, its first numapore: line).


def test_unknown_motif(tmp_path, ecoli_dir, dh10b):
    write_project(tmp_path, [ecoli(ecoli_dir, dh10b)], {"methylation": {"motifs": ["cpg", "6ma"]}})
    out = dry_run_error(tmp_path)
    assert "'6ma' is not one of ['cpg', 'gpc', 'dam', 'dcm']" in out


def test_missing_fast5_folder(tmp_path, ecoli_dir, dh10b):
    missing = tmp_path / "no_such_fast5"
    write_project(tmp_path, [ecoli(ecoli_dir, dh10b, signal=str(missing))])
    out = dry_run_error(tmp_path)
    assert f"raw signal path {missing} does not exist" in out
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


def test_host_file_naming_nodes_this_machine_lacks(tmp_path, ecoli_dir, dh10b):
    """The 8-node Opteron host file on this 1-node machine: refused before any job runs."""
    write_project(tmp_path, [ecoli(ecoli_dir, dh10b)])
    result = run_workflow(tmp_path, "--dry-run", "--config", "host=opteron-6376", check=False)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "opteron-6376.yaml does not match this machine" in out
    assert "node 7" in out and "does not exist on this machine" in out


def fast5_with_a_broken_file(tmp_path: Path, ecoli_dir: Path) -> Path:
    """A FAST5 folder: the real E. coli files (linked) plus one file that is not HDF5."""
    folder = tmp_path / "fast5"
    folder.mkdir()
    for src in (ecoli_dir / "fast5").glob("*.fast5"):
        (folder / src.name).symlink_to(src)
    (folder / "zz_broken.fast5").write_bytes(b"this is not an HDF5 file\n")
    return folder


def test_bad_fast5_fails_the_conversion_naming_the_file(tmp_path, ecoli_dir, dh10b):
    fast5 = fast5_with_a_broken_file(tmp_path, ecoli_dir)
    write_project(tmp_path / "run", [ecoli(ecoli_dir, dh10b, signal=str(fast5))])
    result = run_workflow(
        tmp_path / "run",
        "--config",
        f"host={host_file(tmp_path / 'slow5.yaml', io_mode='slow5')}",
        check=False,
    )
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "zz_broken.fast5" in out and "fast5_to_blow5" in out
    # One numapore: line naming the file, the reason and the way out; no traceback.
    (line,) = [ln for ln in out.splitlines() if ln.startswith("numapore:") and "zz_broken" in ln]
    assert "not an HDF5 file" in line and line.endswith("listed with the reason)")
    assert "Traceback" not in out
    # Nothing that looks complete is left behind.
    assert not (tmp_path / "run/results/ecoli/signal/ecoli.blow5").exists()


# on_bad_fast5: skip (the file listed with its reason, the run's closing line, every other read
# called): test_accounting.py::test_accounting_with_broken_inputs[slow5], on the same broken file
# among others, in the run that accounts for every read.


def test_duplicate_sample_names(tmp_path, ecoli_dir, dh10b):
    write_project(tmp_path, [ecoli(ecoli_dir, dh10b), ecoli(ecoli_dir, dh10b)])
    out = dry_run_error(tmp_path)
    assert "line 3, sample 'ecoli': duplicate sample name" in out


def test_reference_with_duplicate_contig_names(tmp_path, ecoli_dir, dh10b):
    """Checked when the reference is prepared (a full read of it), before any index is built."""
    twice = tmp_path / "twice.fa"
    twice.write_text(dh10b.read_text() * 2)
    write_project(tmp_path, [ecoli(ecoli_dir, twice)])
    result = run_workflow(tmp_path, check=False)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert f"numapore: reference {twice}: duplicate contig name(s): DNA_CS, gi|170079663|" in out
    assert "Traceback" not in out
    assert not (tmp_path / "results/references/twice/minimap2").exists()


def test_reads_file_with_duplicate_ids(tmp_path, ecoli_dir, dh10b):
    """A repeated read id stops the run at the alignment check, before methylation calling."""
    reads = tmp_path / "dup.fasta"
    text = (ecoli_dir / "reads.fasta").read_text()
    first = ">" + text.split(">")[1]
    reads.write_text(text + first)
    write_project(tmp_path, [ecoli(ecoli_dir, dh10b, reads=str(reads))])
    result = run_workflow(tmp_path, check=False)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert f"reads file {reads} repeats 1 read id(s) (e.g. {first[1:].split()[0]})" in out
    assert not (tmp_path / "results/ecoli/methylation").exists()


def test_paths_with_spaces(tmp_path, ecoli_dir, dh10b):
    """Inputs and the project folder with spaces in their names: the run works."""
    inputs = tmp_path / "my inputs"
    (inputs / "fast5 files").mkdir(parents=True)
    for src in sorted((ecoli_dir / "fast5").glob("*.fast5"))[:20]:
        (inputs / "fast5 files" / src.name).symlink_to(src)
    one = sorted((ecoli_dir / "fast5").glob("*.fast5"))[20]
    (inputs / "one read.fast5").symlink_to(one)
    (inputs / "the reads.fasta").symlink_to(ecoli_dir / "reads.fasta")
    (inputs / "dh10b genome.fa").symlink_to(dh10b)
    row = {
        "sample": "ecoli",
        "signal": f"{inputs / 'fast5 files'},{inputs / 'one read.fast5'}",
        "reads": str(inputs / "the reads.fasta"),
        "reference": str(inputs / "dh10b genome.fa"),
    }
    work = write_project(tmp_path / "project folder", [row])
    run_workflow(work, CPG_CALLS)
    calls = (
        (work / "results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv").read_text().splitlines()
    )
    assert len({line.split("\t")[4] for line in calls[1:]}) == 21  # every read with signal
