"""Reference preparation and the scatter/gather helpers, on small real files and real samtools."""

import gzip
import io
import subprocess
from pathlib import Path

import pysam
import pytest

from numapore.base.errors import AccountingError
from numapore.inputs.reference import check_contigs, prepare_reference
from numapore.inputs.sheet import InputError
from numapore.execution.shards import (
    REPORTS_BESIDE,
    concat_tables,
    finish_sample_bam,
    link_or_copy,
    merge_bams,
    shard_of_read,
    split_bam,
    split_fastx,
    start_index_and_reports,
)


def test_check_contigs(tmp_path):
    fasta = tmp_path / "dup.fa"
    fasta.write_text(">a desc\nAC\n>b\nGT\n>a\nTT\n")
    with pytest.raises(InputError, match="duplicate contig name.*: a"):
        check_contigs(fasta)
    (tmp_path / "empty.fa").write_text("")
    with pytest.raises(InputError, match="no FASTA records"):
        check_contigs(tmp_path / "empty.fa")


@pytest.mark.parametrize("compressed", [False, True])
def test_prepare_reference_links_or_decompresses_and_indexes(tmp_path, compressed):
    text = ">c1\nACGTACGT\n>c2\nGGGG\n"
    source = tmp_path / ("ref.fa.gz" if compressed else "ref.fa")
    if compressed:
        with gzip.open(source, "wt") as handle:
            handle.write(text)
    else:
        source.write_text(text)
    target = tmp_path / "out" / "ref.fa"
    target.parent.mkdir()
    prepare_reference(source, target)
    assert target.read_text() == text
    assert target.is_symlink() != compressed
    assert Path(str(target) + ".fai").read_text().startswith("c1\t8\t")


def test_split_fastx_round_robin(tmp_path):
    reads = tmp_path / "r.fastq"
    reads.write_text("".join(f"@r{i}\nACGT\n+\nIIII\n" for i in range(5)))
    outs = [tmp_path / "a.fastq", tmp_path / "b.fastq"]
    assert split_fastx(reads, outs) == [3, 2]
    assert [r.name for r in pysam.FastxFile(str(outs[1]))] == ["r1", "r3"]


def make_bam(path: Path, reads: list[tuple[str, int]]) -> Path:
    """A small sorted, indexed BAM with reads (name, position) on contig c1."""
    header = {"HD": {"VN": "1.6", "SO": "coordinate"}, "SQ": [{"SN": "c1", "LN": 1000}]}
    with pysam.AlignmentFile(str(path), "wb", header=header) as out:
        for name, pos in sorted(reads, key=lambda r: r[1]):
            seg = pysam.AlignedSegment(out.header)
            seg.query_name, seg.reference_id, seg.reference_start = name, 0, pos
            seg.query_sequence, seg.cigarstring, seg.mapping_quality = "ACGT", "4M", 60
            out.write(seg)
    pysam.index(str(path))
    return path


def test_split_bam_keeps_a_reads_alignments_together_and_merge_restores(tmp_path):
    reads = [(f"r{i}", 10 * i) for i in range(20)] + [("r3", 500)]  # r3 twice
    bam = make_bam(tmp_path / "all.bam", reads)
    shards = [tmp_path / "s1.bam", tmp_path / "s2.bam"]
    counts = split_bam(bam, shards)
    assert sum(counts) == 21 and all(counts)
    names = [{r.query_name for r in pysam.AlignmentFile(str(s))} for s in shards]
    assert not names[0] & names[1]
    assert shard_of_read("r3", 2) == (0 if "r3" in names[0] else 1)
    merged = tmp_path / "merged.bam"
    merge_bams(shards, merged, threads=1, log=io.StringIO())
    back = [(r.query_name, r.reference_start) for r in pysam.AlignmentFile(str(merged))]
    assert sorted(back) == sorted(reads)
    assert [p for _, p in back] == sorted(p for _, p in back)


def test_single_shard_is_linked_not_rewritten(tmp_path):
    bam = make_bam(tmp_path / "one.bam", [("r1", 5)])
    out = tmp_path / "out.bam"
    merge_bams([bam], out, threads=1, log=io.StringIO())
    assert out.stat().st_ino == bam.stat().st_ino
    link_or_copy(bam, out)  # again: replaces, does not fail
    assert out.read_bytes() == bam.read_bytes()


def test_index_and_reports_are_samtools_own_outputs(tmp_path, monkeypatch):
    """The merge's index, flagstat (JSON, text) and stats: the bytes samtools writes when run
    by hand as the rules ran it before (stats records its command line: same relative path)."""
    monkeypatch.chdir(tmp_path)
    bam = make_bam(tmp_path / "all.bam", [(f"r{i}", 10 * i) for i in range(20)]).name
    by_hand = {
        "flagstat": ["samtools", "flagstat", "-@", "2", "-O", "json", bam],
        "flagstat_text": ["samtools", "flagstat", "-@", "2", bam],
        "stats": ["samtools", "stats", "-@", "2", bam],
    }
    expected = {
        k: subprocess.run(c, capture_output=True, check=True).stdout for k, c in by_hand.items()
    }
    subprocess.run(["samtools", "index", bam, "hand.bai"], check=True)
    outputs = {k: tmp_path / f"out.{k}" for k in ["bai", *by_hand]}
    log = io.StringIO()
    start_index_and_reports(Path(bam), outputs, 2, log)()
    assert outputs["bai"].read_bytes() == (tmp_path / "hand.bai").read_bytes()
    assert {k: outputs[k].read_bytes() for k in by_hand} == expected
    assert "samtools stats -@ 2 all.bam" in log.getvalue()
    assert not list(tmp_path.glob(".tmp.*"))
    # The four run side by side; a failure is raised once all have ended, and leaves no output.
    broken = tmp_path / "broken.bam"
    broken.write_bytes(b"not a BAM")
    failed = {k: tmp_path / f"failed.{k}" for k in outputs}
    with pytest.raises(RuntimeError, match=r"samtools \w+ .*broken\.bam.* failed \(1\)"):
        start_index_and_reports(broken, failed, 2, log)()
    assert not any(p.exists() for p in failed.values()) and not list(tmp_path.glob(".tmp.*"))
    # Only what is asked for runs (rule alignment_reports: the text flagstat and stats).
    asked = {k: tmp_path / f"asked.{k}" for k in REPORTS_BESIDE}
    start_index_and_reports(Path(bam), asked, 2, log)()
    assert {k: asked[k].read_bytes() for k in asked} == {k: expected[k] for k in asked}
    assert sorted(p.name for p in tmp_path.glob("asked.*")) == [
        "asked.flagstat_text",
        "asked.stats",
    ]


def test_finish_sample_bam_writes_the_reports_and_the_alignment_check(tmp_path, monkeypatch):
    """The job that makes the sample's BAM (align, or the merge of shards) indexes it, writes
    its JSON flagstat (the text flagstat and stats: rule alignment_reports) and the check (reads
    in, primary mapped); a reads file repeating a read id stops it with the file named, and no
    check is written."""
    monkeypatch.chdir(tmp_path)
    bam = make_bam(tmp_path / "s.bam", [(f"r{i}", 10 * i) for i in range(20)])
    reads = tmp_path / "reads.fasta"
    reads.write_text("".join(f">r{i}\nACGT\n" for i in range(25)))  # 5 reads unmapped
    keys = ["bai", "flagstat", "summary"]
    outputs = {k: tmp_path / f"out.{k}" for k in keys}
    check = {"reads": reads, "sample": "s", "aligner": "minimap2", "reference": "ref.fa"}
    finish_sample_bam(bam, outputs, 2, io.StringIO(), **check)
    assert all(outputs[k].stat().st_size for k in keys)
    assert sorted(p.name for p in tmp_path.glob("out.*")) == [f"out.{k}" for k in sorted(keys)]
    assert outputs["summary"].read_text().splitlines()[1] == "s\tminimap2\t25\t20\t0.8000"
    reads.write_text(reads.read_text() + ">r3\nACGT\n")
    outputs = {k: tmp_path / f"again.{k}" for k in keys}
    with pytest.raises(AccountingError, match=r"reads file .*reads\.fasta repeats 1 read id"):
        finish_sample_bam(bam, outputs, 2, io.StringIO(), **check)
    assert not outputs["summary"].exists()
    # Reads that streamed into the aligner (a modBAM sample's): reads in are the primary records.
    outputs = {k: tmp_path / f"streamed.{k}" for k in keys}
    finish_sample_bam(bam, outputs, 2, io.StringIO(), **{**check, "reads": None})
    assert outputs["summary"].read_text().splitlines()[1] == "s\tminimap2\t20\t20\t1.0000"
    # None came through: the staging failed, and its own line says why; no numapore line here.
    empty = make_bam(tmp_path / "empty.bam", [])
    outputs = {k: tmp_path / f"empty.{k}" for k in keys}
    with pytest.raises(RuntimeError, match="no reads came through the pipe from its staging"):
        finish_sample_bam(empty, outputs, 2, io.StringIO(), **{**check, "reads": None})
    assert not outputs["summary"].exists()


def test_concat_tables_keeps_one_header_in_shard_order(tmp_path):
    a, b, empty, c = (tmp_path / n for n in ("a", "b", "empty", "c"))
    a.write_text("h1\th2\n1\t2\n")
    b.write_text("h1\th2\n3\t4\n5\t6\n")
    empty.write_text("")
    out = tmp_path / "out.tsv"
    assert concat_tables([a, empty, b], out) == 3
    assert out.read_text() == "h1\th2\n1\t2\n3\t4\n5\t6\n"
    a.write_text("h1\th2\n1\t2")  # its last row without a line end: not run into b's first
    assert concat_tables([a, b], out) == 3
    assert out.read_text() == "h1\th2\n1\t2\n3\t4\n5\t6\n"
    c.write_text("x\ty\n")
    with pytest.raises(ValueError, match="header differs"):
        concat_tables([a, c], out)
