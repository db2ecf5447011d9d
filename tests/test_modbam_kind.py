"""Basecaller modBAMs as an input kind: the kinds table, the sheet, the staging of the reads with
their tags, and real workflow runs on modkit's R10.4.1 test modBAMs (../shared), realigned to
their reference with every aligner and strategy this machine runs: every primary alignment keeps
its read's calls, and the bedMethyl is the pileup of the output modBAM."""

from __future__ import annotations

import gzip
import shlex
import subprocess
import sys
from pathlib import Path

import pysam
import pytest
from conftest import SHARED, host_file
from project import snakemake_command, write_project

from numapore.base.errors import InputError
from numapore.inputs.kinds import KINDS, STEPS, infer_kind
from numapore.inputs.modbam_reads import stage_modbam_reads
from numapore.inputs.sheet import load_samples, read_sheet

INPUTS = SHARED / "data" / "modkit_pileup" / "inputs"
LADDER = INPUTS / "CGI_ladder_3.6kb_ref.fa"
# The modBAMs of the suite whose reference is there (the CGI ladder oligos): name -> file.
REALIGNED = {
    "unmapped": "bc_anchored_10_reads.unmapped.bam",
    "sorted": "bc_anchored_10_reads.sorted.bam",
    "duplicated": "duplicated.marked.fixed.bam",
    "dorado032": (
        "CG_5mC_20230207_1700_6A_PAG66026_3c0abf27_oligo_741_adapters_modcalls_0th_sort_10_reads"
        ".bam"
    ),
}


# ---------- the table and the sheet ----------


def test_every_kind_says_what_it_is_and_runs_known_steps() -> None:
    """Each kind describes its data and chemistry, runs known steps, aligns with minimap2."""
    for kind in KINDS.values():
        assert kind.data and kind.chemistry and kind.reads and kind.accounting, kind.name
        assert kind.steps <= set(STEPS) and "minimap2" in kind.aligner_options, kind.name
    assert KINDS["modbam"].runs("pileup") and not KINDS["modbam"].runs("call_methylation")
    with pytest.raises(ValueError, match="unknown step 'align'"):
        KINDS["modbam"].runs("align")


def test_kind_is_declared_or_told_from_the_row() -> None:
    """A declared kind wins; a BAM/CRAM is a modBAM; raw signal makes a signal sample."""
    assert infer_kind("modbam", "", "r.fastq", "k") == "modbam"
    assert infer_kind("", "", "calls.BAM", "k") == "modbam"
    assert infer_kind("", "", "x.cram", "k") == "modbam"
    assert infer_kind("", "fast5/", "r.fastq", "k") == "signal"
    with pytest.raises(InputError, match=r"^k: no raw signal and the reads are not a BAM/CRAM"):
        infer_kind("", "", "r.fastq", "k")
    with pytest.raises(InputError, match="^k: kind 'modbm' is not an input kind; kinds are"):
        infer_kind("modbm", "", "r.bam", "k")


def tagged_fastq(tmp_path: Path, tags: bool = True) -> Path:
    """The unaligned modBAM's reads as FASTQ, with their tags in the headers or without."""
    out = tmp_path / ("tagged.fastq" if tags else "untagged.fastq")
    argv = [
        "samtools",
        "fastq",
        *(["-T", "MM,ML"] if tags else []),
        str(INPUTS / REALIGNED["unmapped"]),
    ]
    out.write_bytes(subprocess.run(argv, capture_output=True, check=True).stdout)
    return out


def test_sheet_rows_of_the_modbam_kind(tmp_path: Path) -> None:
    """BAM and tagged FASTQ rows load as modbam samples (staged as FASTQ); a FASTQ without tags,
    raw signal on a modBAM row and a signal row without signal each give one line."""
    fastq, bare = tagged_fastq(tmp_path), tagged_fastq(tmp_path, tags=False)
    sheet = tmp_path / "samples.tsv"
    sheet.write_text(
        "sample\tkind\tsignal\treads\treference\n"
        f"a\t\t\t{INPUTS / REALIGNED['unmapped']}\t{LADDER}\n"
        f"b\tmodbam\t\t{fastq}\t{LADDER}\n"
    )
    samples = load_samples(read_sheet(sheet), sheet, tmp_path)
    assert [(s.kind, s.reads_format) for s in samples.values()] == [("modbam", "fastq")] * 2
    rows = {
        f"c\tmodbam\t\t{bare}\t{LADDER}": "the first read's header carries no MM/ML tags",
        f"d\t\t{tmp_path}\t{INPUTS / REALIGNED['sorted']}\t{LADDER}": (
            "a modbam sample takes no raw signal; leave its signal field empty"
        ),
        f"e\tsignal\t\t{fastq}\t{LADDER}": (
            "a signal sample needs raw signal, but it has an empty signal field"
        ),
    }
    for row, reason in rows.items():
        sheet.write_text(f"sample\tkind\tsignal\treads\treference\n{row}\n")
        with pytest.raises(InputError) as err:
            load_samples(read_sheet(sheet), sheet, tmp_path)
        assert str(err.value).startswith(f"sample sheet {sheet}, line 2, sample '{row[0]}': ")
        assert str(err.value).endswith(reason) or reason in str(err.value), err.value


# ---------- staging ----------


def test_staging_keeps_tags_and_counts_reads(tmp_path: Path) -> None:
    """A BAM and its tagged FASTQ stage to the same FASTQ; duplicates are left out, counted."""
    from_bam = stage_modbam_reads(INPUTS / REALIGNED["unmapped"], tmp_path / "a.fastq", LADDER, 2)
    from_fastq = stage_modbam_reads(tagged_fastq(tmp_path), tmp_path / "b.fastq", LADDER, 2)
    assert (from_bam.reads, from_bam.with_tags, from_bam.aligned_input) == (10, 10, False)
    assert (from_fastq.reads, from_fastq.with_tags) == (10, 10)
    assert (tmp_path / "a.fastq").read_text() == (tmp_path / "b.fastq").read_text()
    dup = stage_modbam_reads(INPUTS / REALIGNED["duplicated"], tmp_path / "c.fastq", LADDER, 2)
    assert (dup.reads, dup.duplicates, dup.aligned_input) == (10, 10, True)
    assert "10 records marked duplicate left out" in dup.summary()


def untagged_bam(tmp_path: Path) -> Path:
    """The unaligned modBAM with its MM/ML tags stripped (samtools view -x)."""
    bare = tmp_path / "bare.bam"
    subprocess.run(
        ["samtools", "view", "-b", "-x", "MM", "-x", "ML", "-o", str(bare),
         str(INPUTS / REALIGNED["unmapped"])],
        check=True,
    )  # fmt: skip
    return bare


def test_staging_refuses_a_bam_without_tags(tmp_path: Path) -> None:
    """A BAM none of whose reads carries MM/ML stops with one line; no output is left."""
    bare = untagged_bam(tmp_path)
    with pytest.raises(InputError) as err:
        stage_modbam_reads(bare, tmp_path / "out.fastq", LADDER, 1)
    assert str(err.value).startswith(
        f"reads file {bare}: none of its 10 reads carries MM/ML tags: it holds no modification"
    )
    assert not (tmp_path / "out.fastq").exists()


# ---------- the workflow ----------


def write_modbam_project(work: Path, names: list[str], config: dict | None = None) -> Path:
    """A project (tests/project.py's, no demo) whose sheet has the named modBAMs of the suite,
    each a sample against the ladder."""
    write_project(work, [], config)
    lines = ["sample\treads\treference"] + [
        f"{n}\t{INPUTS / REALIGNED[n]}\t{LADDER}" for n in names
    ]
    (work / "config" / "samples.tsv").write_text("\n".join(lines) + "\n")
    return work


def run_workflow(work: Path, *args: str) -> subprocess.CompletedProcess:
    """The real workflow in work on 2 cores, with the hpc-numa profile."""
    return subprocess.run(
        snakemake_command(work, 2, *args), capture_output=True, text=True, timeout=1200
    )


def calls_by_read(bam: Path, primary_only: bool = True) -> dict[str, dict]:
    """Each read's modification calls as pysam reads the tags (forward read coordinates):
    read name -> {(base, strand, code): [(read position, probability), ...]}."""
    calls = {}
    with pysam.AlignmentFile(str(bam), check_sq=False) as handle:
        for rec in handle.fetch(until_eof=True):
            if primary_only and (rec.is_secondary or rec.is_supplementary or rec.is_duplicate):
                continue
            found = rec.modified_bases_forward or {}
            # pysam lists a reverse record's calls from its end: compare them as sorted lists
            calls[rec.query_name] = {key: sorted(found[key]) for key in found}
    return calls


def logged_pileup(work: Path, sample: str, aligner: str) -> list[str]:
    """The options of the pileup job's equivalent modkit command (from its log)."""
    log = work / f"results/logs/pileup/{sample}.{aligner}.cpg.log"
    line = next(x for x in log.read_text().splitlines() if "equivalent modkit command:" in x)
    argv = shlex.split(line.split("equivalent modkit command:", 1)[1])
    assert argv[:2] == ["modkit", "pileup"], argv
    return argv[4:]


def pileup_again(bam: Path, options: list[str], out: Path, cwd: Path) -> bytes:
    """`numapore pileup`'s bedMethyl of bam with options (paths relative to cwd)."""
    numapore = Path(sys.executable).parent / "numapore"
    subprocess.run(
        [str(numapore), "pileup", str(bam), str(out), *options], check=True, capture_output=True,
        cwd=cwd,
    )  # fmt: skip
    return out.read_bytes()


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    """Every realignable modBAM of the suite through the workflow: minimap2, strategy none."""
    work = write_modbam_project(tmp_path_factory.mktemp("modbam"), list(REALIGNED))
    done = run_workflow(work)
    assert done.returncode == 0, done.stderr[-3000:]
    return work


def check_run(work: Path, aligner: str, tmp_path: Path, names=tuple(REALIGNED)) -> None:
    """For each sample: every read of the input is staged and aligned with its calls equal to
    the input read's; the bedMethyl is the pileup command line's on the output modBAM."""
    for name in names:
        bam = work / f"results/{name}/align/{name}.{aligner}.bam"
        source = calls_by_read(INPUTS / REALIGNED[name])
        out = calls_by_read(bam)
        assert out and set(out) <= set(source), name
        for read, calls in out.items():
            assert calls == source[read], (name, read)
        bed = work / f"results/{name}/methylation/{name}.{aligner}.cpg.bedmethyl.gz"
        options = logged_pileup(work, name, aligner)
        again = pileup_again(bam, options, tmp_path / f"{name}.bed", cwd=work)
        assert gzip.decompress(bed.read_bytes()) == again and again, name


def test_each_modbam_realigned_with_its_calls(baseline: Path, tmp_path: Path) -> None:
    """Strategy none, minimap2: calls intact, bedMethyl = the pileup of the output modBAM."""
    check_run(baseline, "minimap2", tmp_path)
    staged = (baseline / "results/duplicated/duplicated.staged.tsv").read_text().splitlines()
    assert staged[1].split("\t") == ["10", "10", "0", "10", "True"]


def records(bam: Path) -> list[str]:
    """A BAM's records as text, sorted (no header: its @PG lines name the run; records at one
    position keep the order of the shards they come from)."""
    return sorted(pysam.view(str(bam)).splitlines())


@pytest.mark.parametrize("strategy", ["interleave", "localalloc"])
def test_strategies_and_scatter_give_the_same_records(baseline, tmp_path, strategy) -> None:
    """A NUMA strategy with the alignment scattered over 2 jobs and the pileup over 3 (by
    region): the same records, and the bedMethyl byte for byte the unscattered one."""
    work = write_modbam_project(
        tmp_path / "run", ["unmapped", "dorado032"],
        {
            "host": str(host_file(tmp_path / "host.yaml", strategy)),
            "scatter": {"alignment": 2, "methylation": 1, "pileup": 3},
        },
    )  # fmt: skip
    done = run_workflow(work)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("unmapped", "dorado032"):
        got = work / f"results/{name}/align/{name}.minimap2.bam"
        assert records(got) == records(baseline / f"results/{name}/align/{name}.minimap2.bam")
        bed = f"results/{name}/methylation/{name}.minimap2.cpg.bedmethyl.gz"
        assert (work / bed).read_bytes() == (baseline / bed).read_bytes(), name
    check_run(work, "minimap2", tmp_path, ("unmapped", "dorado032"))


@pytest.mark.parametrize("aligner", ["bwa", "bowtie2"])
def test_bwa_and_bowtie2_carry_the_tags(tmp_path: Path, aligner: str) -> None:
    """bwa (-C) and bowtie2 (--sam-append-comment) copy the tags into their records too."""
    work = write_modbam_project(tmp_path / "run", ["unmapped"], {"aligner": aligner})
    done = run_workflow(work)
    assert done.returncode == 0, done.stderr[-3000:]
    check_run(work, aligner, tmp_path, ("unmapped",))


def test_a_bam_without_tags_stops_before_alignment(tmp_path: Path) -> None:
    """The run stops at staging with one numapore line naming the sample and the file."""
    bare = untagged_bam(tmp_path)
    work = write_modbam_project(tmp_path / "run", [])
    (work / "config/samples.tsv").write_text(f"sample\treads\treference\nbare\t{bare}\t{LADDER}\n")
    done = run_workflow(work)
    assert done.returncode == 1
    lines = [x for x in (done.stdout + done.stderr).splitlines() if x.startswith("numapore: ")]
    assert f"numapore: sample 'bare': reads file {bare}: none of its 10 reads carries MM/ML" in (
        "\n".join(lines)
    ), lines
    assert not list((work / "results").glob("bare/align/*.bam"))
