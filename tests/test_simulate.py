"""Tests of the raw-signal simulator (numapore.simulate.reads), its pore model and
numapore.methylation.accuracy."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import shutil
import subprocess
import tarfile
from pathlib import Path

import h5py
import numpy as np
import pysam
import pytest
import pandas as pd

from numapore.methylation import accuracy

from numapore.simulate import poremodel
from numapore.simulate import read_model
from numapore.simulate import reads as sim

NANOOK = Path("/usr/share/doc/nanook/examples/data.tar.gz")
DH10B_MEMBER = "data/nanook_ecoli_500/references/ecoli_dh10b_cs.fasta"
DH10B_NAME = "gi|170079663|ref|NC_010473.1|"


@pytest.fixture(scope="session")
def model() -> poremodel.PoreModel:
    """Tombo's R9.4 model in pA (Debian package tombo)."""
    if not poremodel.STANDARD_MODEL.exists():
        pytest.fail(f"{poremodel.STANDARD_MODEL} missing: install Debian's tombo (setup.sh)")
    return poremodel.load_pore_model()


@pytest.fixture(scope="session")
def dh10b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The E. coli DH10B genome from Debian's nanook-examples, extracted to a temporary folder."""
    if not NANOOK.exists():
        pytest.fail(f"{NANOOK} missing: install Debian's nanook-examples (setup.sh)")
    out = tmp_path_factory.mktemp("dh10b")
    with tarfile.open(NANOOK) as tar:
        member = tar.getmember(DH10B_MEMBER)
        member.name = "dh10b.fasta"
        tar.extract(member, out, filter="data")
    return out / "dh10b.fasta"


def _digest(folder: Path) -> dict[str, str]:
    """Return {relative path: sha256} of every file under folder."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _read_fastq(path: Path) -> dict[str, str]:
    """Return {read id: sequence} of a FASTQ file."""
    lines = path.read_text().splitlines()
    return {lines[i][1:].split()[0]: lines[i + 1] for i in range(0, len(lines), 4)}


# ---------------------------------------------------------------------------- accuracy


def test_roc_auc_hand_example() -> None:
    """AUC of a tiny example equals the fraction of correctly ordered (pos, neg) pairs."""
    # Pairs (pos, neg): (0.35, 0.1) ok, (0.35, 0.4) wrong, (0.8, 0.1) ok, (0.8, 0.4) ok -> 3/4.
    assert accuracy.roc_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == 0.75
    assert accuracy.roc_auc(np.array([1.0, 2.0]), np.array([0, 1])) == 1.0
    assert accuracy.roc_auc(np.array([2.0, 1.0]), np.array([0, 1])) == 0.0
    # A tie between a positive and a negative counts one half.
    assert accuracy.roc_auc(np.array([1.0, 1.0, 3.0]), np.array([0, 1, 1])) == 0.75
    assert np.isnan(accuracy.roc_auc(np.array([1.0, 2.0]), np.array([1, 1])))


def test_label_calls_majority(tmp_path: Path) -> None:
    """A call's truth is the majority state of the read's CpGs within [start, end]."""
    truth = tmp_path / "truth.tsv"
    truth.write_text(
        "read_id\tchromosome\tposition\tstrand\tmethylated\n"
        "r1\tc\t10\t+\t1\nr1\tc\t15\t+\t1\nr1\tc\t18\t+\t0\nr1\tc\t40\t+\t0\n"
    )
    calls = tmp_path / "calls.tsv"
    calls.write_text(
        "chromosome\tstrand\tstart\tend\tread_name\tlog_lik_ratio\tlog_lik_methylated\t"
        "log_lik_unmethylated\tnum_calling_strands\tnum_motifs\tsequence\n"
        "c\t+\t10\t18\tr1\t3.0\t0\t0\t1\t3\tx\nc\t+\t40\t40\tr1\t-2.5\t0\t0\t1\t1\tx\n"
        "c\t+\t70\t70\tr1\t1.0\t0\t0\t1\t1\tx\n"
    )
    acc = accuracy.evaluate(calls, truth, n_reads=2)
    assert (acc.reads, acc.reads_called, acc.calls, acc.calls_matched) == (2, 1, 3, 2)
    assert acc.called_fraction == 0.5 and acc.auc == 1.0


# ---------------------------------------------------------------------------- pore model


def test_pore_model_levels_and_cpg_shifts(model: poremodel.PoreModel) -> None:
    """Levels are on nanopolish's pA scale and CpG shifts sit only on C-of-CpG positions."""
    assert poremodel.kmer_index("AAAAAA") == 0 and poremodel.kmer_index("TTTTTT") == 4095
    assert poremodel.kmer_index("AAAACG") == 6
    assert 55 < model.levels.min() and model.levels.max() < 135
    assert np.allclose(model.sd, 0.35287208 * poremodel.PA_SCALE)
    # nanopolish's r9.4_450bps 6-mer model: AAAAAA 86.49 pA, AATCAA 119.70 pA.
    assert abs(model.levels[0] - 86.49) < 2.5
    assert abs(model.levels[poremodel.kmer_index("AATCAA")] - 119.70) < 2.5
    i = poremodel.kmer_index("AACGTT")
    assert model.cpg_shift[i, 2] != 0 and not model.cpg_shift[i, [0, 1, 3, 4, 5]].any()
    assert not model.cpg_shift[poremodel.kmer_index("ACATGT")].any()
    assert model.cpg_shift[poremodel.kmer_index("AAAAAC"), 5] != 0  # G lies past the 6-mer
    codes = poremodel.encode("GAACGTTC")
    mask = np.zeros(8, dtype=bool)
    mask[3] = True  # the C of CG, at index 2 of the second 6-mer window (AACGTT)
    plain, meth = model.levels_for(codes), model.levels_for(codes, mask)
    assert np.allclose(
        meth - plain,
        [model.cpg_shift[poremodel.kmer_index("GAACGT"), 3]]
        + [
            model.cpg_shift[i, 2],
            model.cpg_shift[poremodel.kmer_index("ACGTTC"), 1],
        ],
    )


def test_methylation_fraction_pattern() -> None:
    """The per-site pattern has fully, un- and partially methylated sites, deterministically."""
    f = read_model.methylation_fraction(np.arange(0, 100_000, 7))
    assert f.min() == 0.0 and f.max() == 1.0
    assert 0.1 < (f == 0).mean() < 0.3 and 0.1 < (f == 1).mean() < 0.3
    assert 0.4 < ((f > 0) & (f < 1)).mean() < 0.8
    assert np.array_equal(f, read_model.methylation_fraction(np.arange(0, 100_000, 7)))


# ---------------------------------------------------------------------------- simulator


def test_simulate_read_truth_and_signal(dh10b: Path, model: poremodel.PoreModel) -> None:
    """A read is its reference slice, its truth lists its CpGs, its signal is R9.4-like."""
    ref = read_model.Reference(read_model.read_fasta(dh10b))
    cfg = read_model.SimConfig(seed=3, mean_length=3000, sd_length=1000, error_rate=0.06)
    strands = set()
    for i in range(12):
        r = read_model.simulate_read(ref, model, cfg, i)
        fwd = ref.seqs[r.chromosome][r.start : r.end]
        want = fwd if r.strand == "+" else read_model.reverse_complement(fwd)
        assert r.sequence.encode() == want
        strands.add(r.strand)
        # Every CG of the read is one truth CpG (CG is its own reverse complement).
        assert r.cpg_positions.size == r.sequence.count("CG")
        assert all(ref.seqs[r.chromosome][p : p + 2] == b"CG" for p in r.cpg_positions)
        assert r.methylated.dtype == bool and r.methylated.size == r.cpg_positions.size
        assert 0.85 < len(r.called) / len(r.sequence) < 1.15 and r.called != r.sequence
        assert r.signal.dtype == np.int16
        pa = (r.signal.astype(float) + r.offset) * r.range_pa / r.digitisation
        assert 80 < np.median(pa) < 105 and pa.min() > 30 and pa.max() < 170
        per_base = r.signal.size / len(r.sequence)
        assert 7.5 < per_base < 10.5  # 4000 Hz / 450 bases/s = 8.9
    assert strands == {"+", "-"}


def test_error_rate_changes_only_the_fastq(dh10b: Path, model: poremodel.PoreModel) -> None:
    """Basecalling errors are drawn last: the molecule, truth and signal stay the same."""
    ref = read_model.Reference(read_model.read_fasta(dh10b))
    clean = read_model.SimConfig(seed=4, mean_length=2000, sd_length=300)
    a = read_model.simulate_read(ref, model, clean, 3)
    b = read_model.simulate_read(ref, model, dataclasses.replace(clean, error_rate=0.1), 3)
    assert a.called == a.sequence and b.called != b.sequence and a.sequence == b.sequence
    assert np.array_equal(a.signal, b.signal) and np.array_equal(a.methylated, b.methylated)
    assert (a.read_id, a.channel, a.offset) == (b.read_id, b.channel, b.offset)


def test_outputs_deterministic_across_processes(dh10b: Path, tmp_path: Path) -> None:
    """Same seed gives byte-identical outputs with 1 or 2 processes; another seed differs."""
    cfg = read_model.SimConfig(
        n_reads=12,
        seed=11,
        mean_length=1500,
        sd_length=500,
        reads_per_file=5,
        formats=("fastq", "truth", "single", "multi", "blow5"),
    )
    a, b = tmp_path / "a", tmp_path / "b"
    sim.simulate(dh10b, a, cfg, processes=1, progress=False)
    sim.simulate(dh10b, b, cfg, processes=2, progress=False)
    da = _digest(a)
    assert da == _digest(b)
    assert len([k for k in da if k.startswith("fast5_single/")]) == 12
    assert sorted(k for k in da if k.startswith("fast5_multi/")) == [
        f"fast5_multi/batch_{i}.fast5" for i in range(3)
    ]
    c = tmp_path / "c"
    sim.simulate(dh10b, c, dataclasses.replace(cfg, seed=12), progress=False)
    assert _digest(c)["reads.fastq"] != da["reads.fastq"]


def test_fast5_structure_and_consistency(dh10b: Path, tmp_path: Path) -> None:
    """Single- and multi-read FAST5 have ONT's layout and agree with FASTQ and truth."""
    cfg = read_model.SimConfig(n_reads=6, seed=5, mean_length=2000, sd_length=500, reads_per_file=4)
    sim.simulate(dh10b, tmp_path, cfg, progress=False)
    fastq = _read_fastq(tmp_path / "reads.fastq")
    assert len(fastq) == 6
    truth = (tmp_path / "truth.tsv").read_text().splitlines()
    assert truth[0].split("\t") == list(sim.TRUTH_COLUMNS)
    rows = [line.split("\t") for line in truth[1:]]
    assert {r[0] for r in rows} == set(fastq)
    ref = read_model.read_fasta(dh10b)
    for _rid, chrom, pos, strand, meth in rows:
        assert ref[chrom][int(pos) : int(pos) + 2] == b"CG" and strand in "+-" and meth in "01"
    for rid, seq in fastq.items():  # error-free FASTQ: one truth row per CG of the read
        assert seq.count("CG") == sum(r[0] == rid for r in rows)

    singles = sorted((tmp_path / "fast5_single").rglob("*.fast5"))
    assert len(singles) == 6
    signals = {}
    for path in singles:
        with h5py.File(path, "r") as f:
            assert f.attrs["file_version"] == 0.6
            (read,) = f["Raw/Reads"].values()
            rid = read.attrs["read_id"].decode()
            sig = read["Signal"]
            assert sig.dtype == np.int16 and read.attrs["duration"] == sig.shape[0]
            assert read.name == f"/Raw/Reads/Read_{read.attrs['read_number']}"
            for key in ("median_before", "start_mux", "start_time"):
                assert key in read.attrs
            ch = f["UniqueGlobalKey/channel_id"].attrs
            assert ch["digitisation"] == 8192.0 and ch["sampling_rate"] == 4000.0
            assert 1400 < ch["range"] < 1500 and 0 <= ch["offset"] <= 30
            assert 1 <= int(ch["channel_number"]) <= 512
            assert f["UniqueGlobalKey/context_tags"].attrs["sample_frequency"] == "4000"
            assert len(f["UniqueGlobalKey/tracking_id"].attrs["run_id"]) == 40
            signals[rid] = sig[:]
    assert set(signals) == set(fastq)

    multis = sorted((tmp_path / "fast5_multi").glob("*.fast5"))
    assert [p.name for p in multis] == ["batch_0.fast5", "batch_1.fast5"]
    seen = []
    for path in multis:
        with h5py.File(path, "r") as f:
            assert f.attrs["file_type"] == b"multi-read"
            assert f.attrs["file_version"].decode().startswith("2.")
            for name, grp in f.items():
                rid = grp["Raw"].attrs["read_id"].decode()
                assert name == f"read_{rid}"
                assert np.array_equal(grp["Raw/Signal"][:], signals[rid])
                assert grp["channel_id"].attrs["digitisation"] == 8192.0
                assert grp["tracking_id"].attrs["run_id"] == grp.attrs["run_id"]
                assert grp["context_tags"].attrs["experiment_kit"] == b"genomic_dna"
                seen.append(rid)
    assert sorted(seen) == sorted(fastq) and len(seen) == len(set(seen))


def test_blow5_matches_fast5(dh10b: Path, tmp_path: Path) -> None:
    """BLOW5 (through numapore.signal.slow5) holds the same reads and signal as the multi-read
    FAST5."""
    pyslow5 = pytest.importorskip("pyslow5")
    cfg = read_model.SimConfig(
        n_reads=5, seed=8, mean_length=1500, sd_length=300, formats=("fastq", "multi", "blow5")
    )
    sim.simulate(dh10b, tmp_path, cfg, progress=False)
    assert (tmp_path / "reads.blow5.idx").exists()
    fastq = _read_fastq(tmp_path / "reads.fastq")
    s5 = pyslow5.Open(str(tmp_path / "reads.blow5"), "r")
    recs = {r["read_id"]: r for r in s5.seq_reads(pA=False, aux="all")}
    assert list(recs) == list(fastq)  # BLOW5 keeps the simulation order
    assert s5.get_header_value("run_id", 0) == cfg.run_id()
    with h5py.File(tmp_path / "fast5_multi" / "batch_0.fast5", "r") as f:
        for rid, rec in recs.items():
            raw = f[f"read_{rid}/Raw"]
            ch = f[f"read_{rid}/channel_id"].attrs
            assert np.array_equal(rec["signal"], raw["Signal"][:])
            assert rec["offset"] == ch["offset"] and rec["range"] == ch["range"]
            assert rec["digitisation"] == 8192.0 and rec["sampling_rate"] == 4000.0
            assert rec["read_number"] == raw.attrs["read_number"]
            assert rec["start_time"] == raw.attrs["start_time"]
            assert rec["channel_number"] == ch["channel_number"].decode()


def test_cli_rejects_unknown_format(dh10b: Path, tmp_path: Path) -> None:
    """The CLI reports bad --formats as an error instead of a traceback."""
    args = ["--reference", str(dh10b), "--out", str(tmp_path), "--reads", "1", "--quiet"]
    assert sim.main(args + ["--formats", "fastq,bogus"]) == 1
    ok = ["--reads", "3", "--processes", "2", "--reads-per-file", "2", "--formats", "fastq,truth"]
    assert sim.main(args[:4] + ok + ["--quiet", "--mean-length", "800", "--sd-length", "100"]) == 0
    assert len(_read_fastq(tmp_path / "reads.fastq")) == 3
    assert (tmp_path / "truth.tsv").exists() and not (tmp_path / "fast5_multi").exists()


# ---------------------------------------------------------------------------- nanopolish


def _tool(name: str) -> str:
    """Return the path of a required command-line tool or fail the test."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: run setup.sh")
    return path


def _call_methylation(ref: Path, out: Path, fast5: Path, threads: int = 2) -> Path:
    """Align out/reads.fastq with minimap2, index fast5 and run nanopolish call-methylation."""
    reads, bam, calls = out / "reads.fastq", out / "reads.bam", out / "calls.tsv"
    mm = subprocess.Popen(
        [_tool("minimap2"), "-t", str(threads), "-ax", "map-ont", str(ref), str(reads)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    subprocess.run([_tool("samtools"), "sort", "-o", str(bam), "-"], stdin=mm.stdout, check=True)
    assert mm.wait() == 0
    subprocess.run([_tool("samtools"), "index", str(bam)], check=True)
    nanopolish = _tool("nanopolish")
    subprocess.run(
        [nanopolish, "index", "-d", str(fast5), str(reads)], check=True, capture_output=True
    )
    with open(calls, "w") as fh:
        subprocess.run(
            [nanopolish, "call-methylation", "-t", str(threads), "-r", str(reads)]
            + ["-b", str(bam), "-g", str(ref)],
            stdout=fh,
            stderr=subprocess.DEVNULL,
            check=True,
        )
    return calls


def test_nanopolish_recovers_simulated_methylation(dh10b: Path, tmp_path: Path) -> None:
    """nanopolish calls >= 90% of 200 simulated reads (multi-read FAST5), AUC >= 0.85."""
    cfg = read_model.SimConfig(
        n_reads=200,
        seed=2024,
        mean_length=4000,
        sd_length=1500,
        error_rate=0.05,
        reads_per_file=50,
        formats=("fastq", "truth", "multi"),
    )
    sim.simulate(dh10b, tmp_path, cfg, processes=2, progress=False)
    calls = _call_methylation(dh10b, tmp_path, tmp_path / "fast5_multi")
    acc = accuracy.evaluate(calls, tmp_path / "truth.tsv", n_reads=200)
    print(acc)
    assert acc.called_fraction >= 0.90
    assert acc.calls_matched == acc.calls  # call positions use the truth's coordinates
    assert acc.auc >= 0.85


def test_nanopolish_reads_single_fast5(dh10b: Path, tmp_path: Path) -> None:
    """nanopolish indexes and calls reads from the single-read FAST5 files too."""
    cfg = read_model.SimConfig(
        n_reads=8,
        seed=99,
        mean_length=3000,
        sd_length=500,
        formats=("fastq", "truth", "single"),
        region=(DH10B_NAME, 100_000, 130_000),
    )
    sim.simulate(dh10b, tmp_path, cfg, progress=False)
    calls = _call_methylation(dh10b, tmp_path, tmp_path / "fast5_single")
    acc = accuracy.evaluate(calls, tmp_path / "truth.tsv", n_reads=8)
    assert acc.reads_called >= 7 and acc.calls_matched == acc.calls


@pytest.mark.parametrize("fast5_kind", ["multi", "single"])
def test_converted_fast5_equals_simulator_blow5(dh10b: Path, tmp_path: Path, fast5_kind: str):
    """Conformance: FAST5 -> BLOW5 (numapore.signal.convert) of the simulated FAST5 equals the
    simulator's own BLOW5 record for record; the header too, but for the attributes that say
    which FAST5 layout the reads came from (the simulator's BLOW5 mirrors the multi-read one)."""
    import pyslow5

    from numapore.signal.convert import convert

    cfg = read_model.SimConfig(
        n_reads=12, seed=5, mean_length=1500, sd_length=300, reads_per_file=5,
        formats=("fastq", fast5_kind, "blow5"),
    )  # fmt: skip
    sim.simulate(dh10b, tmp_path, cfg, progress=False)
    folder = tmp_path / ("fast5_multi" if fast5_kind == "multi" else "fast5_single")
    converted = tmp_path / "converted.blow5"
    report = convert([folder], converted, processes=2, progress=None)
    assert report.reads_written == 12

    def records(path: Path) -> tuple[dict, dict]:
        """All records by read id, and the header of read group 0."""
        s5 = pyslow5.Open(str(path), "r")
        recs = {r["read_id"]: r for r in s5.seq_reads(pA=False, aux="all")}
        return recs, s5.get_all_headers()

    ours, header = records(tmp_path / "reads.blow5")
    theirs, converted_header = records(converted)
    if fast5_kind == "single":
        for layout_key in ("file_type", "file_version", "pore_type"):
            header.pop(layout_key, None)
            converted_header.pop(layout_key, None)
    assert header == converted_header
    assert ours.keys() == theirs.keys()
    for read_id, rec in ours.items():
        other = theirs[read_id]
        assert rec.keys() == other.keys()
        for key, value in rec.items():
            if isinstance(value, np.ndarray):
                assert np.array_equal(value, other[key]), (read_id, key)
            else:
                assert value == other[key], (read_id, key)


def test_per_site_keeps_confident_calls_of_covered_sites():
    labelled = pd.DataFrame(
        {
            "chromosome": ["c"] * 7,
            "start": [1, 1, 1, 5, 5, 9, 9],
            "log_lik_ratio": [3.0, -4.0, 0.5, 2.5, 2.2, -3.0, -9.0],
            "truth": [True, False, True, True, True, False, True],
        }
    )
    per, r = accuracy.per_site(labelled, threshold=2.0, min_coverage=2)
    # Site 1: the 0.5 call is not confident; two calls, one methylated, half true.
    assert per.loc[("c", 1)].tolist() == [2, 0.5, 0.5]
    assert per.loc[("c", 9)].tolist() == [2, 0.0, 0.5]
    assert len(per) == 3 and r == pytest.approx(np.corrcoef([0.5, 1, 0], [0.5, 1, 0.5])[0, 1])
    _, too_few = accuracy.per_site(labelled, threshold=2.0, min_coverage=3)
    assert np.isnan(too_few)


# ---------------------------------------------------------------------------- modBAM


def _phi(x: float) -> float:
    """The standard normal distribution function."""
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("mode, codes", [("?", "m"), (".", "m"), ("?", "hm")])
def test_modbam_calls_read_back(dh10b: Path, tmp_path: Path, mode: str, codes: str) -> None:
    """The unaligned modBAM holds each read's basecalls and, read back with pysam's
    modified_bases, exactly the simulator's calls (read positions, ML bytes; 5hmC too when
    asked for) at CpG Cs; its truth is the signal reads' truth (the same molecules)."""
    cfg = read_model.SimConfig(
        n_reads=8, seed=7, mean_length=3000, sd_length=800, error_rate=0.03, reads_per_file=3,
        formats=("modbam", "truth"), mod_mode=mode, mod_codes=codes,
    )  # fmt: skip
    ref = read_model.Reference(read_model.read_fasta(dh10b))
    sim.simulate(dh10b, tmp_path / "m", cfg, processes=2, progress=False)
    expected = {
        r.read_id: r for r, _ in (read_model.basecalled_read(ref, cfg, i) for i in range(8))
    }
    calls = cpgs = 0
    with pysam.AlignmentFile(str(tmp_path / "m" / "reads.modbam.bam"), check_sq=False) as bam:
        records = list(bam)
    assert [rec.query_name for rec in records] == list(expected)
    for rec in records:
        want = expected[rec.query_name]
        assert rec.is_unmapped and rec.query_sequence == want.sequence
        assert rec.get_tag("MN") == len(want.sequence)
        assert rec.get_tag("MM").startswith(f"C+{codes[0]}{mode},")
        got = rec.modified_bases[("C", 0, "m")]
        assert got == list(zip(want.call_positions.tolist(), want.ml.tolist(), strict=True))
        if codes == "hm":
            got_h = rec.modified_bases[("C", 0, "h")]
            assert [q for q, _ in got_h] == [q for q, _ in got]
            assert [ml for _, ml in got_h] == want.ml_h.tolist()
            assert max(h + m for (_, h), (_, m) in zip(got_h, got, strict=True)) <= 255
        assert all(want.sequence[q : q + 2] == "CG" for q, _ in got)
        if mode == ".":  # implicit: a left-out call means canonical, so no call says 0
            assert all(ml > 0 for _, ml in got)
        calls += len(got)
        cpgs += want.sequence.count("CG")
    if mode == "?":  # explicit: about mod_missing (2%) of the CpGs have no call
        assert 0.95 < calls / cpgs < 1.0
    signal_truth = dataclasses.replace(cfg, formats=("fastq", "truth"))
    sim.simulate(dh10b, tmp_path / "s", signal_truth, progress=False)
    assert (tmp_path / "m" / "truth.tsv").read_bytes() == (
        tmp_path / "s" / "truth.tsv"
    ).read_bytes()


def test_cli_rejects_bad_modification_settings(dh10b: Path, tmp_path: Path, capsys) -> None:
    """A noise-model setting out of range is one error line, before any read is written."""
    args = ["--reference", str(dh10b), "--out", str(tmp_path), "--formats", "modbam", "--quiet"]
    assert sim.main(args + ["--mod-sharpness", "0"]) == 1
    assert sim.main(args + ["--mod-missing", "1"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "numapore.simulate: error: modification call sharpness must be > 0, not 0.0",
        "numapore.simulate: error: missing-call rate must be in [0, 1), not 1.0",
    ]
    assert not (tmp_path / "reads.modbam.bam").exists()


def test_modbam_calls_are_calibrated(dh10b: Path) -> None:
    """On ~15,000 calls, P(methylated | p) = p (after the sample's prior, the model being
    calibrated on balanced data: chi-square over 8 bins of p below its 0.1% point; a model 30%
    too sharp scores ~40), the AUC is Phi(s / sqrt 2) and a call is right with probability
    Phi(s / 2) at sharpness s."""
    ref = read_model.Reference(read_model.read_fasta(dh10b))
    cfg = read_model.SimConfig(seed=9, mean_length=3000, sd_length=500, error_rate=0.02)
    reads = [read_model.basecalled_read(ref, cfg, i)[0] for i in range(60)]
    p = np.concatenate([(r.ml + 0.5) / 256 for r in reads])  # the middle of each ML bin
    truth = np.concatenate([r.call_truth for r in reads])
    assert p.size > 10_000 and 0.3 < truth.mean() < 0.7
    prior = np.log(truth.mean() / (1 - truth.mean()))
    posterior = 1 / (1 + np.exp(-(np.log(p / (1 - p)) + prior)))
    bins = np.digitize(p, [0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98])
    chi2 = 0.0
    for b in range(8):
        n = int((bins == b).sum())
        want = posterior[bins == b].mean()
        chi2 += (truth[bins == b].mean() - want) ** 2 / (want * (1 - want) / n)
    assert chi2 < 26.1  # chi-square, 8 degrees of freedom, p = 0.001
    s = cfg.mod_sharpness
    assert accuracy.roc_auc(p, truth) == pytest.approx(_phi(s / math.sqrt(2)), abs=0.01)
    assert ((p > 0.5) == truth).mean() == pytest.approx(_phi(s / 2), abs=0.015)
