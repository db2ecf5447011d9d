"""The compiled call-table core against the DuckDB/polars/zlib path it replaces: the same
frequency table and bedMethyl text on the same inputs, with and without split groups."""

from __future__ import annotations

import gzip
from pathlib import Path

import pysam
import pytest
from conftest import reference_output
from test_methylation import CALLS, table

from numapore.methylation import bgzf, calls_core, frequency
from numapore.methylation.motifs import MOTIFS

ROWS = CALLS + [
    ("c2", 5, 5, "r1", -4.0, 1, "AACGTT"),
    ("c10", 7, 9, "r4", 9.5, 2, "AACGCGTT"),
    ("c10", 7, 9, "r5", -9.5, 2, "AACGCGTT"),
    ("c1", 10, 10, "r9", 4.0, 2, "TTCGAACGTT"),  # a key seen with another group size/sequence
    ("c1", 40, 40, "r9", "2.5e0", 1, "AACGT"),  # a number strtod reads
]


def run(tmp_path: Path, compiled: bool, split: bool, motif: str = "cpg") -> tuple:
    """frequency_outputs on ROWS with the compiled core on or off: summary, TSV, bed text."""
    calls = table(tmp_path / "calls.tsv", *ROWS)
    tsv, bed = tmp_path / f"{compiled}.tsv", tmp_path / f"{compiled}.bed.gz"
    saved = calls_core.ENABLED
    calls_core.ENABLED = compiled
    try:
        done = frequency.frequency_outputs(calls, MOTIFS[motif], 2.0, split, tsv, bed)
    finally:
        calls_core.ENABLED = saved
    return done, tsv.read_text(), gzip.open(bed).read()


def test_compiled_core_is_built() -> None:
    """./setup.sh builds numapore.methylation._calls_core on this machine."""
    assert calls_core.lib is not None and calls_core.ENABLED


@pytest.mark.parametrize("motif", ["cpg", "gpc"])
@pytest.mark.parametrize("split", [False, True])
def test_both_paths_same_outputs(tmp_path, split, motif):
    compiled, fallback = run(tmp_path, True, split, motif), run(tmp_path, False, split, motif)
    assert compiled == fallback and compiled[2]


@pytest.mark.parametrize("split", [False, True])
def test_compiled_frequency_is_the_reference_scripts(tmp_path, split):
    _, tsv, _ = run(tmp_path, True, split)
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
        with calls_core.bedmethyl_sites(t, MOTIFS["cpg"]) as sites:
            text = b"".join(calls_core.bedmethyl_text(sites)).decode()
            assert sites.nsites == len(text.splitlines())
    assert names == ["c1", "c10", "c2"] and sorted(rank.tolist()) == [0, 1, 2]
    assert groups["calls"].sum() == len(ROWS) and groups.height == 6
    assert groups.filter(start=10, num_motifs=1)["first_row"].item() == 0


@pytest.mark.parametrize("compiled", [False, True])
def test_bgzf_blocks_read_back(tmp_path, compiled, monkeypatch):
    """Both block compressors give BGZF that pysam and gzip read; zlib's is pysam's bytes."""
    monkeypatch.setattr(calls_core, "ENABLED", compiled)
    text = b"".join(f"c\t{i}\t{i + 1}\tx\n".encode() for i in range(40_000))
    path = tmp_path / "t.bed.gz"
    bgzf.write_bgzf(path, [text[:1000], text[1000:]], threads=2)
    assert gzip.open(path).read() == text
    block = bgzf.compiled_block if compiled else bgzf.zlib_block
    assert gzip.decompress(block(text[: bgzf.BGZF_BLOCK])) == text[: bgzf.BGZF_BLOCK]
    frequency.write_text(path, [text])  # .gz: BGZF and its index
    with pysam.TabixFile(str(path)) as tabix:
        assert len(list(tabix.fetch("c", 100, 200))) == 100  # BED: half-open
    if not compiled:
        plain = tmp_path / "p.bed"
        plain.write_bytes(text)
        pysam.tabix_index(str(plain), preset="bed", force=True)
        assert (tmp_path / "p.bed.gz").read_bytes() == path.read_bytes()


def test_table_text_and_bedmethyl_text(tmp_path):
    """The fallback's text: table_text in chunks, bedmethyl_text's count and rows."""
    calls = table(tmp_path / "calls.tsv", *ROWS)
    groups = frequency.group_counts(calls, 2.0)
    n, chunks = frequency.bedmethyl_text(groups, MOTIFS["cpg"])
    assert len(b"".join(chunks).splitlines()) == n == 9
    assert frequency.write_frequency(groups, MOTIFS["cpg"], False, tmp_path / "f.tsv") == 5
    text = b"".join(frequency.table_text(groups.select("start"), header=True))
    assert text.splitlines()[0] == b"start" and len(text.splitlines()) == groups.height + 1
