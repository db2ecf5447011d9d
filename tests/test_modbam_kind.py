"""Basecaller modBAMs as an input kind: the kinds table, the sheet, the staging of the reads with
their tags, and real workflow runs on modkit's R10.4.1 test modBAMs (../shared), realigned to
their reference with every aligner and strategy this machine runs: every primary alignment keeps
its read's calls, and the bedMethyl is the pileup of the output modBAM."""

from __future__ import annotations

import gzip
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pysam
import pytest
import forked_snakemake
from calls_qc_check import check_calls_qc
from conftest import SHARED, host_file
from project import snakemake_command, write_project
from runs_modbam_short import (
    LADDER,
    MODKIT_INPUTS,
    MODKIT_SUITE,
    cram_of,
    modbam_outputs,
    partial_tags_bam,
)

from numapore.base.errors import AccountingError, InputError
from numapore.execution.hosts import load_host_config
from numapore.execution.steps import run_alignment
from numapore.execution.tools import align_command
from numapore.inputs.kinds import KINDS, STEPS, infer_kind
from numapore.inputs import modbam_reads
from numapore.inputs.modbam_reads import MN_MISMATCH, NO_TAGS, StagedReads, stage_modbam_reads
from numapore.inputs.readids import READ_ID_TABLE, read_id_column
from numapore.inputs.sheet import load_samples, read_sheet
from numapore.pileup.engine import READ_LISTING_HEADER, write_read_listing
from numapore.report.accounting import NA, ModbamAccountingInputs, account_modbam

# The accounting's reasons for records left out, and for reads staged.
LEFT_OUT = (
    "secondary alignment (the read's primary record is realigned)",
    "supplementary alignment (the read's primary record is realigned)",
    "marked duplicate (0x400), left out as modkit does",
)
STAGED = "primary records, realigned"

INPUTS = MODKIT_INPUTS
# modkit's test modBAMs whose reference is there (the CGI ladder oligos): name -> file.
SUITE = MODKIT_SUITE
REALIGNED = tuple(SUITE)
# Aligned to GRCh38 (absent here), with a secondary and a supplementary record.
SECONDARY_SUPPLEMENTARY = INPUTS / "supplementary_and_secondary_read.bam"


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
        str(SUITE["unmapped"]),
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
        f"a\t\t\t{SUITE['unmapped']}\t{LADDER}\n"
        f"b\tmodbam\t\t{fastq}\t{LADDER}\n"
    )
    samples = load_samples(read_sheet(sheet), sheet, tmp_path)
    assert [(s.kind, s.reads_format) for s in samples.values()] == [("modbam", "fastq")] * 2
    rows = {
        f"c\tmodbam\t\t{bare}\t{LADDER}": "the first read's header carries no MM/ML tags",
        f"d\t\t{tmp_path}\t{SUITE['sorted']}\t{LADDER}": (
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
    from_bam = stage_modbam_reads(SUITE["unmapped"], tmp_path / "a.fastq", LADDER, 2)
    from_fastq = stage_modbam_reads(tagged_fastq(tmp_path), tmp_path / "b.fastq", LADDER, 2)
    assert (from_bam.records, from_bam.reads, from_bam.with_tags) == (10, 10, 10)
    assert not from_bam.aligned_input
    assert (from_fastq.reads, from_fastq.with_tags) == (10, 10)
    assert (tmp_path / "a.fastq").read_text() == (tmp_path / "b.fastq").read_text()
    dup = stage_modbam_reads(SUITE["duplicated"], tmp_path / "c.fastq", LADDER, 2)
    assert (dup.records, dup.reads, dup.duplicates, dup.aligned_input) == (20, 10, 10, True)
    assert dup.summary().endswith("; records left out: 10 marked duplicate")
    assert dup.other_reference == ""  # aligned to the ladder


def test_staging_streams_into_a_named_pipe(tmp_path: Path) -> None:
    """Into a named pipe (Snakemake's pipe() to the align job), staging writes the bytes it
    writes to a file, as they come; the pipe stays a pipe and no temporary file is left."""
    stage_modbam_reads(SUITE["unmapped"], tmp_path / "file.fastq", LADDER, 2)
    fifo = tmp_path / "pipe.fastq"
    os.mkfifo(fifo)
    with ThreadPoolExecutor(1) as pool:  # the reader, as the aligner reads it
        read = pool.submit(fifo.read_bytes)
        staged = stage_modbam_reads(SUITE["unmapped"], fifo, LADDER, 2)
        assert read.result(timeout=60) == (tmp_path / "file.fastq").read_bytes()
    assert staged.reads == 10 and fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.fastq", "pipe.fastq"]


def test_staging_copies_records_across_any_block_boundary(tmp_path: Path, monkeypatch) -> None:
    """Staging copies the FASTQ a block at a time: with blocks smaller than a record (grown to
    fit it), a FASTQ with blank lines between records, '+name' lines, CRLF line ends, gzip and
    no line end after its last record stages to the same bytes as the plain FASTQ."""
    plain = tagged_fastq(tmp_path)
    expected = stage_modbam_reads(plain, tmp_path / "plain.staged.fastq", LADDER, 1)
    records = plain.read_text().splitlines()
    for i in range(0, len(records), 4):
        records[i + 2] = "+" + records[i][1:].split("\t")[0]
        records[i] = "\n" + records[i] if i % 8 else records[i]
    messy = tmp_path / "messy.fastq.gz"
    with gzip.open(messy, "wb") as out:
        out.write("\r\n".join(records).encode())
    monkeypatch.setattr(modbam_reads, "FASTQ_BLOCK", 97)
    for source in (plain, messy):
        staged = stage_modbam_reads(source, tmp_path / "small.fastq", LADDER, 1)
        assert staged == expected
        assert (tmp_path / "small.fastq").read_bytes() == (
            tmp_path / "plain.staged.fastq"
        ).read_bytes()


def test_staging_refuses_a_cut_record(tmp_path: Path) -> None:
    """A FASTQ whose last record lacks its quality line stops staging with one line naming
    the record; no staged file is left."""
    records = tagged_fastq(tmp_path).read_text().splitlines()
    cut = tmp_path / "cut.fastq"
    cut.write_text("\n".join(records[:-1]) + "\n")
    with pytest.raises(InputError) as err:
        stage_modbam_reads(cut, tmp_path / "out.fastq", LADDER, 1)
    name = records[-4].split()[0]
    assert str(err.value).startswith(f"reads file {cut}: FASTQ record '{name}"), err.value
    assert str(err.value).endswith("' is cut")
    assert not (tmp_path / "out.fastq").exists()


def test_staging_writes_the_read_ids_and_refuses_a_repeated_one(tmp_path: Path) -> None:
    """The read id table holds the staged FASTQ's ids in order (what the alignment check and the
    accounting count); a read id in two primary records stops staging with one line naming it,
    and no staged file is left."""
    ids = tmp_path / f"a{READ_ID_TABLE}"
    stage_modbam_reads(tagged_fastq(tmp_path), tmp_path / "a.fastq", LADDER, 1, ids=ids)
    with pysam.FastxFile(str(tmp_path / "a.fastq")) as staged:
        names = [rec.name for rec in staged]
    assert len(names) == 10 and read_id_column(ids).to_list() == names
    records = tagged_fastq(tmp_path).read_text().splitlines()
    twice = tmp_path / "twice.fastq"
    twice.write_text("\n".join(records + records[4:8]) + "\n")  # the second read again
    out, ids = tmp_path / "b.fastq", tmp_path / f"b{READ_ID_TABLE}"
    with pytest.raises(InputError) as err:
        stage_modbam_reads(twice, out, LADDER, 1, ids=ids)
    assert str(err.value) == (
        f"reads file {twice}: 1 read id(s) occur in more than one staged record (e.g. "
        f"{names[1]}): each read must occur once; remove the repeats"
    )
    assert not out.exists() and not ids.exists()


def test_an_unaligned_input_stages_every_record(tmp_path: Path) -> None:
    """An unaligned input's records are all staged (no flagstat pass): a record flagged
    secondary there is staged, not left out, and stops staging as a read id that repeats."""
    odd = tmp_path / "odd.unmapped.bam"
    with pysam.AlignmentFile(str(SUITE["unmapped"]), check_sq=False) as source:
        records = list(source.fetch(until_eof=True))
        with pysam.AlignmentFile(str(odd), "wb", template=source) as out:
            for rec in records:
                out.write(rec)
            records[3].flag |= 0x100
            out.write(records[3])
    with pytest.raises(InputError) as err:
        stage_modbam_reads(odd, tmp_path / "odd.fastq", LADDER, 1)
    assert str(err.value) == (
        f"reads file {odd}: 1 read id(s) occur in more than one staged record (e.g. "
        f"{records[3].query_name}): each read must occur once; remove the repeats"
    )
    assert not (tmp_path / "odd.fastq").exists()


def test_staging_counts_records_left_out_and_another_reference(tmp_path: Path) -> None:
    """Secondary and supplementary records are counted and left out (the read's primary record
    is staged); an input aligned to sequences the sample's reference lacks says which."""
    fai = tmp_path / "ladder.fa.fai"
    fai.write_text(Path(f"{LADDER}.fai").read_text())
    staged = stage_modbam_reads(SECONDARY_SUPPLEMENTARY, tmp_path / "f.fastq", LADDER, 1, fai=fai)
    assert (staged.records, staged.secondary, staged.supplementary, staged.reads) == (3, 1, 1, 1)
    assert staged.other_reference.startswith("chr1, chr2, chr3 and ")


def test_staging_drops_tags_whose_mn_does_not_fit(tmp_path: Path) -> None:
    """A read whose MN tag is not its length is staged without its tags, counted and listed
    (htslib gives it no calls either); the others keep theirs."""
    listing = tmp_path / "untagged.tsv"
    staged = stage_modbam_reads(
        partial_tags_bam(tmp_path / "partial.bam"), tmp_path / "m.fastq", LADDER, 1, listing=listing
    )
    assert (staged.reads, staged.with_tags, staged.mn_mismatch, staged.without_tags) == (
        10,
        4,
        2,
        4,
    )
    rows = [line.split("\t") for line in listing.read_text().splitlines()]
    assert [r[1] for r in rows[1:]] == [NO_TAGS] * 4 + [MN_MISMATCH] * 2
    headers = [x for x in (tmp_path / "m.fastq").read_text().splitlines() if x.startswith("@")]
    untagged = [h.split()[0][1:] for h in headers if "MM:Z:" not in h]
    assert untagged == [r[0] for r in rows[1:]]
    assert sum("MN:i:" in h for h in headers) == 8  # the 2 whose MN did not fit lost theirs


def untagged_bam(tmp_path: Path) -> Path:
    """The unaligned modBAM with its MM/ML tags stripped (samtools view -x)."""
    bare = tmp_path / "bare.bam"
    subprocess.run(
        ["samtools", "view", "-b", "-x", "MM", "-x", "ML", "-o", str(bare),
         str(SUITE["unmapped"])],
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


def write_modbam_project(
    work: Path, samples: list[str] | dict[str, Path], config: dict | None = None
) -> Path:
    """A project (tests/project.py's, no demo) whose sheet has the named modBAMs of the suite
    (or name -> file), each a sample against the ladder."""
    write_project(work, [], config)
    files = samples if isinstance(samples, dict) else {n: SUITE[n] for n in samples}
    lines = ["sample\treads\treference"] + [f"{n}\t{f}\t{LADDER}" for n, f in files.items()]
    (work / "config" / "samples.tsv").write_text("\n".join(lines) + "\n")
    return work


def run_workflow(work: Path, *args: str) -> subprocess.CompletedProcess:
    """The real workflow in work on 2 cores, with the hpc-numa profile."""
    return forked_snakemake.run(
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
    """The options of the pileup job's equivalent modkit command (from its log), after
    --modkit-compat with the semantics the log names (modkit 0.6.1's or 0.4.4's)."""
    log = (work / f"results/logs/pileup/{sample}.{aligner}.cpg.log").read_text().splitlines()
    line = next(x for x in log if "equivalent modkit command:" in x)
    argv = shlex.split(line.split("equivalent modkit command:", 1)[1])
    assert argv[:2] == ["modkit", "pileup"], argv
    version = next(x for x in log if x.startswith("modkit semantics: modkit "))
    return ["--modkit-compat", version.split()[-1].rsplit(".", 1)[0], *argv[4:]]


def pileup_again(bam: Path, options: list[str], out: Path, cwd: Path) -> bytes:
    """`numapore pileup`'s bedMethyl of bam with options (logged_pileup's; paths relative to
    cwd)."""
    numapore = Path(sys.executable).parent / "numapore"
    forked_snakemake.run(
        [str(numapore), "pileup", str(bam), str(out), *options],
        check=True, capture_output=True, cwd=cwd,
    )  # fmt: skip
    return out.read_bytes()


# The shared runs of this file are in tests/runs_modbam_short.py; these are their names here.
@pytest.fixture(scope="module")
def variants(modbam_variants) -> dict[str, Path]:
    """The inputs made from the suite's (modbam_variants)."""
    return modbam_variants


@pytest.fixture(scope="module")
def baseline_run(modbam_baseline_run):
    """Every modBAM of the suite and the variants, minimap2, strategy none: the folder and the
    run's output (modbam_baseline_run)."""
    return modbam_baseline_run


@pytest.fixture(scope="module")
def baseline(modbam_baseline) -> Path:
    """The folder of the baseline run."""
    return modbam_baseline


def check_run(
    work: Path, aligner: str, tmp_path: Path, names=tuple(REALIGNED), files: dict | None = None
) -> None:
    """For each sample: every read of the input is staged and aligned with its calls equal to
    the input read's; the bedMethyl is the pileup command line's on the output modBAM."""
    for name in names:
        bam = work / f"results/{name}/align/{name}.{aligner}.bam"
        source = calls_by_read((files or SUITE)[name])
        out = calls_by_read(bam)
        assert out and set(out) <= set(source), name
        for read, calls in out.items():
            assert calls == source[read], (name, read)
        bed = work / f"results/{name}/methylation/{name}.{aligner}.cpg.bedmethyl.gz"
        options = logged_pileup(work, name, aligner)
        again = pileup_again(bam, options, tmp_path / f"{name}.bed", cwd=work)
        assert gzip.decompress(bed.read_bytes()) == again and again, name


def test_each_modbam_realigned_with_its_calls(baseline: Path, variants, tmp_path: Path) -> None:
    """Strategy none, minimap2: calls intact, bedMethyl = the pileup of the output modBAM, for
    the suite's modBAMs, a CRAM, and inputs with tags on some reads or MN tags not fitting (a
    read whose MN does not fit has no calls in the input either, by htslib)."""
    check_run(baseline, "minimap2", tmp_path, (*REALIGNED, *variants), SUITE | variants)
    staged = StagedReads.read(baseline / "results/duplicated/duplicated.staged.tsv")
    assert (staged.records, staged.reads, staged.duplicates) == (20, 10, 10)


def streamed_groups(output: str) -> list[str]:
    """The Snakemake group jobs of a run's output that ran a staging and an align job together."""
    blocks = output.split("Group job ")[1:]
    both = ("rule stage_modbam_reads:", "rule align:")
    return [block for block in blocks if all(rule in block for rule in both)]


def test_staged_reads_stream_into_the_align_job(baseline_run, variants) -> None:
    """Not scattered, a sample's staging and align jobs run together (a pipe group, one per
    sample), and no staged FASTQ is left in results/."""
    work, done = baseline_run
    assert len(streamed_groups(done.stderr)) == len(SUITE | variants), done.stderr[-3000:]
    assert not list(work.glob("results/*/reads/modbam/*.fastq"))


def test_the_comparison_stages_a_file_of_its_own(baseline_run, tmp_path: Path) -> None:
    """The comparison's cells read a modBAM sample's reads again and again, so they get a staged
    file of their own while the sample's staging streams into its align job; both in one run
    (the baseline's, whose comparison is of sample unmapped)."""
    work, done = baseline_run
    stage_modbam_reads(SUITE["unmapped"], tmp_path / "staged.fastq", LADDER, 1)
    staged = work / "results/compare/input/staged/unmapped.fastq"
    assert staged.read_bytes() == (tmp_path / "staged.fastq").read_bytes()
    summary = (work / "results/compare/summary.tsv").read_text().splitlines()
    assert [row.split("\t")[:3] for row in summary[1:]] == [["alignment", "minimap2", "none"]] * 2
    assert "sample=unmapped" in "".join(streamed_groups(done.stderr))
    assert not list(work.glob("results/unmapped/reads/modbam/*.fastq"))


def accounting(work: Path, name: str, aligner: str = "minimap2") -> list[tuple]:
    """A run's accounting rows (stage, what, reads, detail) without the input's path."""
    lines = (work / f"results/{name}/{name}.{aligner}.accounting.tsv").read_text().splitlines()
    rows = [tuple(line.split("\t")) for line in lines[1:]]
    return [(r[0], r[1], r[2], "" if r[1] == "records" else r[3]) for r in rows]


def fates(rows: list[tuple]) -> dict[str, int]:
    """Reads with calls, and without by reason, from accounting rows."""
    return {
        ("with calls" if what == "reads with calls" else detail): int(n)
        for stage, what, n, detail in rows
        if stage == "methylation"
    }


def test_accounting_reconciles_for_every_modbam(baseline: Path) -> None:
    """Each sample's accounting: records in = staged + left out (and why); staged = aligned +
    unmapped = with calls + each reason without; the counts of the suite's modBAMs."""
    expected = {
        # records, secondary, supplementary, duplicates, staged, no tags, MN, aligned, calls
        "unmapped": (10, 0, 0, 0, 10, 0, 0, 10, 10),
        "sorted": (10, 0, 0, 0, 10, 0, 0, 10, 10),
        "duplicated": (20, 0, 0, 10, 10, 0, 0, 10, 10),
        "dorado032": (12, 0, 0, 0, 12, 0, 0, 12, 12),
        "other": (12, 1, 1, 0, 10, 0, 0, 10, 10),
        "partial": (10, 0, 0, 0, 10, 4, 2, 10, 4),
        "cram": (10, 0, 0, 0, 10, 0, 0, 10, 10),
    }
    for name, counts in expected.items():
        rows = accounting(baseline, name)
        got = {(stage, what, detail): int(n) for stage, what, n, detail in rows if n != NA}
        left = [got[("input", "records left out", d)] for d in LEFT_OUT]
        assert (
            got[("input", "records", "")], *left, got[("staging", "reads", STAGED)],
            got[("staging", "reads without MM/ML tags", "aligned, without calls")],
            got[("staging", "reads with an MN tag not their length", "aligned without their tags")],
            got[("alignment", "primary aligned", "minimap2")],
            got[("methylation", "reads with calls", "any modification code")],
        ) == counts, (name, rows)  # fmt: skip
        staged, aligned = counts[4], counts[7]
        assert got[("alignment", "unmapped", "")] == staged - aligned, name
        assert sum(fates(rows).values()) == staged, name
    assert fates(accounting(baseline, "partial")) == {"with calls": 4, NO_TAGS: 4, MN_MISMATCH: 2}
    other = [r for r in accounting(baseline, "other") if r[:2] == ("input", "aligned")]
    assert other == [
        ("input", "aligned", NA, "to another reference (old_oligo_1512_adapters, "
         "old_oligo_741_adapters, old_oligo_677_adapters and 31 more); realigned to the sample's "
         "reference")
    ]  # fmt: skip
    sorted_ = [r for r in accounting(baseline, "sorted") if r[:2] == ("input", "aligned")]
    assert sorted_ == [("input", "aligned", NA, "to it; realigned to the sample's reference")]


def test_modbam_accounting_refuses_totals_that_disagree(baseline: Path, tmp_path: Path) -> None:
    """A staging count or listing that does not fit the staged reads stops the accounting."""
    prefix = baseline / "results/partial"
    bam = prefix / "align/partial.minimap2.bam"
    # The run's listing is a temporary file of the pileup: made again, as the pileup lists
    pileup_listing = tmp_path / "pileup_reads.tsv"
    with open(pileup_listing, "w") as handle:
        handle.write(READ_LISTING_HEADER)
        write_read_listing(str(bam), handle)
    inputs = ModbamAccountingInputs(
        sample="partial", aligner="minimap2", source=SUITE["unmapped"],
        staged=StagedReads.read(prefix / "partial.staged.tsv"),
        untagged=prefix / "reads/modbam/partial.untagged.tsv",
        reads=prefix / f"reads/modbam/partial{READ_ID_TABLE}",
        bam=bam, listing=pileup_listing,
    )  # fmt: skip
    assert sum(fates(account_modbam(inputs)).values()) == 10
    more = replace(inputs, staged=replace(inputs.staged, records=11))
    with pytest.raises(AccountingError, match="11 input records but 10 staged"):
        account_modbam(more)
    listing = tmp_path / "untagged.tsv"
    listing.write_text("\n".join(Path(inputs.untagged).read_text().splitlines()[:-1]) + "\n")
    with pytest.raises(AccountingError, match="lists 5 reads without tags, staging counted 6"):
        account_modbam(replace(inputs, untagged=listing))


def test_report_and_multiqc_show_the_modbam_accounting(baseline: Path) -> None:
    """The accounting figure of each modbam sample is made, and MultiQC's read fates (the
    custom content MultiQC shows) list them with their reasons."""
    for name in ("partial", "other"):
        assert (baseline / f"results/{name}/report/{name}.minimap2.accounting.png").stat().st_size
        data = baseline / f"results/{name}/report/{name}.minimap2.accounting.data.json"
        assert json.loads(data.read_text())["fates"] == fates(accounting(baseline, name))
    mqc = (baseline / "results/multiqc/numapore_accounting_mqc.tsv").read_text().splitlines()
    table = [line.split("\t") for line in mqc if not line.startswith("#")]
    rows = {r[0]: dict(zip(table[0][1:], r[1:], strict=True)) for r in table[1:]}
    assert rows["partial.minimap2"]["with calls"] == "4"
    assert rows["partial.minimap2"][NO_TAGS] == "4"
    assert rows["partial.minimap2"][MN_MISMATCH] == "2"
    assert rows["other.minimap2"]["with calls"] == "10"


def test_the_run_says_what_it_realigned_without_calls(baseline_run, variants) -> None:
    """After the run, one numapore line each: reads without tags (counted), MN tags that do not
    fit (counted; the reads named in the staging log), an input aligned to another reference."""
    work, done = baseline_run
    lines = [x for x in done.stderr.splitlines() if x.startswith("numapore: sample '")]
    assert (
        "numapore: sample 'partial': 4 of its 10 reads carry no MM/ML tags: aligned, without "
        "modification calls (listed in results/partial/reads/modbam/partial.untagged.tsv)"
    ) in lines, lines
    assert (
        "numapore: sample 'partial': 2 read(s) have an MN tag that does not match their "
        "sequence length: aligned without their tags (named in "
        "results/logs/stage_modbam_reads/partial.log)"
    ) in lines, lines
    assert (
        "numapore: sample 'other': its reads file was aligned to another reference "
        "(old_oligo_1512_adapters, old_oligo_741_adapters, old_oligo_677_adapters and 31 more "
        f"are not in {LADDER}): its reads were realigned to the sample's reference"
    ) in lines, lines
    assert not [x for x in lines if x.startswith("numapore: sample 'sorted'")], lines
    with pysam.AlignmentFile(str(variants["partial"]), check_sq=False) as handle:
        named = [r.query_name for i, r in enumerate(handle) if i in (4, 5)]
    log = (work / "results/logs/stage_modbam_reads/partial.log").read_text()
    assert (
        "numapore: sample 'partial': 2 read(s) whose MN tag does not match their sequence length, "
        f"aligned without their tags: {', '.join(named)}"
    ) in log


def records(bam: Path) -> list[str]:
    """A BAM's records as text, sorted (no header: its @PG lines name the run; records at one
    position keep the order of the shards they come from)."""
    return sorted(pysam.view(str(bam)).splitlines())


def test_strategies_and_scatter_give_the_same_records(baseline, tmp_path) -> None:
    """A NUMA strategy (interleave; localalloc: test_short_reads.py's scattered run) with the
    alignment scattered over 2 jobs and the pileup over 3 (by region): the same records, the
    bedMethyl byte for byte the unscattered one, and the same accounting (from the shards' read
    listings, temporary files the run removes)."""
    # The host on the command line: the hpc-numa profile's host=auto would win over the file's
    host = host_file(tmp_path / "host.yaml", "interleave")
    work = write_modbam_project(
        tmp_path / "run", ["unmapped", "dorado032"],
        {"scatter": {"alignment": 2, "methylation": 1, "pileup": 3}},
    )  # fmt: skip
    targets = [
        out
        for name in ("unmapped", "dorado032")
        for out in (
            *modbam_outputs(name, "minimap2"),
            f"results/{name}/{name}.minimap2.accounting.tsv",
        )
    ]
    done = run_workflow(work, *targets, "--config", f"host={host}")
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("unmapped", "dorado032"):
        record = json.loads(
            (work / f"results/logs/align/{name}.minimap2.1-of-2.run.json").read_text()
        )
        assert record["strategy"] == "interleave", record
        got = work / f"results/{name}/align/{name}.minimap2.bam"
        assert records(got) == records(baseline / f"results/{name}/align/{name}.minimap2.bam")
        bed = f"results/{name}/methylation/{name}.minimap2.cpg.bedmethyl.gz"
        assert (work / bed).read_bytes() == (baseline / bed).read_bytes(), name
        assert accounting(work, name) == accounting(baseline, name), name
        # The shards' pass thresholds, each estimated from the same sampled calls: the whole's.
        thresholds = f"results/{name}/methylation/{name}.minimap2.cpg.pileup_thresholds.json"
        assert (work / thresholds).read_text() == (baseline / thresholds).read_text(), name
    assert not list((work / "results").glob("**/*pileup_reads.tsv"))
    assert not list((work / "results").glob("**/shards/*pileup_thresholds.json"))
    check_run(work, "minimap2", tmp_path, ("unmapped", "dorado032"))


def test_the_instances_split_reads_staged_reads_as_they_stream_in(tmp_path: Path) -> None:
    """Strategy instances splits the reads into one share per aligner before aligning: through
    a named pipe, as the align job gets a modBAM sample's reads, it splits them as it splits a
    file (pool=2: two aligners on shares, merged; test_numa_guest.py runs them on two nodes)."""
    staged = tmp_path / "staged.fastq"
    stage_modbam_reads(SUITE["unmapped"], staged, LADDER, 1)
    mmi = tmp_path / "ladder.mmi"
    subprocess.run(["minimap2", "-x", "map-ont", "-d", str(mmi), str(LADDER)], check=True,
                   capture_output=True)  # fmt: skip
    host = load_host_config(host_file(tmp_path / "host.yaml", "none"))

    def aligned(reads: Path, name: str) -> list[str]:
        """The records of the reads aligned by two minimap2 processes on shares."""
        out, record = tmp_path / f"{name}.bam", tmp_path / f"{name}.run.json"
        run_alignment(host, "minimap2", str(mmi), [mmi], reads, out, 2, record, kind="modbam",
                      sample=name, pool=2)  # fmt: skip
        processes = json.loads(record.read_text())["processes"]
        assert len(processes) == 2, processes
        return records(out)

    fifo = tmp_path / "pipe.fastq"
    os.mkfifo(fifo)
    with ThreadPoolExecutor(1) as pool:  # the staging, writing as the split reads
        writing = pool.submit(fifo.write_bytes, staged.read_bytes())
        streamed = aligned(fifo, "streamed")
        writing.result(timeout=60)
    assert streamed and streamed == aligned(staged, "file")


@pytest.mark.parametrize("aligner", ["bwa", "bowtie2"])
def test_bwa_and_bowtie2_carry_the_tags(modbam_test_run, tmp_path: Path, aligner: str) -> None:
    """bwa (-C) and bowtie2 (--sam-append-comment) copy the tags into their records too."""
    check_run(modbam_test_run, aligner, tmp_path, ("unmapped",))


def test_the_test_config_realigns_the_simulated_modbam(modbam_test_run, tmp_path: Path) -> None:
    """.test/config-modbam.yaml, as a user runs it: the simulated basecaller modBAM realigned
    with its calls, its bedMethyl the pileup of the output modBAM, scored against the truth
    (every read simulated, the calls' AUC well above chance), its every read accounted for."""
    source = modbam_test_run / "results/simulated/demo/reads.modbam.bam"
    check_run(modbam_test_run, "minimap2", tmp_path, ("demo",), {"demo": source})
    table = modbam_test_run / "results/demo/methylation/demo.minimap2.cpg.accuracy.tsv"
    header, values = (line.split("\t") for line in table.read_text().splitlines())
    scores = dict(zip(header, values, strict=True))
    # The simulator's sharpness 3.5 gives calls of per-call AUC 0.993 (config/demo_modbam.yaml)
    assert int(scores["reads"]) == 100 and int(scores["calls_matched"]) > 0, scores
    assert float(scores["auc"]) > 0.9, scores
    rows = accounting(modbam_test_run, "demo")
    assert sum(fates(rows).values()) == 100, rows


@pytest.mark.parametrize("sample", ["demo", "hifi"])
def test_calls_qc_at_the_threshold_the_pileup_estimated(modbam_test_run, tmp_path, sample):
    """The QC of a modbam sample's calls equals numapore summary and sample-probs of its
    realigned modBAM at the threshold its pileup estimated (pileup.filter_threshold auto), which
    is sample-probs' percentile at pileup.filter_percentile (10) of the same calls."""
    bam = modbam_test_run / f"results/{sample}/align/{sample}.minimap2.bam"
    rows = check_calls_qc(modbam_test_run, sample, "minimap2", "cpg", bam, tmp_path)
    assert {r["threshold_source"] for r in rows} == {"estimated"}
    assert {r["threshold_setting"] for r in rows} == {"pileup.filter_percentile 0.1"}
    percentiles = (tmp_path / "thresholds.tsv").read_text().split("\n")[1:]
    tenth = {
        fields[0]: fields[2] for fields in map(str.split, percentiles) if fields[1:2] == ["10"]
    }
    assert tenth == {r["base"]: r["threshold"] for r in rows}


def test_minimap2_preset_of_modbam_samples_is_a_config_key(tmp_path: Path) -> None:
    """modbam.minimap2_preset sets minimap2's -x of the index and the alignment (map-ont by
    default); the calls survive it. A preset minimap2 does not know stops the run first."""
    assert "minimap2 -ax map-ont -y -Y -t 2 ix " in align_command(
        "minimap2", "ix", Path("r.fastq"), Path("o.bam"), 2, "modbam"
    )
    work = write_modbam_project(
        tmp_path / "run", ["unmapped"], {"modbam": {"minimap2_preset": "map-pb"}}
    )
    done = run_workflow(work, "results/unmapped/align/unmapped.minimap2.bam")
    assert done.returncode == 0, done.stderr[-3000:]
    index = "results/references/CGI_ladder_3.6kb_ref/minimap2/CGI_ladder_3.6kb_ref.map-pb.mmi"
    assert (work / index).is_file()
    record = json.loads((work / "results/logs/align/unmapped.minimap2.1-of-1.run.json").read_text())
    (process,) = record["processes"]
    assert f"minimap2 -ax map-pb -y -Y -t 2 {index} " in process["command"]
    source = calls_by_read(SUITE["unmapped"])
    out = calls_by_read(work / "results/unmapped/align/unmapped.minimap2.bam")
    assert out and all(calls == source[read] for read, calls in out.items())
    # A preset this machine's minimap2 (Debian's 2.24) lacks stops the run before any job.
    work = write_modbam_project(
        tmp_path / "lrhq", ["unmapped"], {"modbam": {"minimap2_preset": "lr:hq"}}
    )
    done = run_workflow(work, "--dry-run")  # refused while the workflow is read
    lines = [x for x in (done.stdout + done.stderr).splitlines() if x.startswith("numapore: ")]
    assert done.returncode == 1 and lines[0] == (
        "numapore: config modbam.minimap2_preset: minimap2 2.24-r1122 refuses preset 'lr:hq' "
        "([ERROR] unknown preset 'lr:hq'); lr:hq needs minimap2 2.27 or later (Debian's 2.24 "
        "runs map-ont)"
    ), lines
    assert not (work / "results").exists()


REGION = SHARED / "data" / "ecoli_r94" / "region.fa"


def bad_input(case: str, tmp_path: Path) -> tuple[str, Path, Path, str]:
    """A sheet row (kind, reads, reference) of a bad modBAM input, and the line that stops the
    run (after `numapore: `; {sheet}: the sheet's path)."""
    if case == "no tags":
        bare = untagged_bam(tmp_path)
        return "", bare, LADDER, (
            f"sample 'bad': reads file {bare}: none of its 10 reads carries MM/ML tags: it holds "
            "no modification calls (basecall with modified-base models, e.g. dorado "
            "--modified-bases, and keep the tags: samtools fastq -T MM,ML,MN)"
        )  # fmt: skip
    if case == "cram without its reference":
        written = tmp_path / "ladder.fa"  # the reference the CRAM was written with, then gone
        written.write_text(LADDER.read_text())
        cram = cram_of(SUITE["sorted"], written, tmp_path / "sorted.cram")
        written.unlink()
        Path(f"{written}.fai").unlink()
        return "", cram, REGION, (
            f"sample 'bad': reads file {cram}: its reference is not found: a CRAM is decoded "
            f"against the reference it was written with ({written}, as its header says), and "
            f"neither the sample's reference {REGION} nor that file holds it; give that FASTA as "
            "the sample's reference"
        )  # fmt: skip
    fastq = tagged_fastq(tmp_path, tags=False)
    return "modbam", fastq, LADDER, (
        f"sample sheet {{sheet}}, line 2, sample 'bad': reads file {fastq}: the first read's "
        "header carries no MM/ML tags (a FASTQ that lost them?); write it with dorado "
        "--emit-fastq or samtools fastq -T MM,ML,MN"
    )  # fmt: skip


@pytest.mark.parametrize("case", ["no tags", "cram without its reference", "fastq without tags"])
def test_bad_modbam_input_stops_with_one_line(tmp_path: Path, case: str) -> None:
    """A BAM none of whose reads has MM/ML, a CRAM whose reference is nowhere, a FASTQ whose
    headers lost the tags: the run stops before the alignment with one numapore line naming
    the sample, the file and the reason."""
    kind, reads, reference, reason = bad_input(case, tmp_path)
    work = write_modbam_project(tmp_path / "run", [])
    sheet = work / "config/samples.tsv"
    sheet.write_text(f"sample\tkind\treads\treference\nbad\t{kind}\t{reads}\t{reference}\n")
    # The BAM's jobs only (staging finds the first two, reading the sheet the third)
    done = run_workflow(work, "results/bad/align/bad.minimap2.bam")
    assert done.returncode == 1
    lines = [x for x in (done.stdout + done.stderr).splitlines() if x.startswith("numapore: ")]
    about = [x for x in lines if "'bad'" in x]
    assert about == [f"numapore: {reason}".replace("{sheet}", "config/samples.tsv")], lines
    assert not list((work / "results").glob("bad/align/*.bam"))
