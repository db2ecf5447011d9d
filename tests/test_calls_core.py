"""The compiled call-table core against the DuckDB/polars/zlib path it replaces: the same
frequency table and bedMethyl text on the same inputs, with and without split groups; and its
modBAM tagging against modbam.py's Python path: the same BAM, the same errors."""

from __future__ import annotations

import gzip
import math
import random
import subprocess
import sys
from pathlib import Path

import pysam
import pytest
from conftest import MOTIF_NAMES, REPO, reference_output
from test_methylation import CALLS, table

from numapore.methylation import bgzf
from numapore.nanopolish import calls_core, frequency, modbam
from numapore.nanopolish.calls import CALL_COLUMNS, llr_to_ml
from numapore.methylation.motifs import MOTIFS

ROWS = CALLS + [
    ("c2", 5, 5, "r1", -4.0, 1, "AACGTT"),
    ("c10", 7, 9, "r4", 9.5, 2, "AACGCGTT"),
    ("c10", 7, 9, "r5", -9.5, 2, "AACGCGTT"),
    ("c1", 10, 10, "r9", 4.0, 2, "TTCGAACGTT"),  # a key seen with another group size/sequence
    ("c1", 40, 40, "r9", "2.5e0", 1, "AACGT"),  # a number strtod reads
]


def run(tmp_path: Path, compiled: bool, split: bool, motif: str = "cpg") -> tuple:
    """frequency_outputs on ROWS with the compiled core on or off: summary and TSV."""
    calls = table(tmp_path / "calls.tsv", *ROWS)
    tsv = tmp_path / f"{compiled}.tsv"
    saved = calls_core.ENABLED
    calls_core.ENABLED = compiled
    try:
        done = frequency.frequency_outputs(calls, MOTIFS[motif], 2.0, split, tsv)
    finally:
        calls_core.ENABLED = saved
    return done, tsv.read_text()


def test_compiled_core_is_built() -> None:
    """./setup.sh builds numapore.nanopolish._calls_core on this machine."""
    assert calls_core.lib is not None and calls_core.ENABLED
    assert modbam.COMPILED  # with the modBAM tagging in it


@pytest.mark.parametrize("motif", ["cpg", "gpc"])
@pytest.mark.parametrize("split", [False, True])
def test_both_paths_same_outputs(tmp_path, split, motif):
    compiled, fallback = run(tmp_path, True, split, motif), run(tmp_path, False, split, motif)
    assert compiled == fallback and compiled[1].count("\n") > 1


@pytest.mark.parametrize("split", [False, True])
def test_compiled_frequency_is_the_reference_scripts(tmp_path, split):
    _, tsv = run(tmp_path, True, split)
    assert tsv == reference_output(tmp_path / "calls.tsv", *(["-s"] if split else []))


def test_bad_row_is_a_clear_error(tmp_path):
    calls = table(tmp_path / "calls.tsv", *CALLS, ("c1", "x", 10, "r", 1.0, 1, "ACGT"))
    header = frequency.check_call_header(calls)
    with pytest.raises(ValueError, match=r"calls.tsv: .*\(data row 6\): start or end is not"):
        with calls_core.aggregated(calls, header, 2.0):
            pass


def test_groups_frame_counts_and_chromosome_ranks(tmp_path):
    calls = table(tmp_path / "calls.tsv", *ROWS)
    with calls_core.aggregated(calls, frequency.check_call_header(calls), 2.0) as t:
        names, rank = calls_core.chromosome_ranks(t)
        groups = calls_core.groups_frame(t)
    assert names == ["c1", "c10", "c2"] and sorted(rank.tolist()) == [0, 1, 2]
    assert groups["calls"].sum() == len(ROWS) and groups.height == 6
    assert groups.filter(start=10, num_motifs=1)["first_row"].item() == 0


@pytest.mark.parametrize("compiled", [False, True])
def test_bgzf_blocks_read_back(tmp_path, compiled, monkeypatch):
    """Both block compressors give BGZF that pysam and gzip read; zlib's is pysam's bytes."""
    monkeypatch.setattr(bgzf, "ENABLED", compiled)
    text = b"".join(f"c\t{i}\t{i + 1}\tx\n".encode() for i in range(40_000))
    path = tmp_path / "t.bed.gz"
    bgzf.write_bgzf(path, [text[:1000], text[1000:]], threads=2)
    assert gzip.open(path).read() == text
    block = bgzf.compiled_block if compiled else bgzf.zlib_block
    assert gzip.decompress(block(text[: bgzf.BGZF_BLOCK])) == text[: bgzf.BGZF_BLOCK]
    bgzf.write_indexed_bed(path, [text])  # BGZF and its index
    with pysam.TabixFile(str(path)) as tabix:
        assert len(list(tabix.fetch("c", 100, 200))) == 100  # BED: half-open
    if not compiled:
        plain = tmp_path / "p.bed"
        plain.write_bytes(text)
        pysam.tabix_index(str(plain), preset="bed", force=True)
        assert (tmp_path / "p.bed.gz").read_bytes() == path.read_bytes()


def test_table_text(tmp_path):
    """The fallback's text: table_text in chunks, the frequency table's rows."""
    calls = table(tmp_path / "calls.tsv", *ROWS)
    groups = frequency.group_counts(calls, 2.0)
    assert frequency.write_frequency(groups, MOTIFS["cpg"], False, tmp_path / "f.tsv") == 5
    text = b"".join(frequency.table_text(groups.select("start"), header=True))
    assert text.splitlines()[0] == b"start" and len(text.splitlines()) == groups.height + 1


# modBAM tagging: calls_modbam.c's cc_call_group/cc_tag_read against modbam.py's Python path.

COMPLEMENT = str.maketrans("ACGT", "TGCA")


def synthetic_reads(tmp_path: Path, seed: int = 1) -> tuple[Path, Path]:
    """A BAM of reads on two random contigs rich in every motif (substitutions, insertions,
    deletions, clips, both strands, supplementary and secondary records, an unmapped read), and
    a call table of groups of every motif on them (shuffled; some on the other strand or contig,
    some outside the alignment, some sites called twice): what both tagging paths must agree on."""
    rng = random.Random(seed)
    motifs = ["CG", "GC", "GATC", "CCAGG", "CCTGG"]
    contigs = {}
    for name, length in [("c1", 3000), ("c2", 1500)]:
        parts = []
        while sum(map(len, parts)) < length:
            parts.append(rng.choice(motifs) if rng.random() < 0.3 else rng.choice("ACGT"))
        contigs[name] = "".join(parts)[:length]
    header = pysam.AlignmentHeader.from_dict(
        {"HD": {"VN": "1.6"}, "SQ": [{"SN": n, "LN": len(s)} for n, s in contigs.items()]}
    )
    records, calls = [], []
    for i in range(80):
        name = f"r{i:03d}"
        for kind in ["primary", "supplementary", "secondary"][: rng.choice([1, 1, 2, 3])]:
            contig = rng.choice(list(contigs))
            ref = contigs[contig]
            start = rng.randrange(0, len(ref) - 400)
            seq, cigar, pos = [], [], start
            clip = "".join(rng.choice("ACGT") for _ in range(rng.randrange(0, 6)))
            if clip:
                seq.append(clip)
                cigar.append((4, len(clip)))
            while pos < start + rng.randrange(150, 380):
                op = rng.choices("MXID", [80, 8, 6, 6])[0]
                size = rng.randrange(1, 4) if op in "ID" else rng.randrange(5, 30)
                if op == "M":
                    seq.append(ref[pos : pos + size])
                    cigar.append((0, size))
                    pos += size
                elif op == "X":  # a substitution, in an M operation
                    seq.append("".join(rng.choice("ACGT".replace(b, "")) for b in ref[pos]))
                    cigar.append((0, 1))
                    pos += 1
                elif op == "I":
                    seq.append("".join(rng.choice("ACGT") for _ in range(size)))
                    cigar.append((1, size))
                else:
                    cigar.append((2, size))
                    pos += size
            record = pysam.AlignedSegment(header)
            record.query_name, record.reference_name, record.reference_start = name, contig, start
            record.cigartuples, record.mapping_quality = cigar, 60
            record.is_reverse = rng.random() < 0.5
            record.is_supplementary = kind == "supplementary"
            record.is_secondary = kind == "secondary"
            if kind != "secondary" or rng.random() < 0.5:
                record.query_sequence = "".join(seq)
            records.append(record)
            strand = "-" if record.is_reverse else "+"
            for literal in rng.sample(motifs, 3):  # groups of this literal's sites
                hits = [j for j in range(start - 20, pos + 20) if ref.startswith(literal, j)]
                for j in range(0, len(hits), 2):
                    group = hits[j : j + 2]
                    first, last = group[0], group[-1] + len(literal)
                    other = rng.random() < 0.1
                    calls.append(
                        (
                            contig if not other else ("c2" if contig == "c1" else "c1"),
                            strand if rng.random() > 0.1 else "+-"[strand == "+"],
                            first,
                            rng.choice([-1, 1]) * rng.uniform(0, 12),
                            name,
                            ref[max(0, first - 5) : last + 5],
                        )
                    )
                    if rng.random() < 0.1:  # the same sites called again: the first call wins
                        calls.append(calls[-1][:3] + (-calls[-1][3],) + calls[-1][4:])
    unmapped = pysam.AlignedSegment(header)
    unmapped.query_name, unmapped.is_unmapped, unmapped.query_sequence = "r999", True, "ACGT"
    records.append(unmapped)
    calls.append(("c1", "+", 10, 5.0, "r999", "AACGTT"))
    bam = tmp_path / "reads.bam"
    with pysam.AlignmentFile(str(bam), "wb", header=header) as out:
        for record in records:
            out.write(record)
    rng.shuffle(calls)
    lines = ["\t".join(CALL_COLUMNS)]
    for chrom, strand, start, llr, name, seq in calls:
        fields = [chrom, strand, start, start, name, f"{llr:.2f}", -1, -1, 1, 1, seq]
        lines.append("\t".join(map(str, fields)))
    table_path = tmp_path / "calls.tsv"
    table_path.write_text("\n".join(lines) + "\n")
    return bam, table_path


def tag_both(bam: Path, calls: Path, motif: str, tmp_path: Path) -> list:
    """tag_alignments through the compiled and the Python path: per path, the output BAM's
    bytes and the stats, or the error's message."""
    outcomes = []
    for compiled in (True, False):
        out = tmp_path / f"tagged.{compiled}.bam"
        saved = modbam.COMPILED
        modbam.COMPILED = compiled
        try:
            stats = modbam.tag_alignments(bam, calls, MOTIFS[motif], out, tmp_path)
            outcomes.append((out.read_bytes(), stats))
        except ValueError as error:
            assert str(error).startswith("numapore: "), error
            outcomes.append(str(error))
        finally:
            modbam.COMPILED = saved
    return outcomes


def test_compiled_llr_to_ml_is_pythons():
    """cc_llr_to_ml gives llr_to_ml's byte for every LLR nanopolish writes (two decimals) up to
    +-60 and for doubles of every magnitude, both signs, at the bin edges too."""
    rng = random.Random(5)
    llrs = [i / 100 for i in range(-6000, 6001)] + [0.0, -0.0, 5e-324, -5e-324]
    llrs += [math.inf, -math.inf, 1e308, -1e308, 1e-300, -1e-300]
    llrs += [rng.uniform(-1, 1) * 10 ** rng.uniform(-30, 3) for _ in range(100_000)]
    # LLRs whose probability is within an ulp of a bin edge k/256
    for k in range(1, 256):
        edge = math.log(k / (256 - k))
        llrs += [edge, math.nextafter(edge, math.inf), math.nextafter(edge, -math.inf)]
    compiled = calls_core.lib.cc_llr_to_ml
    assert [compiled(x) for x in llrs] == [llr_to_ml(x) for x in llrs]


@pytest.mark.parametrize("motif", ["cpg", "gpc", "dam", "dcm"])
def test_modbam_both_paths_same_bam(tmp_path, motif):
    """Synthetic reads: the same BAM bytes and counts from both paths, sites of every kind."""
    bam, calls = synthetic_reads(tmp_path)
    (compiled, stats), fallback = tag_both(bam, calls, motif, tmp_path)
    assert (compiled, stats) == fallback
    assert stats.tagged_sites > 100 and stats.reads_with_calls == 81 and stats.tagged_reads == 80
    assert stats.sites_unaligned > 0 and stats.sites_other_base > 0


def test_modbam_reads_split_across_chunks(tmp_path, monkeypatch):
    """The sorted call stream read a few bytes at a time (reads' calls, lines, line ends split
    between chunks): the same BAM as in one chunk."""
    bam, calls = synthetic_reads(tmp_path)
    (whole, _), _ = tag_both(bam, calls, "cpg", tmp_path)
    for size in (1, 97, 4096):
        monkeypatch.setattr(modbam, "CHUNK", size)
        out = tmp_path / f"chunks{size}.bam"
        modbam.tag_alignments(bam, calls, MOTIFS["cpg"], out, tmp_path)
        assert out.read_bytes() == whole, size


@pytest.mark.parametrize("motif", MOTIF_NAMES)
def test_modbam_both_paths_on_the_workflow_run(minimap2_run, tmp_path, motif):
    """The E. coli run's alignments and calls: both paths give the same BAM, whose records
    sorted are the workflow's modBAM."""
    out = minimap2_run / f"results/ecoli/methylation/ecoli.minimap2.{motif}"
    bam = minimap2_run / "results/ecoli/align/ecoli.minimap2.bam"
    (compiled, stats), fallback = tag_both(bam, Path(f"{out}.calls.tsv"), motif, tmp_path)
    assert (compiled, stats) == fallback and stats.tagged_sites > 500
    with pysam.AlignmentFile(str(tmp_path / "tagged.True.bam")) as tagged:
        ours = sorted(r.to_string() for r in tagged)
    with pysam.AlignmentFile(f"{out}.modbam.bam") as workflow:
        assert ours == sorted(r.to_string() for r in workflow)


def damaged(text: str, rng: random.Random) -> str:
    """The call table text with one kind of damage, chosen by rng."""
    lines = text.split("\n")
    i = rng.randrange(1, len(lines) - 1)
    fields = lines[i].split("\t")
    column = {name: k for k, name in enumerate(CALL_COLUMNS)}
    kind = rng.randrange(9)
    if kind == 0:  # a truncated line
        lines[i] = lines[i][: rng.randrange(len(lines[i]))]
    elif kind == 1:
        fields[column["start"]] = rng.choice(
            ["x", "", "1e3", " 5", "+5", "-7", "9" * 19, "9" * 18, "１２", "0x10", "1_0"]
        )
    elif kind == 2:
        fields[column["log_lik_ratio"]] = rng.choice(
            ["nan", "inf", "-inf", "1e999", "-1e999", "1e-999", "0x1p3", "1_0", "", " 2.0",
             "2.0 ", "+.5", "5.", ".", "e5", "1e", "1" * 80 + ".5", "-0.00", "2.5E+1", "٣"]
        )  # fmt: skip
    elif kind == 3:
        fields[column["sequence"]] = rng.choice(["", "NNNN", "cg", "CGéCG", "C", "GATCGATC"])
    elif kind == 4:
        fields.append("extra")
    elif kind == 5:
        fields[column["read_name"]] = rng.choice(["a-read-before", "r0505", "zz-after", ""])
    elif kind == 6:
        fields[column["strand"]] = rng.choice(["*", "--", "", "-"])
        fields[column["chromosome"]] = rng.choice(["c1", "c3", "", "c2"])
    elif kind == 7:  # line ends and blank lines
        lines[i] = lines[i] + rng.choice(["\r", "\n", "\n\n\r", "\t"])
    else:  # random bytes anywhere
        spot = rng.randrange(len(text))
        return text[:spot] + rng.choice(["\t", "\n", "\x00", "\xff", "9", "-", "G"]) + text[spot:]
    if kind in range(1, 7):
        lines[i] = "\t".join(fields)
    return "\n".join(lines)


def test_modbam_bad_call_lines_are_clear_errors(tmp_path):
    """A bad start, LLR or field count: both paths name the table, the reason and the line."""
    bam, _ = synthetic_reads(tmp_path)
    for row, reason in [
        (("c1", "x", 10, "r001", 3.0, 1, "AACGT"), "start is not a whole number"),
        (("c1", 10, 10, "r001", "nan", 1, "AACGT"), "log_lik_ratio is not a decimal number"),
        (("c1", 10, 10, "r001", "1e3\tx", 1, "AACGT"), "12 fields where the header has 11"),
    ]:
        calls = table(tmp_path / "calls.tsv", row)
        compiled, fallback = tag_both(bam, calls, "cpg", tmp_path)
        assert compiled == fallback
        assert (
            compiled.startswith(f"numapore: {calls}: {reason}")
            and "in the call line 'c1" in compiled
        )


def test_modbam_damaged_call_tables_same_outcome(tmp_path):
    """Damaged call tables (truncated lines, bad numbers, huge numbers, odd sequences, unknown
    reads, stray bytes): both paths give the same BAM or the same clear error, never a crash."""
    bam, calls = synthetic_reads(tmp_path)
    text = calls.read_text()
    rng = random.Random(7)
    errors = 0
    for trial in range(60):
        calls.write_bytes(damaged(text, rng).encode("utf-8", errors="surrogateescape"))
        compiled, fallback = tag_both(bam, calls, rng.choice(["cpg", "dam"]), tmp_path)
        assert compiled == fallback, trial
        errors += isinstance(compiled, str)
    assert 10 < errors < 50  # both kinds of outcome were tried


def test_modbam_benchmark_runs_small(tmp_path):
    """benchmarks/bench_modbam.py on the synthetic reads: every variant timed (figures printed,
    not judged), the sorted outputs the same bytes."""
    bam, calls = synthetic_reads(tmp_path)
    bench = [sys.executable, str(REPO / "benchmarks" / "bench_modbam.py"), "--repeat", "1"]
    bench += ["--bam", str(bam), "--calls", str(calls), "--baseline", str(REPO / "scripts")]
    run = subprocess.run(bench, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    rows = [line.split()[0] for line in run.stdout.splitlines()[2:5]]
    assert rows == ["compiled", "python", "baseline"], run.stdout
    assert "sorted outputs: the same bytes" in run.stdout
