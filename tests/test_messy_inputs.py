"""One generated case per category of messy input, through the real workflow: each problem ends
in one `numapore:` line naming the file or key and the reason (no traceback), caught before any
heavy job; what can be tidied (lowercase bases, CR line ends, a leading blank line, '#' in a
path) gives the clean reads' calls."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import yaml
from conftest import FEW_READS, call_set, host_file, run_workflow, shortest_reads

from project import write_project


def fastq_of(fasta: str) -> str:
    """The reads as 4-line FASTQ with constant qualities."""
    out = []
    for record in fasta.split(">")[1:]:
        header, *lines = record.split("\n")
        seq = "".join(lines)
        out.append(f"@{header}\n{seq}\n+\n{'5' * len(seq)}\n")
    return "".join(out)


def row(ecoli_dir: Path, name: str, reads: Path | str, reference: Path | None = None) -> dict:
    """A sample-sheet row of the real FAST5 with the given reads (and region.fa)."""
    return {
        "sample": name,
        "signal": str(ecoli_dir / "fast5"),
        "reads": str(reads),
        "reference": str(reference or ecoli_dir / "region.fa"),
    }


def output_of(result) -> str:
    """What a failed run printed; it must hold no Python traceback."""
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in out
    return out


def dry_run(work: Path, *args: str) -> str:
    """Dry-run the workflow, expecting it to fail; what it printed."""
    return output_of(run_workflow(work, "--dry-run", *args, check=False))


def test_problems_named_before_any_job(tmp_path, ecoli_dir):
    """Compression against the name, folders for files, stray blanks in the sheet, results/ a
    file, host file types and a host path that is a folder: each stops the dry run."""
    text = (ecoli_dir / "reads.fasta").read_text()
    hidden_gz = tmp_path / "hidden.fasta"
    hidden_gz.write_bytes(gzip.compress(text.encode()))
    fake_gz = tmp_path / "fake.fasta.gz"
    fake_gz.write_text(text)
    key = "numapore: sample sheet config/samples.tsv, line 2, sample 'bad'"
    sheet = "numapore: sample sheet config/samples.tsv, line 2"
    cases = {
        "gzip_without_gz": (
            row(ecoli_dir, "bad", hidden_gz),
            f"{key}: reads file {hidden_gz}: is gzip-compressed but its name does not end in "
            ".gz; rename it to hidden.fasta.gz",
        ),
        "plain_named_gz": (
            row(ecoli_dir, "bad", fake_gz),
            f"{key}: reads file {fake_gz}: its name ends in .gz but it is not gzip-compressed; "
            "remove the .gz suffix",
        ),
        "reference_folder": (
            row(ecoli_dir, "bad", ecoli_dir / "reads.fasta", ecoli_dir),
            f"{key}: reference {ecoli_dir} is a folder, not a file",
        ),
        "trailing_space": (
            row(ecoli_dir, "bad", f"{ecoli_dir / 'reads.fasta'} "),
            f"{sheet}, column 'reads': '{ecoli_dir / 'reads.fasta'} ' starts or ends with a "
            "space or tab; remove it",
        ),
        "trailing_tab": (
            row(ecoli_dir, "bad", ecoli_dir / "reads.fasta", f"{ecoli_dir / 'region.fa'}\t"),
            f"{sheet}: ends in a tab after its last column 'reference'; remove it",
        ),
    }
    for name, (sample, message) in cases.items():
        work = write_project(tmp_path / name, [sample])
        assert message in dry_run(work).splitlines(), name
    good = [row(ecoli_dir, "good", ecoli_dir / "reads.fasta")]
    results_file = write_project(tmp_path / "results_file", good)
    (results_file / "results").write_text("not a folder\n")
    assert (
        f"numapore: {results_file / 'results'} is a file, not a folder: numapore writes its "
        "results there; move it away"
    ) in dry_run(results_file).splitlines()
    work = write_project(tmp_path / "host", good)
    bad_types = host_file(tmp_path / "types.yaml", io_processes="two")
    assert (
        f"numapore: {bad_types}: invalid host file: io_processes: 'two' is not of type "
        "'integer', 'null'"
    ) in dry_run(work, "--config", f"host={bad_types}").splitlines()
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    assert (
        f"numapore: {folder}: host file is a folder, not a file"
        in dry_run(work, "--config", f"host={folder}").splitlines()
    )


def test_broken_reads_and_reference_named_by_the_check(tmp_path, ecoli_dir):
    """Problems only a full read finds: all samples in one run (--keep-going), each stopped by
    the read check (stage_reads, prepare_reference) with its file, line and reason, before any
    alignment or methylation job."""
    text = (ecoli_dir / "reads.fasta").read_text()
    fastq = fastq_of(text)
    files = {}

    def put(name: str, data: str | bytes) -> Path:
        """Write one broken copy."""
        path = tmp_path / "inputs" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        files[name] = path
        return path

    put("cut.fastq", fastq[: fastq.rindex("\n@") + 61])
    lines = fastq.split("\n")
    lines[7] = lines[7][:-10]
    put("shortq.fastq", "\n".join(lines))
    packed = gzip.compress(text.encode())
    put("cut.fasta.gz", packed[: len(packed) // 2])
    damaged = bytearray(packed)
    damaged[len(packed) // 2] ^= 0xFF
    put("damaged.fasta.gz", bytes(damaged))
    put("rna.fasta", text.replace("T", "U"))
    put("noname.fasta", "> no name, only words" + text[text.index("\n") :])
    genome = (ecoli_dir / "region.fa").read_text().split("\n", 1)[1]
    long_ref = put("long.fa", ">" + "c" * 70_000 + "\n" + genome)
    rows = [
        row(ecoli_dir, name.replace(".", "-"), path)
        for name, path in files.items()
        if name != "long.fa"
    ]
    rows.append(row(ecoli_dir, "longref", ecoli_dir / "reads.fasta", long_ref))
    work = write_project(tmp_path / "run", rows)
    out = output_of(run_workflow(work, "--keep-going", check=False)).splitlines()
    f = files
    expected = [
        f"numapore: reads file {f['cut.fastq']}, line 446 (record 112): truncated: the last "
        "record has no '+' line and no qualities",
        f"numapore: reads file {f['shortq.fastq']}, line 8 (record 2): quality shorter than "
        "the sequence (2355 < 2365)",
        f"numapore: reads file {f['rna.fasta']}, line 2 (record 1): RNA alphabet (U): "
        "nanopolish calls CpG methylation on DNA reads",
        f"numapore: reads file {f['noname.fasta']}, line 1 (record 1): header without a name",
        f"numapore: reference file {long_ref}, line 1 (record 1): name longer than 255 "
        "characters (minimap2's index keeps names of up to 255 characters)",
    ]
    for message in expected:
        assert message in out
    prefix = {
        "cut.fasta.gz": "the gzip data is truncated (the file was cut short)",
        "damaged.fasta.gz": "the gzip data is corrupt (",
    }
    for name, reason in prefix.items():
        assert any(
            line.startswith(f"numapore: reads file {f[name]}, line ") and reason in line
            for line in out
        ), name
    # nothing heavy ran: no alignment, no methylation calls
    assert not list((work / "results").glob("*/align/*.bam"))
    assert not list((work / "results").glob("*/methylation/*"))


@pytest.fixture(scope="module")
def tidy_run(tmp_path_factory, ecoli_dir) -> Path:
    """One run: the clean reads, a messy copy (lowercase bases, CR-only line ends, a leading
    blank line) and a copy under a path holding '#', of the shortest reads (conftest.FEW_READS:
    nanopolish calls each of the three samples)."""
    base = tmp_path_factory.mktemp("tidy")
    clean = shortest_reads(ecoli_dir / "reads.fasta", base / "clean.fasta", FEW_READS)
    text = clean.read_text()
    records = text.split("\n")
    messy = "\r".join(line if line.startswith(">") else line.lower() for line in records)
    (base / "messy.fasta").write_text("\r" + messy)
    (base / "run#1").mkdir()
    (base / "run#1" / "reads.fastq").write_text(fastq_of(text))
    rows = [
        row(ecoli_dir, "clean", clean),
        row(ecoli_dir, "messy", base / "messy.fasta"),
        row(ecoli_dir, "hash", base / "run#1" / "reads.fastq"),
    ]
    work = write_project(base / "work", rows)
    calls = [
        f"results/{r['sample']}/methylation/{r['sample']}.minimap2.cpg.calls.tsv" for r in rows
    ]
    run_workflow(work, *calls)  # the calls, not the report
    return work


def calls_of(work: Path, sample: str) -> set[tuple]:
    """A sample's per-read calls."""
    (path,) = (work / "results" / sample / "methylation").glob(f"{sample}.minimap2*calls.tsv")
    return call_set(path)


def test_tidied_reads_give_the_clean_calls(tidy_run):
    clean = calls_of(tidy_run, "clean")
    assert len({c[2] for c in clean}) > 10  # 14 of the 20 shortest reads have calls on region.fa
    assert calls_of(tidy_run, "messy") == clean
    assert calls_of(tidy_run, "hash") == clean
    log = (tidy_run / "results/logs/stage_reads/messy.fast5.fasta.log").read_text()
    assert (
        "copied with lowercase bases uppercased, CR line ends made LF, blank lines removed" in log
    )
    assert (tidy_run / "results/clean/reads/fast5/clean.fasta").is_symlink()


def test_host_file_check_is_one_line(tmp_path):
    """The host-file schema errors of one file, on one line (the key and the reason each)."""
    path = tmp_path / "host.yaml"
    path.write_text(yaml.safe_dump({"io_mode": "fast6", "io_processes": "two"}))
    from numapore.execution.hosts import HostConfigError, load_host_config

    with pytest.raises(HostConfigError) as err:
        load_host_config(path)
    assert "\n" not in str(err.value)
    assert "io_mode: 'fast6' is not one of" in str(err.value)
