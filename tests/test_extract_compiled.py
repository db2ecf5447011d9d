"""`numapore extract-calls`' rows written in C (numapore/pileup/extract_calls.c) against modkit
0.6.1's own file (every column, byte for byte) and against the Python rows of the same command
(extract.CallWriter without the C) on the suite's BAMs with each option the C takes: reverse
reads, duplex reads (G- groups), unmapped and soft-clipped calls, duplicates, supplementary
records, reference k-mers, even k-mer sizes, --mapped-only, --pass-only, --no-filtering and the
estimated threshold. Also its f32 text against positions.rust_f32."""

from __future__ import annotations

import numpy as np
import pytest
from modkit_more_suite import SUITE
from project import REPO

from numapore.modbam import extract
from numapore.modbam.positions import rust_f32
from numapore.pileup.common import ffi, lib

OLD = REPO.parent / "shared" / "data" / "modkit_pileup" / "inputs"
HP = SUITE.parent / "modkit061_pileup" / "inputs" / "bc_anchored_10_reads.hp.sorted.bam"
DUPLEX = SUITE / "inputs" / "bc_anchored_10_reads.synthetic_duplex.bam"
REF = OLD / "CGI_ladder_3.6kb_ref.fa"
BAMS = {
    "hp": HP,
    "duplex": DUPLEX,
    "oligo": OLD / "CG_5mC_20230207_1700_6A_PAG66026_3c0abf27_oligo_741_adapters_modcalls_0th_"
    "sort_10_reads.bam",
    "all_contexts": OLD / "testing_all_context_calls.bam",
    "duplicates": OLD / "duplicated.marked.fixed.bam",
    "supplementary": OLD / "supplementary_and_secondary_read.bam",
}
OPTIONS = {
    "threshold": ["--filter-threshold", "0.7"],
    "reference_k4": ["--filter-threshold", "0.7", "--reference", str(REF), "--kmer-size", "4"],
    "mapped_pass": ["--filter-threshold", "0.8", "--mapped-only", "--pass-only"],
    "no_filtering": ["--no-filtering", "--kmer-size", "9"],
    "estimated": ["-t", "1"],
}


class Spy:
    """Counts the spans the C wrote and those it handed back to Python."""

    def __init__(self, monkeypatch, off: bool = False):
        """Wrap CompiledRows.__call__ (off: always hand back, the Python rows)."""
        self.done = self.back = 0
        original = extract.CompiledRows.__call__

        def spied(rows, span, reference):
            text = None if off else original(rows, span, reference)
            if text is None:
                self.back += 1
            else:
                self.done += 1
            return text

        monkeypatch.setattr(extract.CompiledRows, "__call__", spied)


def run(bam, options, out, monkeypatch, off=False) -> Spy:
    """extract-calls of bam with options into out (one process: the spy sees every span)."""
    with monkeypatch.context() as patch:
        spy = Spy(patch, off)
        argv = [str(bam), str(out), "-t", "1", *options]
        assert extract.main(argv) == 0
    return spy


def test_modkit_golden_through_c(tmp_path, monkeypatch):
    """The suite's extract_calls_hp case written by the C: modkit 0.6.1's bytes."""
    out = tmp_path / "calls.tsv"
    spy = run(HP, ["--filter-threshold", "0.7"], out, monkeypatch)
    assert spy.done > 0 and spy.back == 0
    assert out.read_bytes() == (SUITE / "expected" / "extract_calls_hp.tsv").read_bytes()


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("name", BAMS)
def test_c_rows_are_python_rows(name, option, tmp_path, monkeypatch):
    """The C's rows are the Python rows, byte for byte, and the C wrote the spans."""
    c_out, py_out = tmp_path / "c.tsv", tmp_path / "py.tsv"
    spy = run(BAMS[name], OPTIONS[option], c_out, monkeypatch)
    python = run(BAMS[name], OPTIONS[option], py_out, monkeypatch, off=True)
    assert python.done == 0
    assert spy.done > 0
    text = c_out.read_text()
    assert text.count("\n") > 1  # rows, not only the header
    assert text == py_out.read_text()


def numpy_f32_text(x: float) -> str:
    """Rust's f32 Display by another route: numpy's shortest digits (ties to even), the tie
    then rounded half up as Rust does (0.43945313)."""
    from decimal import ROUND_HALF_UP, Decimal

    x = np.float32(x)
    text = np.format_float_positional(x, unique=True, trim="-")
    if "." not in text:
        return text
    places = len(text.split(".")[1])
    up = Decimal(float(x)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return f"{up:f}" if np.float32(str(up)) == x else text


def test_f32_text_is_rust_f32():
    """The C's probability text and rust_f32's are numpy's shortest f32 digits (ties up):
    every call probability of one or two codes, canonical's 1 - their sum, random f32s."""
    ml = (np.arange(256, dtype=np.float32) + np.float32(0.5)) / np.float32(256)
    sums = (ml[:, None] + ml[None, :]).astype(np.float32).ravel()
    canonical = (np.float32(1) - sums).astype(np.float32)
    rand = np.random.default_rng(7).uniform(-0.2, 101, 20_000).astype(np.float32)
    special = np.float32([0, 1, 100, 66.66667, 0.439453125, -0.0078125, 1e-30, 3e7])
    values = np.concatenate([ml, sums, canonical, rand, special])
    buf = ffi.new("char[200]")
    for x in np.unique(values).tolist():
        lib.pu_format_f32(x, buf)
        expected = numpy_f32_text(x)
        assert ffi.string(buf).decode() == expected, x
        assert rust_f32(x) == expected, x
