"""numapore's pileup on the modBAM forms of real data, against modkit 0.6.1: MM tags without a
mode character and the old `Mm`/`Ml` names (read as implicit, as the SAM specification and
modkit 0.6.1 read them), a failed call of another primary base at a row's position (N_diff in
0.6.1), the golden files of modkit 0.6.1 itself (tests/data/modkit061_golden, cases.tsv), and
the command line's one-line refusals of a stale index and of a reference without a contig.
Small BAMs written here with pysam; both counting paths (compiled core and numpy)."""

from __future__ import annotations

import collections
import csv
import gzip
import io
import os
import shlex
from array import array
from pathlib import Path

import pysam
import pytest
from conftest import REPO

from test_pileup_conformance_061 import run_pileup
from numapore.pileup import cli as pileup_cli
from numapore.pileup import common as pileup_common
from numapore.pileup import engine
from numapore.methylation.bedmethyl import percent_modified

GOLDEN = REPO / "tests" / "data" / "modkit061_golden"
CONTIG = "ctg"


def one_error_line(result) -> str:
    """The single `numapore: ` line of a refused run (exit 1, no traceback)."""
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("numapore: "), result.stderr
    return lines[0]


def write_reference(path: Path, contigs: dict[str, str]) -> Path:
    """A FASTA of contigs, indexed."""
    path.write_text("".join(f">{name}\n{seq}\n" for name, seq in contigs.items()))
    pysam.faidx(str(path))
    return path


def write_bam(path: Path, contigs: dict[str, str], reads, mm="MM", ml="ML") -> Path:
    """A sorted, indexed BAM of reads (name, contig, start, sequence, MM, ML values), each
    aligned without gaps on the forward strand, the tags under the names mm and ml."""
    header = {"HD": {"VN": "1.6", "SO": "coordinate"},
              "SQ": [{"SN": n, "LN": len(s)} for n, s in contigs.items()]}  # fmt: skip
    tids = {name: tid for tid, name in enumerate(contigs)}
    with pysam.AlignmentFile(str(path), "wb", header=header) as out:
        for name, contig, start, seq, tag, values in sorted(reads, key=lambda r: (r[1], r[2])):
            rec = pysam.AlignedSegment(out.header)
            rec.query_name, rec.query_sequence, rec.flag = name, seq, 0
            rec.reference_id, rec.reference_start, rec.mapping_quality = tids[contig], start, 60
            rec.cigarstring = f"{len(seq)}M"
            rec.query_qualities = array("B", [30] * len(seq))
            rec.set_tag(mm, tag, "Z")
            rec.set_tag(ml, array("B", values))
            out.write(rec)
    pysam.index(str(path))
    return path


def pileup_text(bam: Path, argv: list[str], compiled: bool, monkeypatch) -> str:
    """The bedMethyl text of bam with the command line's options, by one counting path."""
    import argparse

    monkeypatch.setattr(pileup_common, "ENABLED", compiled)
    parser = argparse.ArgumentParser()
    pileup_cli.add_arguments(parser)
    options = pileup_cli.options_from_args(parser.parse_args([str(bam), "-", *argv]))
    out = io.StringIO()
    engine.pileup(str(bam), out, options)
    return out.getvalue()


def columns(text: str) -> dict[tuple[int, str, str], list[int]]:
    """Per (start, code, strand) a row's columns 10 to 18 (valid, then the counts)."""
    out = {}
    for line in text.splitlines():
        f = line.split("\t")
        out[(int(f[1]), f[3], f[5])] = [int(f[9])] + [int(x) for x in f[11:18]]
    return out


# ---------------------------------------------------------------- implicit mode, Mm/Ml


@pytest.mark.parametrize("compiled", [False, True], ids=["python", "compiled"])
def test_tags_without_mode_read_as_implicit(compiled, tmp_path, monkeypatch):
    """`C+m,0` (no '.'/'?', here under the old names Mm/Ml, as PacBio's primrose wrote them)
    is read as `C+m.,0` under MM/ML: the unlisted C is a canonical call. modkit 0.4.4's
    semantics skip such a read (test_pileup_conformance.py checks its message)."""
    contigs = {CONTIG: "TTACGTTTACGTTTTT"}
    old = write_bam(tmp_path / "old.bam", contigs, [("r", CONTIG, 0, contigs[CONTIG], "C+m,0;",
                    [200])], mm="Mm", ml="Ml")  # fmt: skip
    new = write_bam(tmp_path / "new.bam", contigs, [("r", CONTIG, 0, contigs[CONTIG], "C+m.,0;",
                    [200])])  # fmt: skip
    text = pileup_text(old, ["--no-filtering"], compiled, monkeypatch)
    assert columns(text) == {(3, "m", "+"): [1, 1, 0, 0, 0, 0, 0, 0],
                             (9, "m", "+"): [1, 0, 1, 0, 0, 0, 0, 0]}  # fmt: skip
    assert text == pileup_text(new, ["--no-filtering"], compiled, monkeypatch)


def test_report_counts_calls_under_old_tag_names(tmp_path):
    """The report's modBAM call counts read Mm/Ml as they read MM/ML."""
    from numapore.report.figures import modbam_calls

    contigs = {CONTIG: "TTACGTTTACGTTTTT"}
    read = ("r", CONTIG, 0, contigs[CONTIG], "C+m,0,0;", [200, 10])
    old = modbam_calls(write_bam(tmp_path / "old.bam", contigs, [read], mm="Mm", ml="Ml"))
    new = modbam_calls(write_bam(tmp_path / "new.bam", contigs, [read]))
    assert old["codes"]["m"]["calls"] == new["codes"]["m"]["calls"] == 2
    assert list(old["per_read"]) == list(new["per_read"]) == [2]


# ---------------------------------------------------------------- another base's failed call


def dorado_like_bam(tmp_path: Path) -> tuple[Path, Path]:
    """Four reads over a CpG (its C at 6) with dorado's `A+a.;C+m.` tags: a 5mC call that
    passes 0.7 and one that fails it, and two reads with an A at the C, whose 6mA call fails
    (0.50) or passes (0.98); and the reference."""
    ref = "TTTTTACGTTTTTTTTTTTT"
    a_at_c = ref[:6] + "A" + ref[7:]
    reads = [
        ("c_pass", CONTIG, 0, ref, "A+a.,0;C+m.,0;", [10, 240]),
        ("c_fail", CONTIG, 0, ref, "A+a.,0;C+m.,0;", [10, 128]),
        ("a_fail", CONTIG, 0, a_at_c, "A+a.,1;C+m.;", [128]),
        ("a_pass", CONTIG, 0, a_at_c, "A+a.,1;C+m.;", [250]),
    ]
    contigs = {CONTIG: ref}
    return write_bam(tmp_path / "reads.bam", contigs, reads), write_reference(
        tmp_path / "ref.fa", contigs
    )


@pytest.mark.parametrize("compiled", [False, True], ids=["python", "compiled"])
def test_failed_call_of_another_base_is_n_diff(compiled, tmp_path, monkeypatch):
    """modkit 0.6.1 counts a read with another base than the row's in N_diff whatever its
    call there: the failing 6mA call on the A is N_diff of the 5mC row, not N_fail (which
    holds the C's own failed call); modkit 0.4.4's semantics count it in N_fail (and write
    the 6mA row of the C's position too)."""
    bam, ref = dorado_like_bam(tmp_path)
    options = ["--ref", str(ref), "--motif", "CG", "0", "--filter-threshold", "0.7"]
    # valid, mod, canonical, other, delete, fail, diff, no call
    for extra, strand in (([], "+"), (["--combine-strands"], ".")):
        text = pileup_text(bam, options + extra, compiled, monkeypatch)
        assert columns(text) == {(6, "m", strand): [1, 1, 0, 0, 0, 1, 2, 0]}, extra
    text = pileup_text(bam, options + ["--modkit-compat", "0.4"], compiled, monkeypatch)
    assert columns(text) == {(6, "a", "+"): [1, 1, 0, 0, 0, 2, 1, 0],
                             (6, "m", "+"): [1, 1, 0, 0, 0, 2, 1, 0]}  # fmt: skip


# ---------------------------------------------------------------- modkit 0.6.1's own files


def golden_cases() -> dict[str, dict[str, str]]:
    """tests/data/modkit061_golden/cases.tsv by case name."""
    with open(GOLDEN / "cases.tsv", newline="") as handle:
        return {row["case"]: row for row in csv.DictReader(handle, delimiter="\t")}


def skipped_at_cpgs(bam: Path, reference: Path) -> dict[tuple, collections.Counter]:
    """A with --motif CG 0: per primary record, the first CpG position of its strand that it
    aligns a base to after its last MM-listed position (BAM SEQ order), which modkit 0.6.1's
    generic path leaves untallied: (contig, + strand position of the CpG, record strand) ->
    Counter of what that base was: 'canonical' (a C of an implicit mode), 'nocall' (a C of the
    explicit mode), 'diff' (another base)."""
    complement = str.maketrans("ACGT", "TGCA")
    out: dict = collections.defaultdict(collections.Counter)
    with pysam.AlignmentFile(str(bam)) as handle, pysam.FastaFile(str(reference)) as fasta:
        for rec in handle.fetch():
            if rec.flag & 0x904 or not rec.modified_bases:
                continue
            seq = fasta.fetch(rec.reference_name).upper()
            implicit = {head[0] for head in rec.get_tag("MM").split(";") if head
                        and head.split(",")[0][-1] != "?"}  # fmt: skip
            last = max(q for calls in rec.modified_bases.values() for q, _ in calls)
            shift = 1 if rec.is_reverse else 0  # the CpG's G on the minus strand
            for q, r in rec.get_aligned_pairs(matches_only=True):
                if seq[r - shift : r - shift + 2] != "CG" or q <= last:
                    continue
                base = rec.query_sequence[q]
                base = base.translate(complement) if rec.is_reverse else base
                kind = "diff" if base != "C" else "canonical" if "C" in implicit else "nocall"
                out[(rec.reference_name, r - shift, "-+"[not rec.is_reverse])][kind] += 1
                break
    return out


def with_skipped(text: str, skipped: dict, combined: bool) -> dict[tuple, list[str]]:
    """modkit's rows (by contig, start, code, strand) with A's skipped bases counted."""
    rows = {}
    for line in text.splitlines():
        f = line.split("\t")
        strands = "+-" if combined else f[5]
        got = sum((skipped.get((f[0], int(f[1]), s), collections.Counter()) for s in strands),
                  collections.Counter())  # fmt: skip
        f[4] = f[9] = str(int(f[9]) + got["canonical"])
        f[12] = str(int(f[12]) + got["canonical"])
        f[10] = percent_modified(int(f[11]), int(f[9]))
        f[16] = str(int(f[16]) + got["diff"])
        f[17] = str(int(f[17]) + got["nocall"])
        rows[(f[0], int(f[1]), f[3], f[5])] = f
    return rows


@pytest.mark.parametrize("name", list(golden_cases()))
def test_modkit_061_golden(name, tmp_path):
    """numapore writes modkit 0.6.1's file of the case byte for byte (the command line in
    cases.tsv, run from the golden folder), or, where the case says A (the 0.6.1 suite
    README's item A), modkit's file with the bases its generic path skips counted, every
    column compared."""
    case = golden_cases()[name]
    argv = shlex.split(case["modkit_command"])
    assert argv[:2] == ["modkit", "pileup"] and argv[3] == "OUT.bed"
    out = tmp_path / "out.bed"
    result = run_pileup(argv[2], out, *argv[4:], cwd=GOLDEN)
    assert result.returncode == 0, result.stderr
    expected = (GOLDEN / case["expected"]).read_bytes()
    expected = (
        gzip.decompress(expected) if case["expected"].endswith(".gz") else expected
    ).decode()
    assert expected, case["expected"]
    if not case["differs"]:
        assert out.read_text() == expected
        return
    assert case["differs"] == "A" and argv[argv.index("--motif") + 1 :][:2] == ["CG", "0"]
    reference = GOLDEN / argv[argv.index("--ref") + 1]
    skipped = skipped_at_cpgs(GOLDEN / argv[2], reference)
    ours = with_skipped(out.read_text(), {}, False)
    theirs = with_skipped(expected, skipped, "--combine-strands" in argv)
    assert theirs != with_skipped(expected, {}, False), "A changes nothing here"
    assert ours == theirs


# ---------------------------------------------------------------- the command line's refusals


def test_index_older_than_a_rewritten_bam_named(tmp_path):
    """A BAM rewritten after it was indexed (its .bai older and no longer fitting): one line
    naming both, not htslib's read error; an older index that still fits is read."""
    bam, _ = dorado_like_bam(tmp_path)
    index = Path(f"{bam}.bai")
    result = run_pileup(bam, tmp_path / "out.bed", "--no-filtering", "--region", CONTIG)
    assert result.returncode == 0, result.stderr
    os.utime(index, (1, 1))  # older than the BAM, still fitting it
    result = run_pileup(bam, tmp_path / "out.bed", "--no-filtering", "--region", CONTIG)
    assert result.returncode == 0, result.stderr
    with pysam.AlignmentFile(str(bam)) as src:  # a longer header: other block offsets
        header = src.header.to_dict()
        header["CO"] = [f"comment {n}" for n in range(500)]
        with pysam.AlignmentFile(str(tmp_path / "again.bam"), "wb", header=header) as out:
            for rec in src:
                out.write(pysam.AlignedSegment.fromstring(rec.to_string(), out.header))
    os.replace(tmp_path / "again.bam", bam)
    result = run_pileup(bam, tmp_path / "out.bed", "--no-filtering", "--region", CONTIG)
    assert one_error_line(result) == (
        f"numapore: {bam}: its index {index} is older than the BAM and does not fit it (the "
        f"BAM changed after it was indexed): index it again (samtools index {bam})"
    )


def test_reference_without_a_contig(tmp_path):
    """A FASTA without a contig of the BAM's header: a contig without reads is left out as
    modkit 0.6.1 leaves it out (the same rows as with the whole reference); one with reads
    stops with one line naming the contig and the FASTA."""
    bam, ref = dorado_like_bam(tmp_path)
    contigs = {CONTIG: ref.read_text().split("\n")[1], "chrEBV": "ACGT" * 10}
    bam = write_bam(tmp_path / "two.bam", contigs, [("r", CONTIG, 0, contigs[CONTIG],
                    "A+a.,0;C+m.,0;", [10, 240])])  # fmt: skip
    whole = write_reference(tmp_path / "whole.fa", contigs)
    options = ["--motif", "CG", "0", "--combine-strands", "--no-filtering"]
    result = run_pileup(bam, tmp_path / "whole.bed", "--ref", whole, *options)
    assert result.returncode == 0, result.stderr
    result = run_pileup(bam, tmp_path / "part.bed", "--ref", ref, *options)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "part.bed").read_text() == (tmp_path / "whole.bed").read_text() != ""
    other = write_reference(tmp_path / "other.fa", {"chrEBV": contigs["chrEBV"]})
    result = run_pileup(bam, tmp_path / "other.bed", "--ref", other, *options)
    assert one_error_line(result) == f"numapore: {other}: contig {CONTIG} of {bam} is missing"
