"""Short reads as an input kind (issue 29): the kinds table, the sheet, staging with the mates
checked, the split that keeps mates together on whole bwa batches, and real workflow runs on the
lambda-phage reads of Debian's bowtie2-examples (single-end and pairs, gzip) with bwa, bowtie2,
minimap2 and SNAP: primary alignments equal to the tool run by hand with the same options,
duplicates marked, and the same records under a NUMA strategy and a scattered alignment as under
none."""

from __future__ import annotations

import functools
import gzip
import io
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pysam
import pytest
import forked_snakemake
import yaml
from conftest import SHARED, host_file
from project import REPO, snakemake_command
from runs_modbam_short import SHORT_ALIGNERS, SHORT_TEST_BATCH

from numapore.base.errors import InputError
from numapore.execution.hosts import host_config_from_dict
from numapore.execution.shards import (
    bwa_batch_ends,
    settle_read_groups,
    shares_on_batches,
    split_short_reads,
)
from numapore.execution.steps import run_alignment
from numapore.execution.tools import align_command
from numapore.inputs.kinds import KINDS, infer_kind
from numapore.inputs.sheet import load_samples, read_sheet
from numapore.inputs import seqcheck
from numapore.inputs.short_reads import check_mates, plain_mates, stage_short_reads

EXAMPLES = Path("/usr/share/doc/bowtie2/examples")  # Debian's bowtie2-examples (setup.sh)
R1 = EXAMPLES / "reads" / "reads_1.fq.gz"  # 10,000 pairs of simulated lambda-phage reads
R2 = EXAMPLES / "reads" / "reads_2.fq.gz"
SINGLE = EXAMPLES / "reads" / "longreads.fq.gz"  # 6,000 single-end reads
LAMBDA = EXAMPLES / "reference" / "lambda_virus.fa.gz"
BATCH = KINDS["short"].batch_bases
READ_GROUP = "@RG\\tID:{0}\\tSM:{0}"


@pytest.fixture(scope="module", autouse=True)
def examples() -> None:
    """The test data is there (./setup.sh installs bowtie2-examples)."""
    if not R1.is_file():
        pytest.fail(f"{R1} missing: run ./setup.sh (Debian package bowtie2-examples)")


# ---------- the table and the sheet ----------


def test_short_kind_in_the_table() -> None:
    """Kind short: no signal, no methylation step, its own presets (bwa with a fixed batch and
    the sample's read group), minimap2's short-read index; told from a row with reads2."""
    short = KINDS["short"]
    assert not short.needs_signal and not short.steps and short.paired
    assert not any(short.runs(step) for step in ("raw_signal", "call_methylation", "pileup"))
    assert short.aligner_preset("bwa", "s1") == f"mem -K {BATCH} -R '{READ_GROUP.format('s1')}'"
    assert short.aligner_preset("bowtie2") == "--end-to-end"
    assert short.aligner_preset("minimap2") == "-ax sr" and short.minimap2_index == "sr"
    assert KINDS["signal"].aligner_preset("bwa") == "mem -x ont2d"  # the long-read presets stay
    assert infer_kind("", "", "r1.fq", "k", "r2.fq") == "short"
    assert infer_kind("short", "", "r1.fq", "k") == "short"
    with pytest.raises(InputError, match=r"^k: no raw signal .* short: single-end short reads"):
        infer_kind("", "", "r.fastq", "k")
    with pytest.raises(InputError, match="^k: a signal sample takes no second reads file"):
        infer_kind("signal", "fast5/", "r1.fq", "k", "r2.fq")


def test_align_command_takes_the_mates() -> None:
    """bowtie2 gets -1/-2 for pairs and -U alone; bwa and minimap2 both files; fixmate -m
    before the sort when duplicates are marked, its pipe uncompressed (-u); the sort writes fast
    (-l 1) the BAM that samtools merge writes again, at the default level a long-read BAM it makes
    final."""
    paired = align_command("bowtie2", "ix", R1, Path("o.bam"), 2, "short", R2, "s", True)
    assert f"bowtie2 --end-to-end -p 2 -x ix -q -1 {R1} -2 {R2} | samtools fixmate -u -m" in paired
    assert f"-U {SINGLE} |" in align_command("bowtie2", "ix", SINGLE, Path("o.bam"), 2, "short")
    bwa = align_command("bwa", "ix", R1, Path("o.bam"), 2, "short", R2, "s")
    assert bwa.startswith(f"bwa mem -K {BATCH} -R '@RG\\tID:s\\tSM:s' -t 2 ix {R1} {R2} | ")
    assert "fixmate" not in bwa and bwa.endswith(" | samtools sort -@ 2 -l 1 -o o.bam -")
    long_reads = align_command("minimap2", "ix", R1, Path("o.bam"), 2, "signal")
    assert long_reads.endswith(" | samtools sort -@ 2 -o o.bam -")
    with pytest.raises(ValueError, match="signal samples take one reads file"):
        align_command("bwa", "ix", R1, Path("o.bam"), 2, "signal", R2)


def write_sheet(path: Path, rows: list[str]) -> Path:
    """A sheet with the columns of short samples and the given rows."""
    path.write_text("sample\tkind\treads\treads2\treference\n" + "\n".join(rows) + "\n")
    return path


def test_sheet_rows_of_the_short_kind(tmp_path: Path) -> None:
    """Pairs and declared single-end rows load; a missing R2, FASTA reads, mates in two
    formats and undeclared single-end reads each give one line naming the row."""
    plain = tmp_path / "r2.fq"
    plain.write_bytes(gzip.decompress(R2.read_bytes()))
    fasta = tmp_path / "r.fa"
    fasta.write_text(">r1\nACGT\n")
    sheet = write_sheet(
        tmp_path / "s.tsv", [f"pe\t\t{R1}\t{R2}\t{LAMBDA}", f"se\tshort\t{SINGLE}\t\t{LAMBDA}"]
    )
    samples = load_samples(read_sheet(sheet), sheet, tmp_path)
    assert [(s.kind, s.paired, s.reads_format) for s in samples.values()] == [
        ("short", True, "fastq.gz"),
        ("short", False, "fastq.gz"),
    ]
    assert samples["pe"].reads2 == R2 and samples["se"].reads2 is None
    rows = {
        f"a\t\t{R1}\t{tmp_path / 'no.fq.gz'}\t{LAMBDA}": f"reads file {tmp_path / 'no.fq.gz'} "
        "does not exist",
        f"b\tshort\t{fasta}\t\t{LAMBDA}": f"reads file {fasta}: a short sample's reads are FASTQ",
        f"c\t\t{R1}\t{plain}\t{LAMBDA}": f"reads2 file {plain} is fastq but reads {R1} is "
        "fastq.gz; give both mates in one format (both .gz or neither)",
        f"d\t\t{SINGLE}\t\t{LAMBDA}": "no raw signal and the reads are not a BAM/CRAM",
    }
    for row, reason in rows.items():
        write_sheet(sheet, [row])
        with pytest.raises(InputError) as err:
            load_samples(read_sheet(sheet), sheet, tmp_path)
        assert str(err.value).startswith(f"sample sheet {sheet}, line 2, sample '{row[0]}': ")
        assert reason in str(err.value), err.value


# ---------- staging ----------


def fastq_lines(path: Path) -> list[str]:
    """The lines of a (gzip) FASTQ file."""
    return gzip.decompress(path.read_bytes()).decode().splitlines()


def write_fastq(path: Path, lines: list[str]) -> Path:
    """Write FASTQ lines to path."""
    path.write_text("\n".join(lines) + "\n")
    return path


def test_staging_checks_the_mates(tmp_path: Path) -> None:
    """Real pairs stage (links); R2 with a record fewer, a mate out of order, or a truncated
    R2 stop with one line naming the file and the record, and nothing is left staged."""
    done = stage_short_reads(R1, tmp_path / "s.1.fq.gz", "fastq.gz", R2, tmp_path / "s.2.fq.gz")
    assert "10000 pairs" in done and (tmp_path / "s.2.fq.gz").is_symlink()
    lines = fastq_lines(R2)
    fewer = write_fastq(tmp_path / "fewer.fq", lines[:-4])
    swapped = write_fastq(tmp_path / "swapped.fq", lines[4:8] + lines[:4] + lines[8:])
    cut = write_fastq(tmp_path / "cut.fq", lines[:-1])
    plain1 = write_fastq(tmp_path / "r1.fq", fastq_lines(R1))
    expected = {
        fewer: f"reads file {fewer}: ends after 9999 records, but its mate file {plain1} has "
        "more (record 10000: r10000)",
        swapped: f"reads file {swapped}, record 1: read r2 is not the mate of record 1 of "
        f"{plain1} (r1)",
        cut: f"reads file {cut}, line 39999 (record 10000): truncated: quality shorter than the "
        "sequence (0 < ",
    }
    for bad, reason in expected.items():
        out = tmp_path / f"out.{bad.stem}"
        out.mkdir()
        with pytest.raises(InputError) as err:
            stage_short_reads(plain1, out / "1.fq", "fastq", bad, out / "2.fq")
        assert str(err.value).startswith(reason), err.value
        assert "\n" not in str(err.value)
    assert check_mates(plain1, write_fastq(tmp_path / "named.fq", [
        f"{x}/2" if i % 4 == 0 else x for i, x in enumerate(lines)
    ])) == 10000  # fmt: skip


def test_plain_mates_agree_with_the_parser_and_check_mates(tmp_path: Path, monkeypatch) -> None:
    """The one-pass check of plain pairs counts what check_mates counts, blocks of R1 and R2
    holding different numbers of records (short R1 reads, long R2 reads, small blocks); it
    takes mate suffixes and comments as bwa does, and gives None (the parser and check_mates
    then) for a record fewer, mates out of order, a mate renamed in the last block, or a record
    the block check does not take."""
    assert plain_mates(R1, R2) == check_mates(R1, R2) == 10000
    monkeypatch.setattr(seqcheck, "FAST_BLOCK", 997)  # many blocks, cut inside records

    def pairs(count: int, name2: str = "r{}/2 2:N:0", length2: int = 150) -> tuple[Path, Path]:
        first = [f"@r{i}/1 1:N:0\n{'A' * 30}\n+\n{'I' * 30}\n" for i in range(count)]
        second = [
            f"@{name2.format(i)}\n{'C' * length2}\n+\n{'I' * length2}\n" for i in range(count)
        ]
        (tmp_path / "1.fq").write_text("".join(first))
        (tmp_path / "2.fq").write_text("".join(second))
        return tmp_path / "1.fq", tmp_path / "2.fq"

    for length2 in (30, 150):
        assert plain_mates(*pairs(500, length2=length2)) == check_mates(*pairs(500)) == 500
    assert plain_mates(*pairs(500, name2="r{}")) == 500
    first, second = pairs(500)
    lines = second.read_text().splitlines(keepends=True)
    second.write_text("".join(lines[:-4]))  # a record fewer
    assert plain_mates(first, second) is None
    second.write_text("".join(lines[4:8] + lines[:4] + lines[8:]))  # mates out of order
    assert plain_mates(first, second) is None
    second.write_text("".join(lines[:-4]) + "@other/2\n" + "".join(lines[-3:]))
    assert plain_mates(first, second) is None
    second.write_text("".join(lines[:1] + [lines[1].lower()] + lines[2:]))  # parser's to tidy
    assert plain_mates(first, second) is None
    assert stage_short_reads(first, tmp_path / "s1.fq", "fastq", second, tmp_path / "s2.fq")
    assert not (tmp_path / "s2.fq").is_symlink()  # a tidied copy


def test_a_quality_line_may_start_with_at(tmp_path: Path) -> None:
    """'@' is a quality (31): longreads.fq has a record whose quality starts with it."""
    done = stage_short_reads(SINGLE, tmp_path / "s.fq.gz", "fastq.gz")
    assert done.endswith("6000 records, linked"), done


# ---------- splitting ----------


def records_of(path: Path) -> list[tuple[str, str, str]]:
    """(name, sequence, quality) of every record of a FASTQ file."""
    with pysam.FastxFile(str(path)) as fastx:
        return [(r.name, r.sequence, r.quality) for r in fastx]


def test_bwa_batches_as_bwa_cuts_them() -> None:
    """A batch ends at the fragment reaching the batch size, with an even number of reads."""
    assert bwa_batch_ends([3, 3, 3, 3, 3], 5, paired=False) == [(2, 6), (4, 12), (5, 15)]
    assert bwa_batch_ends([6, 6, 6], 5, paired=True) == [(1, 6), (2, 12), (3, 18)]
    assert bwa_batch_ends([6, 6, 6], 100, paired=True) == [(3, 18)]
    assert shares_on_batches([(3, 18)], 3) == [3, 0, 0]
    assert shares_on_batches(bwa_batch_ends([3] * 10, 5, False), 3) == [2, 4, 4]


def primary_records(sam: str) -> list[str]:
    """The primary records of SAM text, sorted (names, flags, positions, CIGAR, mates, bases)."""
    keep = [x for x in sam.splitlines() if x and not x.startswith("@")]
    return sorted(x for x in keep if not int(x.split("\t")[1]) & 0x900)


@pytest.fixture(scope="module")
def lambda_index(tmp_path_factory) -> Path:
    """The lambda genome, plain, with its bwa and bowtie2 indexes, built by hand (and SNAP's,
    in the folder lambda.fa.snap)."""
    folder = tmp_path_factory.mktemp("lambda")
    fasta = folder / "lambda.fa"
    fasta.write_bytes(gzip.decompress(LAMBDA.read_bytes()))
    subprocess.run(["bwa", "index", str(fasta)], check=True, capture_output=True)
    subprocess.run(["bowtie2-build", "-q", str(fasta), str(fasta)], check=True)
    snap = ["snap-aligner", "index", str(fasta), f"{fasta}.snap", "-t2"]
    subprocess.run(snap, check=True, capture_output=True)
    return fasta


def bwa_by_hand(index: Path, r1: Path, r2: Path | None, batch: int) -> str:
    """bwa mem on the reads as the kind's preset runs it, with a batch size of batch bases."""
    argv = ["bwa", "mem", "-K", str(batch), "-t", "2", str(index), str(r1)]
    return subprocess.run(
        argv + ([str(r2)] if r2 else []), check=True, capture_output=True, text=True
    ).stdout


# Small batches (about 9 pairs): bwa's insert sizes then vary from batch to batch, so a shard
# that began inside a batch would place pairs differently (test_a_cut_inside_a_batch_differs).
SMALL_BATCH = 2000


@pytest.fixture(scope="module")
def odd_pairs(tmp_path_factory, lambda_index) -> tuple[Path, Path, list[str]]:
    """The 10,000 pairs and the first pair again under another name: 10,001 (odd) pairs; and
    bwa's primary records of them unsplit with SMALL_BATCH (made once for the tests below)."""
    folder = tmp_path_factory.mktemp("odd_pairs")
    lines1, lines2 = fastq_lines(R1), fastq_lines(R2)
    extra = ["@again", *lines1[1:4]], ["@again", *lines2[1:4]]
    r1 = write_fastq(folder / "r1.fq", lines1 + extra[0])
    r2 = write_fastq(folder / "r2.fq", lines2 + extra[1])
    return r1, r2, primary_records(bwa_by_hand(lambda_index, r1, r2, SMALL_BATCH))


@pytest.mark.parametrize("shards", [3, 5])
def test_split_keeps_mates_together_and_bwa_agrees(
    tmp_path, lambda_index, odd_pairs, shards
) -> None:
    """10,001 pairs (odd) into 3 or 5 shards (odd) on whole bwa batches: every shard of R2
    holds the mates of its R1 shard in order, the shards put back are the input, and bwa mem on
    each shard with the same -K gives the unsplit run's primary records, mates and insert sizes
    included (bwa estimates them per batch)."""
    r1, r2, whole = odd_pairs
    outs = [tmp_path / f"in.{i}.fq" for i in range(shards)]
    mates = [tmp_path / f"in.{i}.R2.fq" for i in range(shards)]
    counts = split_short_reads(r1, r2, outs, mates, batch_bases=SMALL_BATCH)
    assert sum(counts) == 10_001 and all(counts), counts
    for one, two, n in zip(outs, mates, counts, strict=True):
        first, second = records_of(one), records_of(two)
        assert len(first) == len(second) == n
        assert [a[0] for a in first] == [b[0] for b in second]  # mates never apart
    assert sum((records_of(p) for p in outs), []) == records_of(r1)
    assert sum((records_of(p) for p in mates), []) == records_of(r2)
    split = sorted(
        x
        for one, two in zip(outs, mates, strict=True)
        for x in primary_records(bwa_by_hand(lambda_index, one, two, SMALL_BATCH))
    )
    assert split == whole and len(whole) == 20_002


def test_a_cut_inside_a_batch_differs(tmp_path, lambda_index, odd_pairs) -> None:
    """Why shares end on batch ends: the same pairs cut after pair 5,001, inside a batch, give
    bwa other records for some pairs than the unsplit run."""
    r1, r2, whole = odd_pairs
    with pysam.FastxFile(str(r1)) as a, pysam.FastxFile(str(r2)) as b:
        lengths = [len(x.sequence) + len(y.sequence) for x, y in zip(a, b, strict=True)]
    assert 5001 not in [end for end, _ in bwa_batch_ends(lengths, SMALL_BATCH, paired=True)]
    halves = []
    for mates in (r1, r2):
        lines = mates.read_text().splitlines()
        halves.append((write_fastq(tmp_path / f"a.{mates.name}", lines[: 4 * 5001]),
                       write_fastq(tmp_path / f"b.{mates.name}", lines[4 * 5001 :])))  # fmt: skip
    split = sorted(
        x
        for i in range(2)
        for x in primary_records(bwa_by_hand(lambda_index, halves[0][i], halves[1][i], SMALL_BATCH))
    )
    assert len(split) == len(whole) and split != whole


# ---------- the workflow ----------

RUN_SAMPLES = {"pe": (R1, R2), "se": (SINGLE, None)}
BIG_BATCH = SHORT_TEST_BATCH  # bwa's -K where the pairs are split: two batches of them


def write_short_project(
    work: Path,
    aligner: str,
    config: dict | None = None,
    single: bool = True,
) -> Path:
    """A project with the pairs (pe) and the single-end reads (se; not when single is False)
    against lambda, no demo."""
    (work / "config").mkdir(parents=True, exist_ok=True)
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    base.update({"simulate": {}, "aligner": aligner, **(config or {})})
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(base))
    rows = [f"pe\t\t{R1}\t{R2}\t{LAMBDA}"]
    if single:
        rows.append(f"se\tshort\t{SINGLE}\t\t{LAMBDA}")
    write_sheet(work / "config" / "samples.tsv", rows)
    return work


def run_workflow(work: Path, *args: str) -> subprocess.CompletedProcess:
    """The real workflow in work on 2 cores, with the hpc-numa profile."""
    return forked_snakemake.run(
        snakemake_command(work, 2, *args), capture_output=True, text=True, timeout=1200
    )


@pytest.fixture(scope="module")
def runs(short_runs) -> dict[str, Path]:
    """Both samples through the workflow with each aligner (strategy none, not scattered): one
    folder (short_runs, .test/config-short.yaml's samples)."""
    return {aligner: short_runs for aligner in SHORT_ALIGNERS}


def bam_of(work: Path, sample: str, aligner: str) -> Path:
    """The sample's BAM of a run."""
    return work / f"results/{sample}/align/{sample}.{aligner}.bam"


@functools.cache
def by_hand(aligner: str, index: Path, sample: str, threads: int = 2, batch: int = BATCH) -> str:
    """The aligner run by hand on the sample's reads with the kind's options (its own index;
    bwa's -K: batch); run once per arguments (bwa's on the pairs serves two tests)."""
    r1, r2 = RUN_SAMPLES[sample]
    if aligner == "bwa":
        argv = ["bwa", "mem", "-K", str(batch), "-R", READ_GROUP.format(sample)]
        argv += ["-t", str(threads), str(index), str(r1)] + ([str(r2)] if r2 else [])
    else:
        mates = ["-1", str(r1), "-2", str(r2)] if r2 else ["-U", str(r1)]
        argv = ["bowtie2", "--end-to-end", "-p", str(threads), "-x", str(index), "-q", *mates]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def core_fields(records: list[str], tlen: bool = True) -> list[tuple]:
    """Name, flag (duplicate mark aside), contig, position, MAPQ, CIGAR, mate contig and
    position (and TLEN), bases and qualities of each record, sorted."""
    rows = []
    for line in records:
        f = line.split("\t")
        row = (f[0], int(f[1]) & ~0x400, *f[2:8], *(f[8:9] if tlen else []), f[9], f[10])
        rows.append(row)
    return sorted(rows)


@pytest.mark.parametrize("aligner", ["bwa", "bowtie2"])
@pytest.mark.parametrize("sample", ["pe", "se"])
def test_primary_alignments_equal_the_tool_by_hand(runs, lambda_index, tmp_path, aligner, sample):
    """The workflow's primary records are the aligner's run by hand with the kind's options:
    every field but TLEN (samtools fixmate -m, which markdup needs, recomputes it on some
    discordant pairs) and the duplicate mark; with the hand run through the same fixmate, sort
    and markdup, every field of every record, duplicate marks and TLEN included."""
    sam = by_hand(aligner, lambda_index, sample, batch=SHORT_TEST_BATCH)  # the runs' -K
    got = primary_records(pysam.view(str(bam_of(runs[aligner], sample, aligner))))
    assert len(got) == (20_000 if sample == "pe" else 6_000)
    assert core_fields(got, tlen=False) == core_fields(primary_records(sam), tlen=False)
    raw = tmp_path / "raw.sam"
    raw.write_text(sam)
    fixed = tmp_path / "fixed.bam"
    shell = (
        f"samtools fixmate -m {raw} - | samtools sort -o {tmp_path / 's.bam'} - && "
        f"samtools markdup {tmp_path / 's.bam'} {fixed}"
    )
    subprocess.run(shell, shell=True, check=True, capture_output=True)
    marked = primary_records(pysam.view(str(fixed)))
    assert [x.split("\t")[:11] for x in got] == [x.split("\t")[:11] for x in marked]
    assert sum(int(x.split("\t")[1]) & 0x400 > 0 for x in got) > 0  # duplicates marked


@pytest.mark.parametrize("aligner", ["bwa", "bowtie2", "minimap2"])
def test_outputs_and_accounting(runs, aligner) -> None:
    """Sorted, indexed BAM with flagstat, stats (insert sizes for pairs), the kind's accounting
    (reads and pairs in, mapped, properly paired, duplicates: flagstat's numbers); no
    methylation output. With the run's aligner (bwa, the config's): the report's alignment
    section and MultiQC's samtools reports (both read samtools' reports, whatever the aligner)."""
    work = runs[aligner]
    for sample in RUN_SAMPLES:
        bam = bam_of(work, sample, aligner)
        header = pysam.AlignmentFile(str(bam)).header.to_dict()
        assert header["HD"]["SO"] == "coordinate" and bam.with_suffix(".bam.bai").is_file()
        name = f"results/{sample}/align/{sample}.{aligner}"
        flagstat = yaml.safe_load((work / f"{name}.flagstat.json").read_text())["QC-passed reads"]
        summary = (work / f"{name}.summary.tsv").read_text().splitlines()
        row = dict(zip(summary[0].split("\t"), summary[1].split("\t"), strict=True))
        paired = sample == "pe"
        assert int(row["reads_in"]) == flagstat["primary"] == (20_000 if paired else 6_000)
        assert int(row["pairs_in"]) == (10_000 if paired else 0)
        # Mapped: bwa 97.6 %, bowtie2 95 %, minimap2 -ax sr 90 % of the pairs' reads.
        assert int(row["primary_mapped"]) == flagstat["primary mapped"] > 0.85 * flagstat["primary"]
        assert int(row["properly_paired"]) == flagstat["properly paired"]
        assert (int(row["properly_paired"]) > 0) == paired
        assert int(row["duplicates"]) == flagstat["primary duplicates"] > 0
        stats = (work / f"{name}.stats.txt").read_text()
        assert ("\nIS\t" in stats) == paired  # insert sizes of pairs
        if aligner == "bwa":
            assert (work / f"results/{sample}/report/{sample}.bwa.alignment_qc.png").is_file()
        assert not (work / f"results/{sample}/methylation").exists()
    if aligner != "bwa":
        return
    data = work / "results/multiqc/numapore_multiqc_data"
    for table in ("multiqc_samtools_stats.txt", "multiqc_samtools_flagstat.txt"):
        names = [x.split("\t")[0] for x in (data / table).read_text().splitlines()[1:]]
        assert sorted(names) == ["pe.bwa", "se.bwa"], (table, names)


def test_minimap2_uses_its_short_read_index(runs) -> None:
    """minimap2 aligns short reads with the index of its sr preset, not the map-ont one."""
    log = (runs["minimap2"] / "results/logs/align/pe.minimap2.1-of-1.log").read_text()
    assert (
        "minimap2 -ax sr -t 2 results/references/lambda_virus/minimap2/lambda_virus.sr.mmi" in log
    )


def records(bam: Path) -> list[str]:
    """A BAM's records as text (no header: its @PG lines name the run)."""
    return pysam.view(str(bam)).splitlines()


def test_strategy_and_scatter_give_the_records_of_none(runs, tmp_path) -> None:
    """A NUMA strategy (localalloc; interleave: test_modbam_kind.py's scattered run, and
    test_execution_modes.py runs each) with the alignment scattered over 3 jobs: bwa's BAMs hold
    the records of the run with strategy none (itself bwa's by hand: the test above), in the
    same order, duplicate marks included; the pairs and the single-end reads (each two batches
    of BIG_BATCH bases) were cut at bwa's batch ends into two non-empty shards and an empty third,
    which goes through the alignment and the merge too."""
    strategy, scatter = "localalloc", 3
    # The host on the command line: the hpc-numa profile's host=auto would win over the file's
    host = host_file(tmp_path / "host.yaml", strategy)
    settings = {"scatter": {"alignment": scatter}, "short_reads": {"bwa_batch_bases": BIG_BATCH}}
    work = write_short_project(tmp_path / "run", "bwa", settings)
    bams = [str(bam_of(Path(), s, "bwa")) for s in RUN_SAMPLES]
    done = run_workflow(work, *bams, "--config", f"host={host}")
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((work / f"results/logs/align/pe.bwa.1-of-{scatter}.run.json").read_text())
    assert record["strategy"] == strategy, record
    for sample in RUN_SAMPLES:
        got, baseline = bam_of(work, sample, "bwa"), bam_of(runs["bwa"], sample, "bwa")
        assert records(got) == records(baseline), sample
    for log, what, total in (("split_paired_reads/pe", "pairs", 10_000),
                             ("split_reads/se", "reads", 6_000)):  # fmt: skip
        text = (work / f"results/logs/{log}.fastq.log").read_text()
        counts = [int(n) for n in text.split(f"{what} per shard: [")[1].split("]")[0].split(",")]
        assert sum(counts) == total and counts[0] and counts[1] and not counts[2], (log, counts)


def test_alignment_reports_take_the_cores_where_nothing_runs_beside(tmp_path: Path) -> None:
    """samtools stats and flagstat of a short sample, whose alignment is its last step, take
    the run's cores; a modBAM sample's hold none, as they run beside its pileup (the threads of
    each job in Snakemake's dry run)."""
    work = write_short_project(tmp_path / "run", "minimap2", single=False)
    modbam = SHARED / "data/modkit_pileup/inputs"
    with open(work / "config/samples.tsv", "a") as sheet:
        sheet.write(f"mb\tmodbam\t{modbam / 'bc_anchored_10_reads.unmapped.bam'}\t\t"
                    f"{modbam / 'CGI_ladder_3.6kb_ref.fa'}\n")  # fmt: skip
    done = run_workflow(work, "--dry-run")
    assert done.returncode == 0, done.stderr[-3000:]
    threads = {}
    for block in re.split(r"\n(?=(?:local)?rule )", done.stdout + done.stderr):
        if block.startswith("rule alignment_reports:"):
            sample = re.search(r"wildcards: sample=(\w+)", block).group(1)
            found = re.search(r"^\s+threads: (\d+)$", block, re.M)
            threads[sample] = int(found.group(1)) if found else 1
    assert threads == {"pe": 2, "mb": 0}, threads


def test_mismatched_mates_stop_the_run_at_staging(tmp_path: Path) -> None:
    """R2 with a record fewer stops the run at staging with one numapore line naming the
    sample, the file and the record; no BAM is made."""
    work = write_short_project(tmp_path / "run", "bwa")
    fewer = write_fastq(tmp_path / "r2.fq", fastq_lines(R2)[:-4])
    plain = write_fastq(tmp_path / "r1.fq", fastq_lines(R1))
    write_sheet(work / "config/samples.tsv", [f"pe\t\t{plain}\t{fewer}\t{LAMBDA}"])
    done = run_workflow(work, str(bam_of(Path(), "pe", "bwa")))
    assert done.returncode == 1
    lines = [x for x in (done.stdout + done.stderr).splitlines() if x.startswith("numapore: ")]
    assert [x for x in lines if "host file" not in x] == [
        f"numapore: sample 'pe': reads file {fewer}: ends after 9999 records, but its mate file "
        f"{plain} has more (record 10000: r10000); the two files of pairs hold the same reads "
        "in the same order"
    ], lines
    assert not list((work / "results").glob("pe/align/*.bam"))


def test_mark_duplicates_off(tmp_path: Path, lambda_index) -> None:
    """short_reads.mark_duplicates: false leaves the aligner's records as they are (no fixmate,
    no markdup): every field of the primary records, TLEN included, is bwa's by hand with the
    same -K. And short_reads.bwa_batch_bases reaches bwa's -K (BIG_BATCH: two batches of the
    pairs, whose records differ from the default's one batch)."""
    settings = {"short_reads": {"mark_duplicates": False, "bwa_batch_bases": BIG_BATCH}}
    work = write_short_project(tmp_path / "run", "bwa", settings)
    shutil.rmtree(work / "results", ignore_errors=True)
    write_sheet(work / "config/samples.tsv", [f"pe\t\t{R1}\t{R2}\t{LAMBDA}"])
    done = run_workflow(work, str(bam_of(Path(), "pe", "bwa")))
    assert done.returncode == 0, done.stderr[-3000:]
    got = primary_records(pysam.view(str(bam_of(work, "pe", "bwa"))))
    hand = primary_records(by_hand("bwa", lambda_index, "pe", batch=BIG_BATCH))
    assert [x.split("\t")[:11] for x in got] == [x.split("\t")[:11] for x in hand]
    assert not any(int(x.split("\t")[1]) & 0x400 for x in got)
    (record,) = (work / "results/logs/align").glob("pe.bwa.*.run.json")
    (process,) = json.loads(record.read_text())["processes"]
    assert f" mem -K {BIG_BATCH} " in process["command"], process["command"]


@pytest.mark.parametrize("marked", [True, False], ids=["markdup", "no-markdup"])
def test_shards_of_one_step_merge_to_the_unsplit_bam(tmp_path, lambda_index, marked):
    """The split a step makes for per-node instances, run here as 3 unbound processes (this
    machine has one node): the pairs cut on bwa's batch end (-K BIG_BATCH) into 2 shares
    (and an empty third), bwa run on each with its R2 shard, the BAMs merged and settled: the
    records of the unsplit run, in order, tag for tag."""
    host = host_config_from_dict(
        {"topology": "auto", "strategy": {"alignment": "none", "methylation": "none"}}, name="t"
    )
    index_files = [Path(f"{lambda_index}{s}") for s in (".amb", ".ann", ".bwt", ".pac", ".sa")]
    bams = []
    for pool in (1, 3):
        bam = tmp_path / f"pool{pool}.bam"
        run = run_alignment(
            host, "bwa", str(lambda_index), index_files, R1, bam, 3,
            tmp_path / f"pool{pool}.run.json", "short", R2, "big", marked, pool=pool,
            batch=BIG_BATCH,
        )  # fmt: skip
        assert len(run.processes) == pool
        settle_read_groups(bam, 2, io.StringIO(), marked)
        bams.append(bam)
    shards = [Path(p.input) for p in run.processes]
    assert [p.name for p in shards] == ["in.1.fastq", "in.2.fastq", "in.3.fastq"]
    inner = shlex.split(run.processes[1].command)[-1]  # bash -o pipefail -c '...'
    assert "-R '@RG\\tID:big\\tSM:big'" in inner
    assert f"{shards[1]} {shards[1].parent / 'in.2.R2.fastq'} |" in inner
    assert records(bams[1]) == records(bams[0]) and len(records(bams[0])) >= 20_000
    assert f" mem -K {BIG_BATCH} " in inner
    duplicates = sum(int(x.split("\t")[1]) & 0x400 > 0 for x in records(bams[1]))
    assert (duplicates > 0) == marked


# ---------- SNAP ----------

SNAP_OPTIONS = ["-b-", "-map-", "-R", READ_GROUP.format("pe")]


def test_bwa_batch_is_the_kinds_or_the_configs() -> None:
    """bwa's -K: the short kind's 10 M bases unless config short_reads.bwa_batch_bases sets it
    (the schema's default is the kind's); kinds without batches have none."""
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    default = schema["properties"]["short_reads"]["properties"]["bwa_batch_bases"]["default"]
    assert KINDS["short"].batch({}) == KINDS["short"].batch_bases == default == 10_000_000
    assert KINDS["short"].batch({"short_reads": {"bwa_batch_bases": 5000}}) == 5000
    assert KINDS["short"].aligner_preset("bwa", "s", batch=5000).startswith("mem -K 5000 ")
    assert KINDS["modbam"].batch({"short_reads": {"bwa_batch_bases": 5000}}) == 0


def test_snap_preset_and_command() -> None:
    """SNAP aligns pairs (paired) and single-end reads (single) to SAM on its standard output,
    with the sample's read group, its threads left where numactl put them (-b-) and its index
    read into the process's memory (-map-); it aligns short reads only."""
    assert KINDS["short"].aligner_preset("snap", "s") == "-b- -map- -R '@RG\\tID:s\\tSM:s'"
    paired = align_command("snap", "ix", R1, Path("o.bam"), 2, "short", R2, "s")
    assert paired.startswith(
        f"snap-aligner paired ix {R1} {R2} -b- -map- -R '@RG\\tID:s\\tSM:s' -t 2 -o -sam - | "
        "samtools sort -@ 2 -l 1 -o o.bam -"
    )
    single = align_command("snap", "ix", SINGLE, Path("o.bam"), 2, "short")
    assert single.startswith(f"snap-aligner single ix {SINGLE} -b- ")
    refusal = r"^aligner snap cannot align modbam samples \(it aligns short samples only\); use "
    with pytest.raises(InputError, match=refusal + "bowtie2 or bwa or minimap2$"):
        KINDS["modbam"].aligner_preset("snap")


@pytest.fixture(scope="module")
def snap_run(short_runs) -> Path:
    """The pairs through the workflow with SNAP, its index built by the workflow's rule (the
    single-end reads hold reads longer than SNAP takes: test_snap_refuses_longer_reads): in
    short_runs' folder."""
    return short_runs


def test_snap_alignments_equal_snap_by_hand(snap_run, lambda_index, tmp_path) -> None:
    """The workflow's SNAP records are snap-aligner's run by hand with the kind's options on its
    own index, through the same fixmate, sort and markdup: every field of every primary record
    (which of equal fragments is marked the duplicate aside); its index is the one snap-aligner
    index builds; the accounting counts the pairs."""
    folder = snap_run / "results/references/lambda_virus/snap/lambda_virus.snap"
    by_hand = Path(f"{lambda_index}.snap")
    for name in ("Genome", "GenomeIndex", "OverflowTable"):
        assert (folder / name).read_bytes() == (by_hand / name).read_bytes(), name
    # The hash table is filled by the index's threads in the order they run: its bytes differ
    # from build to build (the same snap-aligner command, twice), its size does not.
    assert (folder / "GenomeIndexHash").stat().st_size == (
        by_hand / "GenomeIndexHash"
    ).stat().st_size
    argv = ["snap-aligner", "paired", f"{lambda_index}.snap", str(R1), str(R2), *SNAP_OPTIONS]
    sam = subprocess.run(
        [*argv, "-t", "2", "-o", "-sam", "-"], check=True, capture_output=True, text=True
    ).stdout
    (tmp_path / "raw.sam").write_text(sam)
    shell = (
        f"samtools fixmate -m {tmp_path / 'raw.sam'} - | samtools sort -o {tmp_path / 's.bam'} - "
        f"&& samtools markdup {tmp_path / 's.bam'} {tmp_path / 'm.bam'}"
    )
    subprocess.run(shell, shell=True, check=True, capture_output=True)
    got = primary_records(pysam.view(str(bam_of(snap_run, "pe", "snap"))))
    marked = primary_records(pysam.view(str(tmp_path / "m.bam")))
    assert len(got) == 20_000
    # SNAP's threads write their batches as they finish, so equal fragments reach markdup in
    # another order from run to run and it may mark another of them: the marks aside, every
    # field (TLEN too) is equal, and so is the number marked.
    assert core_fields(got) == core_fields(marked)
    assert sum(int(x.split("\t")[1]) & 0x400 > 0 for x in got) == sum(
        int(x.split("\t")[1]) & 0x400 > 0 for x in marked
    )
    assert all("\tRG:Z:pe" in x for x in got)
    summary = (snap_run / "results/pe/align/pe.snap.summary.tsv").read_text().splitlines()
    row = dict(zip(summary[0].split("\t"), summary[1].split("\t"), strict=True))
    # SNAP leaves reads under 50 bases unaligned (its -mrl): 81 % of these reads map.
    assert row["pairs_in"] == "10000" and int(row["primary_mapped"]) > 0.8 * 20_000


def test_snap_refuses_longer_reads(tmp_path, lambda_index) -> None:
    """SNAP takes reads of up to 1000 bases (compiled in): a longer one stops the alignment
    before SNAP starts, with one line naming the file, the record and the read; no BAM."""
    host = host_config_from_dict({"strategy": {"alignment": "none", "methylation": "none"}})
    out = tmp_path / "se.bam"
    with pytest.raises(InputError) as err:
        run_alignment(host, "snap", f"{lambda_index}.snap", [lambda_index], SINGLE, out, 2,
                      tmp_path / "run.json", "short", sample="se")  # fmt: skip
    assert str(err.value) == (
        f"reads file {SINGLE}, record 26: read r26 has 1337 bases, more than the 1000 that snap "
        "takes; align these reads with bwa, bowtie2 or minimap2"
    )
    assert not out.exists()
