"""numapore's pileup against modkit 0.4.4 (`--modkit-compat 0.4`, which every run here passes):
every line of the shared conformance suite
(../shared/data/modkit_pileup/cases.tsv) run through the command line must write the expected
bedMethyl byte for byte (a new line there is a new case); bad input gives one `numapore: ` line
and exit code 1; threads and region splits do not change the bytes."""

from __future__ import annotations

import csv
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pysam
import pytest
import forked_snakemake
from conftest import REPO, SHARED

from numapore.pileup import engine
from numapore.pileup import cli as pileup_cli
from numapore.pileup import common as pileup_common
from numapore.methylation.bedmethyl import read_bedmethyl

SUITE = SHARED / "data" / "modkit_pileup"
INPUTS = SUITE / "inputs"
BC_BAM = INPUTS / "bc_anchored_10_reads.sorted.bam"
ALL_CONTEXT = INPUTS / "testing_all_context_calls.bam"
REFERENCE = INPUTS / "CGI_ladder_3.6kb_ref.fa"


def pileup_command() -> list[str]:
    """The argv prefix of the pileup command: the installed `numapore pileup` console command,
    with modkit 0.4.4's semantics."""
    return [str(Path(sys.executable).parent / "numapore"), "pileup", "--modkit-compat", "0.4"]


def run_pileup(*args, check: bool = False, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the pileup command line with args (in cwd); its completed process (text output)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "scripts"))
    result = forked_snakemake.run(
        [*pileup_command(), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def load_cases() -> list[dict[str, str]]:
    """The suite's cases (one per line of cases.tsv)."""
    if not (SUITE / "cases.tsv").is_file():
        pytest.fail(f"shared data missing: {SUITE} (tests need ../shared beside the repository)")
    with open(SUITE / "cases.tsv", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def case_ids() -> list[str]:
    """Case names for pytest ids (empty if the suite is missing: load_cases fails then)."""
    path = SUITE / "cases.tsv"
    if not path.is_file():
        return ["missing-suite"]
    return [row["case"] for row in load_cases()]


@pytest.mark.parametrize("name", case_ids())
def test_conformance_case(name, tmp_path):
    case = next(c for c in load_cases() if c["case"] == name)
    out = tmp_path / "out.bed"
    ref = [] if case["reference"] == "-" else ["--ref", SUITE / case["reference"]]
    options = shlex.split(case["modkit_pileup_options"] or "")
    # the options name files relative to the suite's folder
    result = run_pileup(SUITE / case["input"], out, *ref, *options, cwd=SUITE)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == (SUITE / case["expected"]).read_bytes()


def test_reader_reads_both_delimiters():
    tabs = list(read_bedmethyl(SUITE / "expected" / "modbam.modpileup_nofilt.methyl.bed"))
    header = list(read_bedmethyl(SUITE / "expected" / "pileup_with_header.bed"))
    assert tabs and tabs == header
    mixed = list(read_bedmethyl(SUITE / "expected" / "bc_anchored_10_reads_edge_filter50.bed"))
    assert mixed[0].valid_cov == mixed[0].n_mod + mixed[0].n_canonical + mixed[0].n_other_mod


# ---------------------------------------------------------------- threads and regions


def test_two_threads_same_bytes(tmp_path):
    one, two = tmp_path / "one.bed", tmp_path / "two.bed"
    run_pileup(ALL_CONTEXT, one, "-i", "500", "--threads", "1", check=True)
    run_pileup(ALL_CONTEXT, two, "-i", "500", "--threads", "2", check=True)
    assert one.read_bytes() == two.read_bytes() and one.stat().st_size > 0


@pytest.mark.parametrize(
    "bam, options",
    [
        (ALL_CONTEXT, engine.Options(compat="0.4", interval_size=700)),
        (BC_BAM, engine.Options(compat="0.4", reference=str(REFERENCE), cpg=True,
                                combine_strands=True,
                                interval_size=25, no_filtering=True)),
    ],
    ids=["estimated-threshold", "cpg-combined"],
)  # fmt: skip
def test_region_split_concatenates_to_whole(bam, options):
    import io

    whole = io.StringIO()
    engine.pileup(str(bam), whole, options)
    regions = engine.scatter_regions(str(bam), 7)
    assert len(regions) > 1
    parts = []
    for region in regions:
        part = io.StringIO()
        engine.pileup(str(bam), part, options, regions=[region])
        parts.append(part.getvalue())
    assert "".join(parts) == whole.getvalue() and whole.getvalue()


# ---------------------------------------------------------------- the read listing

# With the 0.6.1 suite's haplotagged BAM (HP 1 and 2 on some reads): the listing's HP column.
HAPLOTAGGED = SUITE.parent / "modkit061_pileup/inputs/bc_anchored_10_reads.hp.sorted.bam"
ALIGNED_INPUTS = [*sorted(p.with_suffix("") for p in INPUTS.glob("*.bam.bai")), HAPLOTAGGED]


def samtools_primary_alignments(bam: Path) -> list[tuple[str, int, int, int]]:
    """samtools' view of the BAM's mapped primary records (-F 0x904), sorted: read id, MAPQ,
    1 if an ML (or Ml) tag has at least one value, the HP tag's integer (0: none)."""
    text = subprocess.run(["samtools", "view", "-F", "0x904", str(bam)], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    rows = []
    for line in text.splitlines():
        fields = line.split("\t")
        called = any(f.startswith(("ML:B:C,", "Ml:B:C,")) for f in fields[11:])
        haplotype = next((int(f[5:]) for f in fields[11:] if f.startswith("HP:i:")), 0)
        rows.append((fields[0], int(fields[4]), int(called), haplotype))
    return sorted(rows)


def listed(text: str) -> list[tuple[str, int, int, int]]:
    """Rows of a read listing (no header: READ_LISTING_COLUMNS), sorted."""
    rows = [line.split("\t") for line in text.splitlines()]
    return sorted((name, int(mapq), int(called), int(hp)) for name, mapq, called, hp in rows)


@pytest.mark.parametrize("compiled", [False, True], ids=["python", "compiled"])
def test_read_listing_is_samtools_primary_alignments(compiled, monkeypatch):
    """The read listing (what numapore's read accounting reads instead of the BAM) names each
    mapped primary record once, with its MAPQ and whether it carries ML values, as samtools
    view -F 0x904 shows them; over a run, over regions that tile the genome, and without a
    pileup. The suite's BAMs have secondary, supplementary and duplicate records, reads
    without tags, and reads longer than the 25-base intervals (human-sized ones for the one
    aligned to a human genome)."""
    import io

    if compiled:
        assert engine.ENABLED, "numapore.pileup._pileup_core is not built: pip install -e ."
    monkeypatch.setattr(pileup_common, "ENABLED", compiled)
    assert len(ALIGNED_INPUTS) >= 5
    for bam in ALIGNED_INPUTS:
        with pysam.AlignmentFile(bam) as handle:  # one has a human genome's header
            size = 25 if sum(handle.lengths) < 100_000 else engine.DEFAULT_INTERVAL
        options = engine.Options(compat="0.4", interval_size=size, no_filtering=True)
        expected = samtools_primary_alignments(bam)
        assert expected, bam
        whole, listing = io.StringIO(), io.StringIO()
        engine.pileup(str(bam), whole, options, reads_out=listing)
        assert listed(listing.getvalue()) == expected, bam
        shares = io.StringIO()  # a scatter of 3 jobs, each over its shard's regions
        for shard in (1, 2, 3):
            regions = pileup_cli.shard_regions(str(bam), shard, 3)
            engine.pileup(str(bam), io.StringIO(), options, regions=regions, reads_out=shares)
        assert listed(shares.getvalue()) == expected, bam
        without = io.StringIO()
        engine.write_read_listing(str(bam), without)
        assert listed(without.getvalue()) == expected, bam


def test_read_listing_from_the_command_line(tmp_path):
    """--read-listing writes the listing with its header beside the bedMethyl, which stays the
    same bytes; with --region it is refused (a region lists only some reads)."""
    bed, listing = tmp_path / "out.bed", tmp_path / "reads.tsv"
    run_pileup(BC_BAM, bed, "-i", "25", "--no-filtering", "--read-listing", listing, check=True)
    assert (
        bed.read_bytes() == (SUITE / "expected" / "modbam.modpileup_nofilt.methyl.bed").read_bytes()
    )
    header, *rows = listing.read_text().splitlines(keepends=True)
    assert header == engine.READ_LISTING_HEADER
    assert listed("".join(rows)) == samtools_primary_alignments(BC_BAM)
    result = run_pileup(BC_BAM, bed, "--region", "oligo_1512_adapters", "--read-listing", listing)
    assert "a read listing needs whole contigs" in one_error_line(result)


# ---------------------------------------------------------------- bad input


def rewrite_bam(source: Path, dest: Path, change, index: bool = True) -> Path:
    """Copy source to dest with change(record) applied to each record; indexed."""
    with pysam.AlignmentFile(source, "rb") as bam:
        with pysam.AlignmentFile(dest, "wb", template=bam) as out:
            for n, rec in enumerate(bam):
                change(n, rec)
                out.write(rec)
    if index:
        pysam.index(str(dest))
    return dest


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The single stderr line of a failed run (exit code 1, no traceback)."""
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("numapore: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def strip_tags(_n, rec):
    """Remove the modification tags."""
    for tag in ("MM", "ML", "Mm", "Ml"):
        if rec.has_tag(tag):
            rec.set_tag(tag, None)


def test_no_mod_tags(tmp_path):
    bam = rewrite_bam(BC_BAM, tmp_path / "plain.bam", strip_tags)
    out = tmp_path / "out.bed"
    line = one_error_line(run_pileup(bam, out, "--no-filtering"))
    assert str(bam) in line and "no read has MM/ML tags" in line
    assert not out.exists() and not list(tmp_path.glob(".out.bed*"))


def test_old_style_tags_read_as_modkit_does(tmp_path):
    def rename(_n, rec):
        mm, ml = rec.get_tag("MM"), rec.get_tag("ML")
        strip_tags(_n, rec)
        rec.set_tag("Mm", mm, "Z")
        rec.set_tag("Ml", ml)

    bam = rewrite_bam(BC_BAM, tmp_path / "old.bam", rename)
    out = tmp_path / "out.bed"
    run_pileup(bam, out, "-i", "25", "--no-filtering", check=True)
    assert (
        out.read_bytes() == (SUITE / "expected" / "modbam.modpileup_nofilt.methyl.bed").read_bytes()
    )


def drop_mode(_n, rec):
    """MM without the '?'/'.' mode character (old implicit style)."""
    rec.set_tag("MM", rec.get_tag("MM").replace("?", ""), "Z")


def test_tags_without_mode(tmp_path):
    bam = rewrite_bam(BC_BAM, tmp_path / "nomode.bam", drop_mode)
    line = one_error_line(run_pileup(bam, tmp_path / "out.bed", "--no-filtering"))
    assert str(bam) in line and "no mode" in line and "--force-allow-implicit" in line
    run_pileup(bam, tmp_path / "out.bed", "--no-filtering", "--force-allow-implicit", check=True)
    assert (tmp_path / "out.bed").stat().st_size > 0


def test_ml_shorter_than_mm_skips_the_read(tmp_path):
    names = []

    def cut(n, rec):
        if n == 3:
            names.append(rec.query_name)
            rec.set_tag("ML", rec.get_tag("ML")[:-5])

    bam = rewrite_bam(BC_BAM, tmp_path / "cut.bam", cut)
    out = tmp_path / "out.bed"
    result = run_pileup(bam, out, "-i", "25", "--no-filtering", "--quiet")
    assert result.returncode == 0, result.stderr
    line = result.stderr.strip()
    assert line.startswith("numapore: ") and names[0] in line and "ML array too short" in line
    whole = list(read_bedmethyl(SUITE / "expected" / "modbam.modpileup_nofilt.methyl.bed"))
    rows = list(read_bedmethyl(out))
    assert rows and sum(r.valid_cov for r in rows) < sum(r.valid_cov for r in whole)


def test_every_ml_broken(tmp_path):
    def cut(_n, rec):
        rec.set_tag("ML", rec.get_tag("ML")[:-5])

    bam = rewrite_bam(BC_BAM, tmp_path / "cut.bam", cut)
    line = one_error_line(run_pileup(bam, tmp_path / "out.bed", "--no-filtering"))
    assert str(bam) in line and "ML array too short" in line and "read " in line


def test_contig_missing_from_reference(tmp_path):
    ref = tmp_path / "other.fa"
    ref.write_text(">something_else\nACGTACGTCG\n")
    pysam.faidx(str(ref))
    line = one_error_line(run_pileup(BC_BAM, tmp_path / "out.bed", "--ref", ref, "--cpg"))
    assert str(ref) in line and "oligo_1512_adapters" in line and "missing" in line


def test_unindexed_bam(tmp_path):
    bam = rewrite_bam(BC_BAM, tmp_path / "noindex.bam", lambda n, rec: None, index=False)
    line = one_error_line(run_pileup(bam, tmp_path / "out.bed", "--region", "oligo_1512_adapters"))
    assert str(bam) in line and "index" in line


def test_unsorted_bam(tmp_path):
    """Records written in name order, header SO:queryname, no index (it cannot be built)."""
    with pysam.AlignmentFile(BC_BAM, "rb") as bam:
        header = bam.header.to_dict()
        records = sorted(bam, key=lambda r: r.query_name)
    header["HD"] = {"VN": "1.6", "SO": "queryname"}
    path = tmp_path / "byname.bam"
    with pysam.AlignmentFile(path, "wb", header=header) as out:
        for rec in records:
            out.write(rec)
    line = one_error_line(run_pileup(path, tmp_path / "out.bed", "--threads", "2"))
    assert str(path) in line and "not coordinate-sorted" in line


def test_unaligned_bam(tmp_path):
    bam = INPUTS / "bc_anchored_10_reads.unmapped.bam"
    line = one_error_line(run_pileup(bam, tmp_path / "out.bed"))
    assert str(bam) in line


def test_stdout_and_summary(tmp_path):
    result = run_pileup(BC_BAM, "-", "-i", "25", "--no-filtering", check=True)
    assert result.stdout == (SUITE / "expected" / "modbam.modpileup_nofilt.methyl.bed").read_text()
    assert result.stderr.startswith("numapore pileup: 10 read(s) used")


@pytest.mark.parametrize("compiled", [False, True], ids=["python", "compiled"])
def test_both_paths_every_case(compiled, monkeypatch):
    """The numpy path and the compiled core (when built) write the same bytes on every case."""
    import argparse
    import io

    if compiled:  # the install builds it on this machine: a run without it is a failure
        assert engine.ENABLED, "numapore.pileup._pileup_core is not built: pip install -e ."
    monkeypatch.setattr(pileup_common, "ENABLED", compiled)
    monkeypatch.chdir(SUITE)
    parser = argparse.ArgumentParser()
    pileup_cli.add_arguments(parser)
    for case in load_cases():
        ref = [] if case["reference"] == "-" else ["--ref", case["reference"]]
        argv = [case["input"], "-", *ref, *shlex.split(case["modkit_pileup_options"] or "")]
        options = pileup_cli.options_from_args(parser.parse_args(argv + ["--modkit-compat", "0.4"]))
        out = io.StringIO()
        engine.pileup(case["input"], out, options)
        assert out.getvalue() == (SUITE / case["expected"]).read_text(), case["case"]


def odd_variants(rec: pysam.AlignedSegment, type_a: bool) -> list[pysam.AlignedSegment]:
    """Copies of a record (renamed) with each kind of tag or flag a pileup reads differently:
    MN wrong or not an integer, ML signed or text or missing or short, MM missing (or of type A
    with type_a), old-style Mm/Ml, HP of several types, duplicate, secondary, supplementary,
    unmapped, MAPQ 0."""
    import array

    def variant(suffix, change):
        copy = pysam.AlignedSegment.fromstring(rec.to_string(), rec.header)
        copy.query_name = rec.query_name + suffix
        change(copy)
        return copy

    mm = rec.get_tag("MM") if rec.has_tag("MM") else None
    ml = list(rec.get_tag("ML")) if rec.has_tag("ML") else []

    def retag(r, **tags):
        r.set_tags([(k, v) for k, v in r.get_tags() if k not in ("MM", "ML")])
        for tag, (value, kind) in tags.items():
            r.set_tag(tag, value, kind)

    changes = {
        "_mn": lambda r: r.set_tag("MN", r.query_length + 3, "i"),
        "_mnz": lambda r: r.set_tag("MN", "x", "Z"),
        "_mlc": lambda r: retag(r, MM=(mm, "Z"), ML=(array.array("b", [v // 2 for v in ml]), None)),
        "_mlz": lambda r: retag(r, MM=(mm, "Z"), ML=("12", "Z")),
        "_mma": lambda r: retag(r, MM=("C", "A"), ML=(array.array("B", ml), None)),
        "_noml": lambda r: retag(r, MM=(mm, "Z")),
        "_nomm": lambda r: retag(r, ML=(array.array("B", ml), None)),
        "_old": lambda r: retag(r, Mm=(mm, "Z"), Ml=(array.array("B", ml), None)),
        "_mlshort": lambda r: retag(
            r, MM=(mm, "Z"), ML=(array.array("B", ml[: len(ml) // 2]), None)
        ),
        "_hp1": lambda r: r.set_tag("HP", 1, "C"),
        "_hp2": lambda r: r.set_tag("HP", 2, "i"),
        "_hpz": lambda r: r.set_tag("HP", "1", "Z"),
        "_dup": lambda r: setattr(r, "flag", r.flag | 0x400),
        "_sec": lambda r: setattr(r, "flag", r.flag | 0x100),
        "_sup": lambda r: setattr(r, "flag", r.flag | 0x800),
        "_unm": lambda r: setattr(r, "flag", r.flag | 0x4),
        "_mq0": lambda r: setattr(r, "mapping_quality", 0),
    }
    if not type_a:
        del changes["_mma"]
    if mm is None:
        return []
    return [variant(suffix, change) for suffix, change in changes.items()]


def test_bam_reader_is_pysams(tmp_path, monkeypatch):
    """The compiled core's BAM reader (bam_core.c) and the pysam loops it replaces (pileup and
    threshold sample) give the same bedMethyl bytes, counts, skip examples and read listing, on
    records with every kind of odd tag or flag, at both semantics, with a haplotype, estimated
    thresholds, and a read name seen twice in an interval or an MM tag of type A (those
    intervals left to the pysam loops)."""
    import io

    from numapore.pileup import reader as pileup_reader

    assert engine.ENABLED, "numapore.pileup._pileup_core is not built: pip install -e ."
    bams = []
    for type_a in (False, True):
        odd = tmp_path / f"odd{int(type_a)}.bam"
        with pysam.AlignmentFile(BC_BAM, "rb") as bam:
            with pysam.AlignmentFile(odd, "wb", template=bam) as out:
                for n, rec in enumerate(bam):
                    out.write(rec)
                    for copy in odd_variants(rec, type_a):
                        out.write(copy)
                    if n == 3:  # the same name twice
                        out.write(rec)
        pysam.index(str(odd))
        assert pileup_reader.BamReader.open(str(odd)) is not None
        bams.append(odd)
    runs = []
    for c_reader in (True, False):
        if not c_reader:
            monkeypatch.setattr(pileup_reader.BamReader, "open", classmethod(lambda cls, p: None))
        results = []
        for bam, options in (
            (bams[0], engine.Options(interval_size=25, no_filtering=True)),
            (bams[0], engine.Options(compat="0.4", interval_size=25, filter_threshold=["0.7"])),
            (bams[0], engine.Options(interval_size=25, no_filtering=True, haplotype=1)),
            (bams[0], engine.Options(interval_size=40, no_filtering=True, haplotype=2)),
            (bams[0], engine.Options(interval_size=25)),  # thresholds estimated from every read
            (bams[0], engine.Options(compat="0.4", num_reads=7, include_unmapped=True)),
            (bams[1], engine.Options(interval_size=25)),
        ):
            out, listing = io.StringIO(), io.StringIO()
            result = engine.pileup(str(bam), out, options, reads_out=listing)
            stats = result.stats
            results.append((out.getvalue(), listing.getvalue(), stats.used, stats.skipped,
                            stats.examples, stats.rows, result.caller))  # fmt: skip
        runs.append(results)
    assert runs[0] == runs[1]
    whole = runs[0][0]
    assert {"mn", "ml", "missing", "ml_short"} <= set(whole[3]), whole[3]
    assert whole[0] and whole[1].count("\n") > 100
