"""Methylation outputs: the frequency table against nanopolish's own script, bedMethyl per site,
the modBAM read by pysam and methylartist, every motif end to end on the real E. coli reads."""

from __future__ import annotations

import os
import sys
import subprocess
from pathlib import Path

import pandas as pd
import pysam
import pytest
from conftest import MOTIF_NAMES, REPO, check_modkit_golden, numapore_output, reference_output
from reference_tools import reference_frequency_script

from numapore.nanopolish.calls import CALL_COLUMNS, llr_to_ml
from numapore.nanopolish.frequency import frequency_outputs
from numapore.nanopolish.modbam import AlignedBlocks, mm_ml, tag_alignments
from numapore.methylation.motifs import MOTIFS

OUT = "results/ecoli/methylation/ecoli.minimap2"


def table(path: Path, *rows: tuple) -> Path:
    """A call table at path: rows of (chrom, start, end, read, llr, num_motifs, sequence)."""
    lines = ["\t".join(CALL_COLUMNS)]
    for chrom, start, end, read, llr, motifs, seq in rows:
        lines.append(f"{chrom}\t+\t{start}\t{end}\t{read}\t{llr}\t-1\t-1\t1\t{motifs}\t{seq}")
    path.write_text("\n".join(lines) + "\n")
    return path


CALLS = [
    ("c1", 10, 10, "r1", 3.0, 1, "AAAAACGAAAAA"),
    ("c1", 10, 10, "r2", -2.5, 1, "AAAAACGAAAAA"),
    ("c1", 10, 10, "r3", 1.9, 1, "AAAAACGAAAAA"),  # ambiguous: |llr| < 2
    ("c1", 20, 26, "r1", 7.0, 3, "AAAAACGACGTCGAAAAA"),  # CpGs at 20, 23 and 26
    ("c1", 20, 26, "r2", 5.0, 3, "AAAAACGACGTCGAAAAA"),  # ambiguous: 5 < 2 x 3 motifs
]


def outputs(tmp_path: Path, threshold: float, split: bool = False) -> list:
    """frequency_outputs on CALLS: the frequency rows as lists of fields."""
    tsv = tmp_path / "f.tsv"
    done = frequency_outputs(
        table(tmp_path / "calls.tsv", *CALLS), MOTIFS["cpg"], threshold, split, tsv
    )
    frequency = [line.split("\t") for line in tsv.read_text().splitlines()[1:]]
    assert (done.rows, done.calls) == (len(frequency), len(CALLS))
    return frequency


def test_threshold_scales_with_the_motifs_of_a_group(tmp_path):
    frequency = outputs(tmp_path, 2.0)
    assert frequency == [
        "c1 10 10 1 2 1 0.500 AAAAACGAAAAA".split(),
        "c1 20 26 3 3 3 1.000 AAAAACGACGTCGAAAAA".split(),
    ]
    frequency = outputs(tmp_path, 1.5)
    assert frequency[1][3:6] == ["3", "6", "6"]  # both group calls now count, 3 sites each


def test_split_groups(tmp_path):
    frequency = outputs(tmp_path, 2.0, split=True)
    assert [row[:3] for row in frequency[1:]] == [["c1", str(p), str(p)] for p in (20, 23, 26)]
    assert frequency[2][3:] == ["1", "1", "1", "1.000", "split-group"]
    assert frequency[0] == "c1 10 10 1 2 1 0.500 AAAAACGAAAAA".split()


@pytest.mark.parametrize("options", [[], ["-s"]])
def test_rounding_edges_are_the_reference_scripts(tmp_path, options):
    """Frequencies on %.3f's rounding edges (0.0005, 1/16 ties, 0.9995), first-seen group sizes
    and sequences, chromosome sort order: byte for byte nanopolish's script."""
    rows = []
    for chrom, start, methylated, called in [
        ("chr10", 5, 1, 2000), ("chr2", 5, 1, 16), ("chr2", 40, 3, 16), ("chr2", 70, 1999, 2000),
        ("chrX", 5, 5, 8), ("chr1_alt", 9, 1, 3), ("chr1", 100, 2, 3),
    ]:  # fmt: skip
        for i in range(called):
            rows.append(
                (chrom, start, start, f"r{i}", 3.5 if i < methylated else -2.25, 1, "AACGT")
            )
    # One key, two group sizes and sequences: the first confident call's are kept.
    rows += [("chr3", 50, 53, "a", 0.5, 2, "AACGCGT"), ("chr3", 50, 53, "b", 9.0, 1, "TTCGCGA")]
    rows += [("chr3", 50, 53, "c", -9.0, 2, "AACGCGT")]
    calls = table(tmp_path / "calls.tsv", *rows)
    ours = numapore_output(calls, "cpg", 2.0, "-s" in options)
    assert ours == reference_output(calls, *options)
    assert "chr10\t5\t5\t1\t2000\t1\t" in ours  # the edge itself is in the table


def test_motif_sites_and_modified_bases():
    assert MOTIFS["dcm"].sites("AACCAGGTCCTGGAA") == [0, 6]
    assert MOTIFS["gpc"].sites("AGCGCA") == [0, 2]
    # Every motif's modified base is its base on the forward strand and, complemented, on the
    # reverse strand (e.g. dam: GATC, A at +1 and the reverse strand's A = T at +2).
    for motif, example in [("cpg", "CG"), ("gpc", "GC"), ("dam", "GATC"), ("dcm", "CCAGG")]:
        m = MOTIFS[motif]
        assert example[m.forward_offset] == m.base
        assert example[m.reverse_offset] == m.base.translate(str.maketrans("ACGT", "TGCA"))


def test_llr_to_ml_keeps_the_sign_of_the_llr():
    assert llr_to_ml(0.0) == 127 and llr_to_ml(1e-300) == 128 and llr_to_ml(-1e-300) == 127
    assert llr_to_ml(1000) == 255 and llr_to_ml(-1000) == 0
    for llr in [-8.2, -2.0, -0.01, 0.01, 2.0, 8.2]:
        assert ((llr_to_ml(llr) + 0.5) / 256 > 0.5) == (llr > 0)


def test_mm_ml_read_back_by_pysam():
    """MM counts the base on the read as sequenced: SEQ reverse-complemented when reverse."""
    header = pysam.AlignmentHeader.from_dict({"SQ": [{"SN": "c", "LN": 100}]})
    for reverse in (False, True):
        seg = pysam.AlignedSegment(header)
        seg.query_name, seg.reference_id, seg.reference_start = "r", 0, 0
        seg.query_sequence, seg.cigarstring = "ACGTTCGACG", "10M"
        seg.is_reverse = reverse
        # Forward: Cs of CG at 1, 5, 8. Reverse: the read's Cs are the Gs of SEQ (2, 6, 9).
        sites = {5: 200, 8: 10} if not reverse else {6: 200, 2: 10}
        mm, ml = mm_ml(seg.query_sequence, reverse, MOTIFS["cpg"], sites)
        seg.set_tag("MM", mm)
        seg.set_tag("ML", ml)
        ((_, calls),) = seg.modified_bases.items()
        assert dict(calls) == sites


@pytest.mark.parametrize(
    "cigar", ["3S4M2I3=1D2X5N4M3S", "2H5M3D4M2H", "10M", "4S6M", "3M2P2I3M", "1I5M1D1I", "3M2B3M"]
)
def test_aligned_blocks_are_pysams_aligned_pairs(cigar):
    """The modBAM's reference -> query lookup gives exactly pysam's matched pairs, and None
    everywhere else (deletions, skips, outside the alignment)."""
    header = pysam.AlignmentHeader.from_dict({"SQ": [{"SN": "c", "LN": 1000}]})
    seg = pysam.AlignedSegment(header)
    seg.query_name, seg.reference_id, seg.reference_start, seg.cigarstring = "r", 0, 100, cigar
    seg.query_sequence = "A" * seg.infer_query_length()
    pairs = {r: q for q, r in seg.get_aligned_pairs(matches_only=True)}
    blocks = AlignedBlocks(seg)
    assert pairs and {r: blocks.query(r) for r in range(90, 150)} == {
        r: pairs.get(r) for r in range(90, 150)
    }


def test_reference_script_lookup(tmp_path):
    assert reference_frequency_script().name == "calculate_methylation_frequency.py"
    fake = tmp_path / "bin" / "nanopolish"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    with pytest.raises(FileNotFoundError, match="cannot run nanopolish's .* not found beside"):
        reference_frequency_script(str(fake))
    (tmp_path / "bin" / "calculate_methylation_frequency.py").write_text("")  # bioconda: bin/
    assert reference_frequency_script(str(fake)).parent == fake.parent


@pytest.mark.parametrize("motif", MOTIF_NAMES)
def test_workflow_frequency_is_the_reference_scripts(minimap2_run, motif):
    out = minimap2_run / f"{OUT}.{motif}"
    assert Path(f"{out}.frequency.tsv").read_text() == reference_output(Path(f"{out}.calls.tsv"))


@pytest.mark.parametrize("options", [("-s",), ("-c", "2.5"), ("-s", "-c", "2.5")])
def test_frequency_modes_are_the_reference_scripts(minimap2_run, options):
    calls = minimap2_run / f"{OUT}.cpg.calls.tsv"
    threshold = float(options[-1]) if "-c" in options else 2.0
    ours = numapore_output(calls, "cpg", threshold, "-s" in options)
    assert ours == reference_output(calls, *options)


def test_bedmethyl_is_modkits_for_every_motif(minimap2_run):
    """The real E. coli reads' bedMethyl of every motif is modkit 0.6.1's pileup of the run's
    own modBAM with the command the pileup job's log gives, but for 0.6.1's bugs, each shown
    to be the only difference (A: a read's first motif site after its last call; C: GpC's
    minus strand at the interval start; H: intervals with an uncalled read dropped); the
    0.4 switch gives modkit 0.4.4's files byte for byte (tests/data/modkit,
    tests/modkit_golden.py)."""
    assert check_modkit_golden(minimap2_run, "ecoli") == 2 * len(MOTIF_NAMES)


def test_real_data_sanity_figure(minimap2_run):
    """E. coli has no CpG methylation: 97.8% of nanopolish's confident CpG calls (|llr| >= 2)
    on these 112 reads are unmethylated, as counted by hand from nanopolish's own table."""
    log = (minimap2_run / "results/logs/methylation_frequency/ecoli.minimap2.cpg.log").read_text()
    assert "cpg: 19862 calls, 15437 with |llr| >= 2.0, 97.8% of them unmethylated" in log
    calls = pd.read_csv(minimap2_run / f"{OUT}.cpg.calls.tsv", sep="\t")["log_lik_ratio"]
    assert f"{100 * (calls[calls.abs() >= 2] <= 0).mean():.1f}" == "97.8"


def modbam_records(path: Path) -> list[pysam.AlignedSegment]:
    """Every record of a sorted, indexed BAM."""
    with pysam.AlignmentFile(str(path)) as bam:
        assert bam.header.get("HD", {}).get("SO") == "coordinate" and bam.check_index()
        return list(bam)


@pytest.mark.parametrize("motif", MOTIF_NAMES)
def test_modbam_agrees_with_the_calls(minimap2_run, motif):
    out = minimap2_run / f"{OUT}.{motif}"
    m = MOTIFS[motif]
    records = modbam_records(Path(f"{out}.modbam.bam"))
    calls = pd.read_csv(Path(f"{out}.calls.tsv"), sep="\t")
    by_read = {name: group for name, group in calls.groupby("read_name")}
    tagged, checked, missed = set(), 0, 0
    for rec in records:
        if not rec.has_tag("MM"):
            continue
        tagged.add(rec.query_name)
        if not rec.modified_bases:  # calls, but every site on a deletion or another base
            assert rec.get_tag("MM") == f"{m.base}+{m.code}?;" and len(rec.get_tag("ML")) == 0
            continue
        ((key, probs),) = rec.modified_bases.items()
        assert key == (m.base, int(rec.is_reverse), m.code)
        probs = dict(probs)
        to_query = {r: q for q, r in rec.get_aligned_pairs(matches_only=True)}
        reverse = rec.is_reverse
        for call in by_read[rec.query_name].itertuples():
            same_place = call.chromosome == rec.reference_name and (call.strand == "-") == reverse
            if not same_place or abs(call.log_lik_ratio) < 2.0 * call.num_motifs:
                continue
            for offset in m.sites(call.sequence):
                ref = call.start + offset + (m.reverse_offset if reverse else m.forward_offset)
                query = to_query.get(ref)
                if query not in probs:
                    missed += 1  # a deletion or another base in the read there
                    continue
                assert ((probs[query] + 0.5) / 256 > 0.5) == (call.log_lik_ratio > 0)
                checked += 1
    # Sites lost to deletions or read errors: about 6% (CpG) to 9% (dcm: CC and GG homopolymers).
    assert checked > 8 * missed
    # Every read with calls is tagged, and only those.
    assert tagged == set(by_read)


def test_modbam_changes_nothing_else(minimap2_run):
    original = modbam_records(minimap2_run / "results/ecoli/align/ecoli.minimap2.bam")
    tagged = modbam_records(minimap2_run / f"{OUT}.dam.modbam.bam")
    key = lambda r: (r.query_name, r.flag, r.reference_start)  # noqa: E731
    assert len(original) == len(tagged)
    untagged = 0
    for before, after in zip(sorted(original, key=key), sorted(tagged, key=key), strict=True):
        if not after.has_tag("MM"):
            untagged += 1
            assert after.to_string() == before.to_string()
            continue
        for tag in ("MM", "ML", "MN"):
            after.set_tag(tag, None)
        assert after.to_string() == before.to_string()
    assert untagged >= 10  # dam: reads without calls (and secondary alignments) stay as they were


def test_methylartist_draws_the_modbam(minimap2_run, tmp_path):
    """methylartist (PyPI) reads the MM/ML tags and plots a locus: E. coli CpGs unmethylated."""
    reference = minimap2_run / "results/references/ecoli_dh10b/ecoli_dh10b.fa"
    png, csv = tmp_path / "locus.png", tmp_path / "smoothed.csv"
    run = subprocess.run(
        [
            str(REPO / ".venv/bin/methylartist"), "locus",
            "-b", str(minimap2_run / f"{OUT}.cpg.modbam.bam"),
            "-i", "gi|170079663|ref|NC_010473.1|:779000-784000",
            "-r", str(reference), "-n", "CG", "-o", str(png), "--smoothed_csv", str(csv),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 50_000
    smoothed = pd.read_csv(csv, index_col=0).iloc[:, 0]
    assert len(smoothed) > 300 and smoothed.mean() < 0.1  # hundreds of CpGs, almost none methylated


def test_modbam_refuses_calls_of_reads_not_in_the_bam(minimap2_run, tmp_path):
    bam = minimap2_run / "results/ecoli/align/ecoli.minimap2.bam"
    calls = table(tmp_path / "calls.tsv", ("c1", 10, 10, "zz-not-a-read", 3.0, 1, "AAAAACGAAAAA"))
    with pytest.raises(ValueError, match="'zz-not-a-read' has calls but no alignment in"):
        tag_alignments(bam, calls, MOTIFS["cpg"], tmp_path / "out.bam", tmp_path)
    calls.write_text("a\tb\n")
    with pytest.raises(ValueError, match="not a nanopolish call table"):
        tag_alignments(bam, calls, MOTIFS["cpg"], tmp_path / "out.bam", tmp_path)


def test_postprocess_benchmark_runs_small(tmp_path):
    """benchmarks/bench_postprocess.py end to end at a small scale (figures printed, not judged),
    and its synthetic table's frequencies are nanopolish's script's."""
    bench = [
        sys.executable,
        str(REPO / "benchmarks" / "bench_postprocess.py"),
        "--tmp",
        str(tmp_path),
    ]
    small = ["--rows", "20000", "--reads", "2000", "--sites", "8000", "--modbam-reads", "200"]
    calls = tmp_path / "calls.tsv"
    env = {**os.environ, "PYTHONPATH": str(REPO / "scripts")}
    run = subprocess.run(
        [*bench, *small, "--calls", str(calls)], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    steps = [line.split()[0] for line in run.stdout.splitlines()[2:]]
    assert steps == ["frequency", "merge", "accounting", "modbam"], run.stdout
    assert "20000 rows, 2000 reads, 8000 CpG sites" in run.stdout
    assert numapore_output(calls, "cpg", 2.0, True) == reference_output(calls, "-s")
