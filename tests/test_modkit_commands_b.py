"""numapore's entropy, pileup-hemi, extract-calls and localize against modkit 0.6.1: every case
of ../shared/data/modkit061_more/cases.tsv for these commands, run in process through each
command's main(argv) with the case's options, writes modkit's file byte for byte, except where
0.6.1 contradicts its own documentation (the suite README's items): there the test shows the
difference from 0.6.1's file is exactly the one described. Then the mistakes users make with
each option."""

from __future__ import annotations

import itertools
import shlex
from pathlib import Path

import pysam
import pytest
from modkit_more_suite import SUITE, suite_case_names, suite_cases

from numapore import cli
from numapore.modbam import entropy, extract, hemi, localize
from numapore.modbam import positions
from numapore.modbam.positions import read_features, read_sizes

MINE = ("entropy", "pileup-hemi", "extract calls", "localize")
MAIN = {
    "extract calls": extract.main,
    "localize": localize.main,
    "pileup-hemi": hemi.main,
    "entropy": entropy.main,
}
# cases whose expected file holds 0.6.1 behaviour against its docs (README item): not copied
DOCUMENTED = {
    "localize_window30": "11",
    "localize_min_coverage_ignored": "10, 11",
    "localize_stranded_opposite_features_both": "11",
    "localize_stranded_opposite": "11, 12",
    "entropy_regions": "8",
}


def load_cases() -> dict[str, dict[str, str]]:
    """The suite's cases of this module's commands, by name."""
    return suite_cases(MINE)


def case_names() -> list[str]:
    return suite_case_names(MINE)


def argv_of(case: dict[str, str], out: Path) -> list[str]:
    """numapore's command line of a case (the README's templates, modkit's options)."""
    options = shlex.split(case["options"])
    threads = ["-t", case["threads"]]
    ref = case["reference"]
    command = case["command"]
    if command == "entropy":
        return ["--in-bam", case["input"], "--ref", ref, "-o", str(out), *options, *threads]
    if command == "pileup-hemi":
        return [case["input"], "--ref", ref, "-o", str(out), *options, *threads]
    if command == "extract calls":
        reference = [] if ref == "-" else ["--reference", ref]
        return [case["input"], str(out), *reference, *options, *threads]
    return [case["input"], "-o", str(out), *options, *threads]


def run_case(case, out: Path, monkeypatch, capsys) -> int:
    """Run a case in the suite's folder (its paths are relative to it)."""
    monkeypatch.chdir(SUITE)
    return MAIN[case["command"]](argv_of(case, out))


@pytest.mark.parametrize("name", case_names())
def test_case(name, tmp_path, monkeypatch, capsys):
    """Each case: modkit's bytes, or (DOCUMENTED) the documented meaning, tested below."""
    case = load_cases()[name]
    if case["command"] not in MAIN:
        pytest.skip(f"{case['command']}: not yet offered")
    out = tmp_path / Path(case["expected"].rstrip("/")).name
    assert run_case(case, out, monkeypatch, capsys) == 0, capsys.readouterr().err
    expected = SUITE / case["expected"]
    if name in DOCUMENTED:  # the differences: the tests below
        return
    assert out.read_bytes() == expected.read_bytes()


# --- localize: 0.6.1's numbers (a Python-only setting) and the documented meaning


def localize_settings(case) -> tuple[list, dict, localize.Settings]:
    """A localize case's features, sizes and settings."""
    args = localize.make_parser("t").parse_args([case["input"], *shlex.split(case["options"])])
    settings = localize.Settings(args.window, args.stranded, args.stranded_features,
                                 args.min_coverage)  # fmt: skip
    return read_features(args.regions), read_sizes(args.genome_sizes), settings


@pytest.mark.parametrize("name", [n for n in DOCUMENTED if n.startswith("localize")])
def test_localize_modkit061_numbers(name, monkeypatch):
    """With 0.6.1's offsets, window and filters, numapore writes 0.6.1's bytes: the reading
    of 0.6.1 the documented meaning departs from is right."""
    monkeypatch.chdir(SUITE)
    case = load_cases()[name]
    features, sizes, settings = localize_settings(case)
    settings.modkit061 = True
    text = localize.localize(case["input"], features, sizes, settings)
    assert text == (SUITE / case["expected"]).read_text()


def table(text: str) -> dict:
    """A localize table as {(code, offset): (n_valid, n_mod)}."""
    rows = [line.split("\t") for line in text.splitlines()[1:]]
    return {(r[0], int(r[1])): (int(r[2]), int(r[3])) for r in rows}


def test_localize_offsets_are_documented(monkeypatch):
    """README item 11: each record's 0.6.1 offset o (anchor - position, the anchor the middle
    of the clipped window [mid-w-1, min(mid+w, length))) becomes position - midpoint, the
    window midpoint +-w: 0.6.1's table per feature (window w+1, to hold the new window),
    re-mapped, equals numapore's (--min-coverage 0: 0.6.1 ignores it)."""
    monkeypatch.chdir(SUITE)
    case = load_cases()["localize_window30"]
    features, sizes, settings = localize_settings(case)
    w = settings.window
    wanted: dict = {}
    for feature in features:
        wide = localize.Settings(window=w + 1, modkit061=True)
        length = sizes[feature.chrom]
        anchor = localize.window_of(feature, localize.Settings(window=w + 1, modkit061=True),
                                    length)[2]  # fmt: skip
        for (code, o), (valid, mod) in table(
            localize.localize(case["input"], [feature], sizes, wide)
        ).items():
            d = anchor - o - feature.midpoint
            if -w <= d <= w:
                cell = wanted.setdefault((code, d), [0, 0])
                cell[0] += valid
                cell[1] += mod
    settings.min_coverage = 0
    got = table(localize.localize(case["input"], features, sizes, settings))
    assert got == {k: tuple(v) for k, v in wanted.items()}
    assert got != table((SUITE / case["expected"]).read_text())


def test_localize_min_coverage_applies(tmp_path, monkeypatch):
    """README item 10: --min-coverage N gives the table of the bedMethyl without its
    records under N (0.6.1 ignores the option)."""
    monkeypatch.chdir(SUITE)
    case = load_cases()["localize_min_coverage_ignored"]
    features, sizes, settings = localize_settings(case)
    settings.min_coverage = 3
    plain = tmp_path / "kept.bed"
    with pysam.TabixFile(case["input"]) as tabix:
        lines = [ln for c in tabix.contigs for ln in tabix.fetch(c) if int(ln.split()[4]) >= 3]
    plain.write_text("".join(line + "\n" for line in lines))
    kept = pysam.tabix_index(str(plain), preset="bed", force=True)
    filtered = localize.localize(case["input"], features, sizes, settings)
    settings.min_coverage = 0
    assert filtered == localize.localize(kept, features, sizes, settings)
    settings.min_coverage = 100
    assert localize.localize(case["input"], features, sizes, settings) == localize.HEADER


def test_localize_stranded_opposite_alone(monkeypatch):
    """README item 12: --stranded opposite alone keeps the opposite strand's records (0.6.1:
    none), as with --stranded-features both."""
    monkeypatch.chdir(SUITE)
    case = load_cases()["localize_stranded_opposite"]
    features, sizes, settings = localize_settings(case)
    alone = localize.localize(case["input"], features, sizes, settings)
    settings.stranded_features = "both"
    assert alone == localize.localize(case["input"], features, sizes, settings)
    assert alone != localize.HEADER


# --- the commands on numapore's command line, and users' mistakes


def test_subcommands_listed():
    """The commands are numapore subcommands."""
    for name in ("entropy", "pileup-hemi", "extract-calls", "localize"):
        assert name in cli.SUBCOMMANDS


def one_error(capsys) -> str:
    """The one stderr line of a refused run."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("numapore: "), err
    return err


LOC = ["inputs/cpg_bc.bed.gz", "--regions", "inputs/loc_sites.bed", "--genome-sizes",
       "../modkit_pileup/inputs/CGI_ladder_3.6kb_ref.fa.fai"]  # fmt: skip
EXT = ["../modkit061_pileup/inputs/bc_anchored_10_reads.hp.sorted.bam"]


REF_FA = "../modkit_pileup/inputs/CGI_ladder_3.6kb_ref.fa"
LOCALIZE_MISTAKES = [
    (LOC + ["--windw", "3"], 2, "unrecognized"),
    (LOC + ["-w", "x"], 2, "invalid"),
    (LOC + ["-w", "-3"], 2, "invalid"),
    (LOC + ["--min-coverage", "1.5"], 2, "invalid"),
    (LOC + ["--stranded", "both"], 2, "invalid choice"),
    (LOC + ["--stranded-features", "plus"], 2, "invalid choice"),
    (LOC + ["--chart", "x.html"], 2, "--chart"),
    (["missing.bed.gz"] + LOC[1:], 1, "no such file"),
    (["inputs/cpg_bc.bed"] + LOC[1:], 1, "tabix"),
    (LOC[:1] + ["--regions", "missing.bed"] + LOC[3:], 1, "no such file"),
    (LOC[:1] + ["--regions", "inputs/cpg_bc.bed.gz"] + LOC[3:], 1, "not text"),
    (
        LOC[:3] + ["--genome-sizes", "../modkit_pileup/inputs/CGI_ladder_3.6kb_ref.fa"],
        1,
        "not `chrom",
    ),
    (LOC[:3] + ["--genome-sizes", "inputs"], 1, "folder"),
]  # (argv, exit code, words of the message)


def test_localize_empty_files(tmp_path, monkeypatch, capsys):
    """Empty regions and sizes files are refused."""
    monkeypatch.chdir(SUITE)
    empty = tmp_path / "empty"
    empty.write_text("")
    assert localize.main(LOC[:1] + ["--regions", str(empty)] + LOC[3:]) == 1
    assert "no BED records" in one_error(capsys)
    assert localize.main(LOC[:3] + ["--genome-sizes", str(empty)]) == 1
    assert "empty sizes" in one_error(capsys)


def test_outputs_not_overwritten(tmp_path, monkeypatch, capsys):
    """An existing output is kept without --force where modkit keeps it (localize,
    extract-calls), replaced with it."""
    monkeypatch.chdir(SUITE)
    out = tmp_path / "out.tsv"
    out.write_text("keep")
    assert localize.main(LOC + ["-o", str(out)]) == 1
    assert "--force" in one_error(capsys)
    assert extract.main(EXT + [str(out), "--filter-threshold", "0.7"]) == 1
    assert "--force" in one_error(capsys)
    assert out.read_text() == "keep"
    assert extract.main(EXT + [str(out), "--filter-threshold", "0.7", "--force"]) == 0
    # entropy and pileup-hemi overwrite without --force, as 0.6.1 does
    argv = ["--in-bam", "../modkit_pileup/inputs/bc_anchored_10_reads.sorted.bam", "--ref",
            "../modkit_pileup/inputs/CGI_ladder_3.6kb_ref.fa", "--cpg", "--filter-threshold",
            "0.7", "-o", str(out)]  # fmt: skip
    assert entropy.main(argv) == 0
    assert out.read_text().startswith("oligo_1512_adapters\t")


EXTRACT_MISTAKES = [
    (["--filter-threshold", "x"], 1, "failed to parse"),
    (["--filter-threshold", "Z:0.5"], 1, "per-base"),
    (["--kmer-size", "0"], 1, "--kmer-size"),
    (["--kmer-size", "five"], 2, "invalid"),
    (["--cpg"], 1, "--reference"),
    (["--no-filtering", "--pass-only"], 1, "conflicts"),
    (
        [
            "--motif",
            "CG",
            "x",
            "--reference",
            "../modkit_pileup/inputs/CGI_ladder_3.6kb_ref.fa",
        ],
        1,
        "offset",
    ),
    (["--reference", "missing.fa"], 1, "no such file"),
    (
        [
            "--motif",
            "CWGG",
            "1",
            "--reference",
            "../modkit_pileup/inputs/CGI_ladder_3.6kb_ref.fa",
        ],
        1,
        "A, C, G or T",
    ),
    (["--reference", "inputs/loc_sites.bed"], 1, "FASTA"),
    (["--region", "nope:1-5", "--filter-threshold", "0.7"], 1, "--region"),
    (["--bgzf"], 2, "--bgzf"),
    (["--edge-filter", "5"], 2, "--edge-filter"),
    (["--pass-onyl"], 2, "unrecognized"),
]  # (options after IN.bam OUT, exit code, words)


def test_extract_bad_bam(tmp_path, monkeypatch, capsys):
    """A missing, empty or non-BAM input is one line."""
    monkeypatch.chdir(SUITE)
    empty = tmp_path / "empty.bam"
    empty.write_bytes(b"")
    for bam, words in (("missing.bam", "no such file"), (str(empty), "cannot read"),
                       ("inputs/loc_sites.bed", "cannot read")):  # fmt: skip
        assert extract.main([bam, str(tmp_path / "o.tsv"), "--filter-threshold", "0.7"]) == 1
        assert words in one_error(capsys)


REF = "../modkit_pileup/inputs/CGI_ladder_3.6kb_ref.fa"
DUPLEX = "inputs/bc_anchored_10_reads.synthetic_duplex.bam"
HEMI = [DUPLEX, "--ref", REF, "--cpg", "--filter-threshold", "0.7"]


def test_hemi_contig_missing_from_fasta(tmp_path, monkeypatch, capsys):
    """README item 9: a BAM header naming contigs the FASTA lacks (none of its reads map
    there) finishes (0.6.1 logs an error over and over and never finishes): simplex reads,
    no rows; a contig with reads that the FASTA lacks is refused in one line."""
    monkeypatch.chdir(SUITE)
    bam = ("../modkit_pileup/inputs/CG_5mC_20230207_1700_6A_PAG66026_3c0abf27_oligo_741_"
           "adapters_modcalls_0th_sort_10_reads.bam")  # fmt: skip
    out = tmp_path / "o.bed"
    assert hemi.main([bam, "--ref", REF, "--cpg", "--filter-threshold", "0.7", "-o", str(out)]) == 0
    assert out.read_text() == ""
    other = "../modkit061_pileup/inputs/5mers_rand_ref_adapter_10.consensus.fa"
    assert hemi.main([bam, "--ref", other, "--cpg", "--filter-threshold", "0.7"]) == 1
    assert "no contig oligo_741_adapters (reads map to it)" in one_error(capsys)


def test_hemi_threads_and_stdout(monkeypatch, capsys):
    """Any -t gives the same rows (spans of 40 bases on forked workers); no -o writes them
    to stdout."""
    monkeypatch.chdir(SUITE)
    monkeypatch.setattr(positions, "SPAN", 40)
    expected = (SUITE / "expected" / "hemi_synthetic_duplex_cpg.bed").read_text()
    for threads in ("1", "3"):
        assert hemi.main(HEMI + ["-t", threads]) == 0
        assert capsys.readouterr().out == expected


HEMI_MISTAKES = [
    (HEMI[:3] + ["--filter-threshold", "0.7"], 1, "--cpg and --motif"),
    (HEMI + ["--motif", "CG", "0"], 1, "--cpg and --motif"),
    (HEMI[:3] + ["--motif", "CA", "0"], 1, "palindromic"),
    (HEMI[:3] + ["--motif", "CG", "first"], 1, "offset"),
    (HEMI[:3] + ["--motif", "CG", "5"], 1, "offset"),
    (HEMI[:3] + ["--motif", "CZ", "0"], 1, "IUPAC"),
    ([DUPLEX, "--cpg"], 2, "required"),
    ([DUPLEX, "--ref", "missing.fa", "--cpg"], 1, "no such file"),
    ([DUPLEX, "--ref", "inputs/loc_sites.bed", "--cpg"], 1, "FASTA"),
    (["missing.bam"] + HEMI[1:], 1, "no such file"),
    (["inputs/cpg_bc.bed"] + HEMI[1:], 1, "cannot read as BAM"),
    (HEMI + ["--region", "nope"], 1, "--region"),
    (HEMI + ["--filter-threshold", "0.5"], 1, "more than once"),
    (HEMI + ["-n", "many"], 2, "invalid"),
    (HEMI + ["--max-depth", "10"], 2, "--max-depth"),
    (HEMI + ["--combine-mods"], 2, "--combine-mods"),
    (HEMI + ["--cgp"], 2, "unrecognized"),
]  # (argv, exit code, words of the message)


def test_hemi_unindexed_bam(tmp_path, monkeypatch, capsys):
    """An unindexed BAM is refused (pileup-hemi reads by region)."""
    monkeypatch.chdir(SUITE)
    bam = tmp_path / "copy.bam"
    bam.write_bytes((SUITE / DUPLEX).read_bytes())
    assert hemi.main([str(bam)] + HEMI[1:]) == 1
    assert "no BAM index" in one_error(capsys)


# --- entropy: the regions' documented median and one-window rows (README item 8)

CG10 = ("../modkit_pileup/inputs/CG_5mC_20230207_1700_6A_PAG66026_3c0abf27_oligo_741_"
        "adapters_modcalls_0th_sort_10_reads.bam")  # fmt: skip


def close_lines(got: str, want: str) -> None:
    """Equal tables but for f32 values within 1e-6 (0.6.1 sums entropies in hash order, so
    its last digit changes between runs: the case is `deterministic = no`)."""
    got_rows = [line.split("\t") for line in got.splitlines()]
    want_rows = [line.split("\t") for line in want.splitlines()]
    assert len(got_rows) == len(want_rows), (got, want)
    for a, b in zip(got_rows, want_rows, strict=True):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            if x != y:
                assert abs(float(x) - float(y)) <= 1e-6, (a, b)


def run_regions(tmp_path, monkeypatch, modkit061: bool) -> Path:
    """The entropy_regions case into a folder (modkit061: 0.6.1's median and rows)."""
    monkeypatch.chdir(SUITE)
    case = load_cases()["entropy_regions"]
    out = tmp_path / "regions"
    if modkit061:
        documented = entropy.median
        monkeypatch.setattr(entropy, "median", lambda values, modkit061: documented(values, True))
    assert entropy.main(argv_of(case, out)) == 0
    return out


def test_entropy_regions_modkit061_rows(tmp_path, monkeypatch):
    """With 0.6.1's median (unsorted) and no row for a one-window region, numapore writes
    0.6.1's two files (entropies within its run-to-run last digit)."""
    out = run_regions(tmp_path, monkeypatch, modkit061=True)
    want = SUITE / "expected" / "entropy_regions"
    for name in ("windows.bedgraph", "regions.bed"):
        close_lines((out / name).read_text(), (want / name).read_text())


def test_entropy_regions_documented(tmp_path, monkeypatch):
    """README item 8: the whole_contig median is the median of its 4 windows (0.40604740,
    not 0.6.1's 0.51566696 of them unsorted) and one_window gets a row of its one window;
    every other cell is 0.6.1's."""
    out = run_regions(tmp_path, monkeypatch, modkit061=False)
    want = SUITE / "expected" / "entropy_regions"
    windows = (want / "windows.bedgraph").read_text().splitlines()
    close_lines((out / "windows.bedgraph").read_text(), "\n".join(windows))
    whole, one = (line.split("\t") for line in (out / "regions.bed").read_text().splitlines())
    expected = (want / "regions.bed").read_text().rstrip("\n").split("\t")
    entropies = sorted(float(w.split("\t")[3]) for w in windows[:4])
    assert float(expected[6]) == pytest.approx(0.51566696, abs=1e-7)
    assert float(whole[6]) == pytest.approx((entropies[1] + entropies[2]) / 2, abs=1e-6)
    assert whole[:6] + whole[7:] == expected[:6] + expected[7:]
    last = windows[4].split("\t")
    assert one[3] == "one_window" and one[5] == "+"
    assert one[4] == one[6] == one[7] == one[8] == last[3]
    assert one[9:] == [last[5], last[5], last[5], "1", "0"]


def test_entropy_no_filtering_keeps_every_call(tmp_path, monkeypatch):
    """README item 6: --no-filtering is --filter-threshold 0 (0.6.1 estimates a threshold
    and applies it anyway, giving the default's output)."""
    monkeypatch.chdir(SUITE)
    outputs = {}
    for label, extra in (("none", ["--no-filtering"]), ("zero", ["--filter-threshold", "0"]),
                         ("estimated", [])):  # fmt: skip
        out = tmp_path / f"{label}.bedgraph"
        assert entropy.main(["--in-bam", CG10, "--ref", REF, "--cpg", "-o", str(out), *extra]) == 0
        outputs[label] = out.read_text()
    assert outputs["none"] == outputs["zero"] != outputs["estimated"]


ENT = ["--in-bam", CG10, "--ref", "../modkit_pileup/inputs/CGI_ladder_3.6kb_ref.fa",
       "--filter-threshold", "0.7"]  # fmt: skip


ENTROPY_MISTAKES = [
    (["--cpg", "-n", "0"], 2, "invalid"),
    (["--cpg", "-w", "wide"], 2, "invalid"),
    (["--cpg", "--min-coverage", "0"], 2, "invalid"),
    (["--cpg", "--max-filtered-positions", "-1"], 2, "invalid"),
    (["--cpg", "--filter-threshold", "high"], 2, "invalid"),
    ([], 1, "--cpg, --motif"),
    (["--cpg", "--combine-strands"], 1, "--cpg"),
    (["--cpg", "--base", "C"], 1, "--cpg"),
    (["--base", "C", "--combine-strands"], 1, "single base"),
    (["--base", "Z"], 1, "--base Z"),
    (["--motif", "CA", "0", "--combine-strands"], 1, "palindromic"),
    (["--motif", "CG", "x"], 1, "offset"),
    (["--cpg", "--regions", "inputs/regions_entropy.bed"], 1, "needs -o"),
    (["--cpg", "--prefix", "p"], 1, "--prefix"),
    (["--cpg", "--regions", "missing.bed", "-o", "x"], 1, "no such file"),
    (["--cpg", "--regions", "inputs/cpg_bc.bed.gz", "-o", "x"], 1, "not text"),
    (["--cpg", "--mod-threshold", "h"], 1, "per-mod"),
    (["--cgp"], 2, "unrecognized"),
]  # (options after the inputs, exit code, words)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--in-bam", "missing.bam", "--ref", REF, "--cpg"], "no such file"),
        (["--in-bam", "inputs/cpg_bc.bed", "--ref", REF, "--cpg"], "cannot read as BAM"),
        (["--in-bam", CG10, "--ref", "inputs/loc_sites.bed", "--cpg"], "FASTA"),
        (["--in-bam", CG10, "--ref", "missing.fa", "--cpg"], "no such file"),
    ],
)
def test_entropy_bad_inputs(argv, words, monkeypatch, capsys):
    """Missing or wrong input files are one line."""
    monkeypatch.chdir(SUITE)
    assert entropy.main(argv + ["--filter-threshold", "0.7"]) == 1
    assert words in one_error(capsys)


def test_entropy_regions_empty_and_file_output(tmp_path, monkeypatch, capsys):
    """An empty regions BED, and -o a file with --regions, are refused."""
    monkeypatch.chdir(SUITE)
    empty = tmp_path / "empty.bed"
    empty.write_text("")
    assert entropy.main(ENT + ["--cpg", "--regions", str(empty), "-o", str(tmp_path / "d")]) == 1
    assert "no valid regions" in one_error(capsys)
    assert entropy.main(ENT + ["--cpg", "--regions", "inputs/regions_entropy.bed", "-o",
                               str(empty)]) == 1  # fmt: skip
    assert "a file" in one_error(capsys)


MISTAKES = (
    [("localize", argv, code, words) for argv, code, words in LOCALIZE_MISTAKES]
    + [("extract-calls", EXT + ["OUT", *extra], code, words)
       for extra, code, words in EXTRACT_MISTAKES]
    + [("pileup-hemi", argv, code, words) for argv, code, words in HEMI_MISTAKES]
    + [("entropy", ENT + extra, code, words) for extra, code, words in ENTROPY_MISTAKES]
)  # fmt: skip
MAINS = {"localize": localize.main, "extract-calls": extract.main, "pileup-hemi": hemi.main,
         "entropy": entropy.main}  # fmt: skip


@pytest.mark.parametrize("command, argv, code, words", MISTAKES)
def test_option_mistakes(command, argv, code, words, tmp_path, monkeypatch, capsys):
    """Each command's option mistakes (a typo, a wrong type or value, a missing or wrong
    file, an option modkit has and numapore does not offer): one `numapore:` line naming the
    problem, exit code 2 for the command line, 1 for the input."""
    monkeypatch.chdir(SUITE)
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert MAINS[command](argv) == code
    assert words in one_error(capsys)
    assert not (tmp_path / "out").exists()  # a failed run leaves no output


@pytest.mark.parametrize("name", ["extract_calls_hp", "extract_calls_cpg_ref"])
def test_extract_threads(name, tmp_path, monkeypatch, capsys):
    """The same bytes on forked workers (-t 3, spans of 40 bases: reads in the span where
    they start, BAM order kept)."""
    monkeypatch.setattr(positions, "SPAN", 40)
    case = load_cases()[name]
    out = tmp_path / "calls.tsv"
    argv = argv_of(case, out)
    argv[argv.index("-t") + 1] = "3"
    assert run_case_argv(extract.main, argv, monkeypatch) == 0
    assert out.read_bytes() == (SUITE / case["expected"]).read_bytes()


def run_case_argv(main, argv, monkeypatch) -> int:
    """main(argv) in the suite's folder."""
    monkeypatch.chdir(SUITE)
    return main(argv)


@pytest.mark.parametrize("name", ["entropy_cpg_header", "entropy_motif_cg_stranded"])
def test_entropy_window_batches(name, tmp_path, monkeypatch, capsys):
    """Windows filled a batch at a time (as with several BAMs; here 2 windows a batch)
    instead of streamed: modkit's bytes still, reads spanning two batches counted once in
    each window."""

    def batches(counter, chrom, windows):
        while batch := list(itertools.islice(windows, 2)):
            counter.fill(chrom, batch)
            yield batch

    monkeypatch.setattr(entropy.Counter, "stream", batches)
    case = load_cases()[name]
    out = tmp_path / "windows.bedgraph"
    assert run_case(case, out, monkeypatch, capsys) == 0
    assert out.read_bytes() == (SUITE / case["expected"]).read_bytes()


@pytest.mark.parametrize("name", [n for n in DOCUMENTED if n.startswith("localize")])
def test_localize_processes(name, monkeypatch):
    """localize over 3 forked processes (a run of features each): the text of one."""
    monkeypatch.setattr(localize, "FEATURES_PER_WORKER", 1)
    case = load_cases()[name]
    monkeypatch.chdir(SUITE)
    features, sizes, settings = localize_settings(case)
    assert len(features) >= 3
    alone = localize.localize(case["input"], features, sizes, settings)
    assert localize.localize(case["input"], features, sizes, settings, threads=3) == alone
