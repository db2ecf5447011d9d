"""numapore's pileup against modkit 0.6.1: every line of the shared 0.6.1 suite
(../shared/data/modkit061_pileup/cases.tsv) run through `numapore pileup` with the same options
writes modkit's file byte for byte (BGZF: the same text), except the cases where 0.6.1
contradicts the SAM MM/ML specification or its own documentation (the suite README's items
A, C, D, E, F): there the test shows that the only difference from modkit's file is the one
described. Item B (an estimated threshold that changes between identical runs) is shown by the
same bytes at every thread count."""

from __future__ import annotations

import collections
import csv
import gzip
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pysam
import pytest
import forked_snakemake
from conftest import REPO, SHARED

from numapore.methylation.bedmethyl import percent_modified

SUITE = SHARED / "data" / "modkit061_pileup"
OLD_SUITE = SHARED / "data" / "modkit_pileup"
ALL_CONTEXT = OLD_SUITE / "inputs" / "testing_all_context_calls.bam"
# The cases whose expected file holds a 0.6.1 behaviour numapore does not copy (README item)
DOCUMENTED = {
    "dorado_6mA_5mC_5hmC_default": "A, E",
    "dorado_6mA_5mC_5hmC_nofilt": "A, E",
    "motif_cgcg2_combine_strands": "C",
    "phased_generic": "D",
    "edge_filter_50_0": "F",
}
# modkit 0.4.4's files of the same options (../modkit_pileup), which follow the spec there
SPEC_FILES = {
    "dorado_6mA_5mC_5hmC_default": "generated_all_context_default.bed",
    "dorado_6mA_5mC_5hmC_nofilt": "generated_all_context_nofilt_2threads.bed",
}


def run_pileup(*args, cwd: Path = SUITE) -> subprocess.CompletedProcess:
    """`numapore pileup` with args, run in cwd (the suite's paths are relative to it)."""
    numapore = Path(sys.executable).parent / "numapore"
    env = dict(os.environ, PYTHONPATH=str(REPO / "scripts"))
    return forked_snakemake.run(
        [str(numapore), "pileup", "-q", *map(str, args)],
        capture_output=True, text=True, env=env, cwd=cwd,
    )  # fmt: skip


def load_cases() -> dict[str, dict[str, str]]:
    """The suite's cases by name."""
    if not (SUITE / "cases.tsv").is_file():
        pytest.fail(f"shared data missing: {SUITE} (tests need ../shared beside the repository)")
    with open(SUITE / "cases.tsv", newline="") as handle:
        return {row["case"]: row for row in csv.DictReader(handle, delimiter="\t")}


def case_names() -> list[str]:
    """Case names for pytest ids."""
    return list(load_cases()) if (SUITE / "cases.tsv").is_file() else ["missing-suite"]


def text_of(path: Path) -> str:
    """A bedMethyl file's text (decompressed when BGZF)."""
    data = path.read_bytes()
    return (gzip.decompress(data) if path.name.endswith(".gz") else data).decode()


def run_case(case: dict[str, str], out: Path, threads: str | None = None, *extra: str):
    """The case's pileup into out with its own options (and threads)."""
    reference = [] if case["reference"] == "-" else ["--ref", case["reference"]]
    options = shlex.split(case["modkit_pileup_options"])
    threads = threads or (case["threads"] if case["threads"] != "-" else "4")
    return run_pileup(case["input"], out, *reference, *options, "--threads", threads, *extra)


def pairs(case: dict[str, str], out: Path) -> list[tuple[Path, Path]]:
    """(modkit's file, numapore's file) of a case: one, or each file of a --phased folder."""
    expected = SUITE / case["expected"]
    if case["expected"].endswith("/"):
        return [(f, out / f.name) for f in sorted(expected.iterdir())]
    return [(expected, out)]


def output_path(case: dict[str, str], tmp_path: Path) -> Path:
    """Where numapore writes the case (a folder for --phased, .bed.gz for --bgzf)."""
    expected = case["expected"]
    if expected.endswith("/"):
        return tmp_path / "phased"
    return tmp_path / ("out.bed.gz" if expected.endswith(".gz") else "out.bed")


@pytest.mark.parametrize("name", case_names())
def test_case(name, tmp_path):
    case = load_cases()[name]
    out = output_path(case, tmp_path)
    result = run_case(case, out)
    if case["expected"] == "-":  # refused by modkit: refused here, with one line
        assert result.returncode == 1 and result.stderr.startswith("numapore: "), result.stderr
        assert len(result.stderr.splitlines()) == 1
        return
    assert result.returncode == 0, result.stderr
    if name in DOCUMENTED:
        CHECKS[name](case, out, tmp_path)
        return
    for expected, ours in pairs(case, out):
        assert text_of(ours) == text_of(expected), expected.name
    if case["expected"].endswith(".gz"):  # BGZF with its index beside it
        assert pysam.TabixFile(str(out)).contigs


# The cases of the compiled core's route (a BAM with a .bai, a FASTA with a .fai): header,
# region, an estimated threshold, a motif with combined strands, --include-bed
COMMON_ROUTE = ["with_header", "region", "default_threshold", "motif_cg0_combine_strands",
                "include_bed_motif_cg"]  # fmt: skip


def test_common_route_imports_neither_numpy_nor_pysam(tmp_path):
    """On the compiled core's route the pileup imports neither numpy nor pysam (two thirds of
    a small pileup's memory): the suite's cases of that route, in one fresh interpreter, write
    modkit's bytes with neither in sys.modules at the end."""
    cases = load_cases()
    script = ["import sys", "from numapore.pileup import cli as pileup_cli"]
    for name in COMMON_ROUTE:
        case = cases[name]
        reference = [] if case["reference"] == "-" else ["--ref", case["reference"]]
        argv = [case["input"], str(tmp_path / f"{name}.bed"), "-q", *reference,
                *shlex.split(case["modkit_pileup_options"])]  # fmt: skip
        script.append(f"assert pileup_cli.main({argv!r}) == 0")
    script.append("print(sorted({'numpy', 'pysam'} & set(sys.modules)))")
    env = dict(os.environ, PYTHONPATH=str(REPO / "scripts"))
    done = subprocess.run([sys.executable, "-c", "\n".join(script)], capture_output=True,
                          text=True, env=env, cwd=SUITE)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"
    for name in COMMON_ROUTE:
        assert (tmp_path / f"{name}.bed").read_text() == (
            SUITE / cases[name]["expected"]
        ).read_text()


# ---------------------------------------------------------------- A and E


def rows_by_key(path: Path) -> dict[tuple, list[str]]:
    """A bedMethyl's rows by (chrom, start, name, strand), as their column lists."""
    out = {}
    for line in text_of(path).splitlines():
        cols = line.split("\t")
        out[(cols[0], int(cols[1]), cols[3], cols[5])] = cols
    return out


def bases_skipped_by_061(bam: Path) -> list[tuple[int, str, str]]:
    """Item A, predicted from the BAM: per primary record, the first aligned base after its last
    MM-listed position (BAM SEQ order): (reference position, strand, base in read strand)."""
    complement = str.maketrans("ACGT", "TGCA")
    skipped = []
    with pysam.AlignmentFile(str(bam)) as handle:
        for rec in handle.fetch():
            if rec.is_secondary or rec.is_supplementary or not rec.modified_bases:
                continue
            last = max(q for calls in rec.modified_bases.values() for q, _ in calls)
            for q, r in rec.get_aligned_pairs(matches_only=True):
                if q > last:
                    base = rec.query_sequence[q]
                    base = base.translate(complement) if rec.is_reverse else base
                    skipped.append((r, "-" if rec.is_reverse else "+", base))
                    break
    return skipped


def check_skipped_base_and_n_diff(case, out: Path, tmp_path: Path) -> None:
    """A and E: modkit 0.6.1's file differs from numapore's only by (A) the implicit canonical
    calls of the bases it skips, restored here from the BAM, and (E) N_diff: numapore's counts
    the reads with a valid call on the other primary base (and A's skipped bases of other
    types). Every other column is equal, N_fail included: a failed call on the other primary
    base is N_diff in both."""
    ours, modkit = rows_by_key(out), rows_by_key(SUITE / case["expected"])
    assert ours.keys() == modkit.keys()
    # dorado's tags, A+a.;C+h.;C+m.: A and C are implicit, G and T carry no calls
    base_of = {"a": "A", "h": "C", "m": "C"}
    lost_calls, lost_no_calls = collections.Counter(), collections.Counter()
    for r, strand, base in bases_skipped_by_061(ALL_CONTEXT):
        if base in "AC":
            lost_calls[(r, strand, base)] += 1
        else:
            lost_no_calls[(r, strand)] += 1
    restored_rows = 0
    for key, theirs in modkit.items():
        _, start, code, strand = key
        lost = lost_calls[(start, strand, base_of[code])]
        restored_rows += lost > 0
        other = "h" if base_of[code] == "A" else "a"
        other_key = (key[0], start, other, strand)
        other_valid = int(ours[other_key][9]) if other_key in ours else 0
        fixed = list(theirs)
        fixed[4] = fixed[9] = str(int(theirs[9]) + lost)
        fixed[12] = str(int(theirs[12]) + lost)
        fixed[10] = percent_modified(int(theirs[11]), int(fixed[9]))
        fixed[16] = str(int(theirs[16]) + other_valid + lost_no_calls[(start, strand)])
        assert fixed == ours[key], (key, theirs, ours[key])
    assert restored_rows == 6  # the rows at 110, 117, 130 and 134 (the README's table)


# ---------------------------------------------------------------- C


def check_minus_strand_at_interval_start(case, out: Path, tmp_path: Path) -> None:
    """C: modkit writes the CGCG,2 minus strand's counts as a row of their own at the interval
    start (the region's, 22); numapore adds them to the + strand position as the help says."""
    region = case["modkit_pileup_options"].split("--region ")[1].split()[0]
    region_start = int(region.split(":")[1].split("-")[0])
    ours, modkit = rows_by_key(out), rows_by_key(SUITE / case["expected"])
    stray = [k for k in modkit if k[1] == region_start]
    assert len(stray) == 1 and stray[0] not in ours
    (key,) = [k for k in modkit if k != stray[0]]
    summed = [int(a) + int(b) for a, b in zip(modkit[key][11:], modkit[stray[0]][11:], strict=True)]
    assert [int(x) for x in ours[key][11:]] == summed
    assert ours.keys() == {key}


# ---------------------------------------------------------------- D


def check_haplotype_files(case, out: Path, tmp_path: Path) -> None:
    """D: combined is modkit's byte for byte; modkit's hp1/hp2 are empty, numapore's are the
    pileups of the HP:i:1 and HP:i:2 records alone (the same options without --phased)."""
    files = dict((e.name, (e, o)) for e, o in pairs(case, out))
    expected, ours = files["combined.bedmethyl"]
    assert ours.read_bytes() == expected.read_bytes()
    options = shlex.split(case["modkit_pileup_options"].replace("--phased", ""))
    for haplotype in (1, 2):
        expected, ours = files[f"hp{haplotype}.bedmethyl"]
        assert expected.stat().st_size == 0
        alone = tmp_path / f"hp{haplotype}.bam"
        with pysam.AlignmentFile(str(SUITE / case["input"])) as bam, pysam.AlignmentFile(
            str(alone), "wb", template=bam
        ) as kept:  # fmt: skip
            for rec in bam.fetch(until_eof=True):
                if rec.has_tag("HP") and rec.get_tag("HP") == haplotype:
                    kept.write(rec)
        pysam.index(str(alone))
        again = tmp_path / f"hp{haplotype}.bed"
        result = run_pileup(alone, again, *options)
        assert result.returncode == 0, result.stderr
        assert ours.read_bytes() == again.read_bytes() and again.stat().st_size > 0


# ---------------------------------------------------------------- F


def check_edge_filter_orientation(case, out: Path, tmp_path: Path) -> None:
    """F: + strand rows are modkit's; modkit's - strand rows are numapore's with the two trims
    swapped (0.6.1 trims reverse reads in BAM orientation, the docs say read orientation)."""
    expected = text_of(SUITE / case["expected"]).splitlines()
    ours = text_of(out).splitlines()

    def strand(lines, s):
        return [x for x in lines if x.split("\t")[5] == s]

    assert strand(ours, "+") == strand(expected, "+") and strand(ours, "+")
    assert strand(ours, "-") != strand(expected, "-")
    swapped = tmp_path / "swapped.bed"
    start, end = case["modkit_pileup_options"].split("--edge-filter ")[1].split()[0].split(",")
    options = case["modkit_pileup_options"].replace(
        f"--edge-filter {start},{end}", f"--edge-filter {end},{start}"
    )
    result = run_case(dict(case, modkit_pileup_options=options), swapped)
    assert result.returncode == 0, result.stderr
    assert strand(text_of(swapped).splitlines(), "-") == strand(expected, "-")


CHECKS = {
    "dorado_6mA_5mC_5hmC_default": check_skipped_base_and_n_diff,
    "dorado_6mA_5mC_5hmC_nofilt": check_skipped_base_and_n_diff,
    "motif_cgcg2_combine_strands": check_minus_strand_at_interval_start,
    "phased_generic": check_haplotype_files,
    "edge_filter_50_0": check_edge_filter_orientation,
}


# ---------------------------------------------------------------- B: the same bytes always


@pytest.mark.parametrize(
    "name", [n for n, c in load_cases().items() if c["deterministic"] == "no"]
    if (SUITE / "cases.tsv").is_file() else ["missing-suite"],
)  # fmt: skip
def test_estimated_threshold_same_bytes_at_any_thread_count(name, tmp_path):
    """B: where modkit 0.6.1's estimate changes between identical runs, numapore writes the
    expected (documented) file at 1 and 2 threads too (test_case runs the case's 4)."""
    case = load_cases()[name]
    expected = (SUITE / case["expected"]).read_bytes()
    for threads in ("1", "2"):
        out = tmp_path / f"t{threads}.bed"
        result = run_case(case, out, threads)
        assert result.returncode == 0, result.stderr
        assert out.read_bytes() == expected, threads


# ---------------------------------------------------------------- the two semantics' options


@pytest.mark.parametrize(
    "option, equivalent",
    [
        (["--preset", "traditional"], "--modified-bases 5mC 5hmC --combine-mods --cpg"),
        (["--ignore", "h"], "--modified-bases"),
        (["--only-tabs"], "tabs only"),
        (["--mixed-delim"], "tabs only"),
        (["--force-allow-implicit"], "0.6 reads implicit tags"),
    ],
    ids=["preset", "ignore", "only-tabs", "mixed-delim", "force-allow-implicit"],
)
def test_04_option_names_its_06_equivalent(option, equivalent, tmp_path):
    bam = OLD_SUITE / "inputs" / "bc_anchored_10_reads.sorted.bam"
    option += ["--ref", OLD_SUITE / "inputs" / "CGI_ladder_3.6kb_ref.fa"]
    result = run_pileup(bam, tmp_path / "out.bed", *option, cwd=tmp_path)
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    line = result.stderr
    assert line.startswith(f"numapore: {option[0]}") and equivalent in line, line
    assert "--modkit-compat 0.4" in line
    again = run_pileup(bam, tmp_path / "out.bed", *option, "--modkit-compat", "0.4", cwd=tmp_path)
    assert again.returncode == 0, again.stderr


def test_06_option_refused_under_the_04_switch(tmp_path):
    bam = OLD_SUITE / "inputs" / "bc_anchored_10_reads.sorted.bam"
    result = run_pileup(bam, tmp_path / "out.bed", "--bgzf", "--modkit-compat", "0.4")
    assert result.returncode == 1 and result.stderr.startswith("numapore: --bgzf is modkit 0.6")


@pytest.mark.parametrize("compiled", [False, True], ids=["python", "compiled"])
def test_both_paths_every_case(compiled, monkeypatch):
    """The numpy path and the compiled core write modkit 0.6.1's bytes on every case with one
    plain output file (test_case checks the documented ones through the command line)."""
    import argparse
    import io

    from numapore.pileup import cli as pileup_cli
    from numapore.pileup import common as pileup_common
    from numapore.pileup import engine as pileup

    monkeypatch.setattr(pileup_common, "ENABLED", compiled)
    monkeypatch.chdir(SUITE)
    parser = argparse.ArgumentParser()
    pileup_cli.add_arguments(parser)
    compared = 0
    for name, case in load_cases().items():
        if not case["expected"].endswith(".bed"):
            continue
        reference = [] if case["reference"] == "-" else ["--ref", case["reference"]]
        argv = [case["input"], "-", *reference, *shlex.split(case["modkit_pileup_options"])]
        out = io.StringIO()
        pileup.pileup(case["input"], out, pileup_cli.options_from_args(parser.parse_args(argv)))
        if name not in DOCUMENTED:
            assert out.getvalue() == (SUITE / case["expected"]).read_text(), name
            compared += 1
    assert compared == 29


# ---------------------------------------------------------------- the workflow's settings

WORKFLOW_SETTINGS = {
    "motif": "cpg", "combine_strands": True, "filter_threshold": 0.7, "filter_percentile": 0.1,
    "ignore": "", "edge_filter": "",
}  # fmt: skip


def test_workflow_settings_under_06_run_as_modkit(tmp_path):
    """pileup.modkit "0.6": the workflow's CpG options (--motif CG 0, combined strands) write
    modkit 0.6.1's file of the same sites (its --cpg --modified-bases 5mC 5hmC run)."""
    from numapore.pileup.settings import numapore_arguments
    from numapore.workflow.jobs import options_of

    case = load_cases()["cpg_combine_strands_threshold_0.7"]
    settings = dict(WORKFLOW_SETTINGS, modkit="0.6")
    arguments = numapore_arguments(options_of(settings, case["reference"], 2))
    out = tmp_path / "out.bed"
    result = run_pileup(case["input"], out, *arguments)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == (SUITE / case["expected"]).read_bytes()


@pytest.mark.parametrize("key, value", [("ignore", "h"), ("edge_filter", "50")])
def test_workflow_04_setting_refused_under_06(key, value):
    from numapore.pileup.settings import SettingsError, check_settings

    check_settings(dict(WORKFLOW_SETTINGS, **{key: value}, modkit="0.4"))
    with pytest.raises(SettingsError, match=f'pileup.{key}: .* set pileup.modkit: "0.4"'):
        check_settings(dict(WORKFLOW_SETTINGS, **{key: value}, modkit="0.6"))


def test_empty_pileup_names_the_filter_and_its_value(tmp_path):
    """A pileup that writes nothing because a filter removed every read (or call) names that
    filter and its value: a filter threshold, 0.4's edge filter, and the workflow's
    mapping-quality filter (nanopolish's)."""
    from numapore.pileup.settings import emptying_filter, filter_setting, numapore_arguments
    from numapore.workflow.jobs import options_of
    from numapore.report.empty import no_calls_reason, no_rows_reason

    case = load_cases()["cpg_combine_strands_threshold_0.7"]
    bam, reference = str(SUITE / case["input"]), str(SUITE / case["reference"])
    config = {"pileup": {"filter_threshold": 1.0}, "methylation": {"call_threshold": 2.5}}
    settings = dict(WORKFLOW_SETTINGS, modkit="0.6", filter_threshold=1.0)
    options = options_of(settings, reference)
    out = tmp_path / "out.bed"
    assert run_pileup(bam, out, *numapore_arguments(options)).returncode == 0
    assert out.read_bytes() == b""
    key = emptying_filter(bam, options)
    assert no_rows_reason(bam, "cpg", filter_setting(key, options, config)) == (
        f"pileup.filter_threshold: 1.0 removed every cpg call of its modBAM {bam}: its "
        "bedMethyl would be empty"
    )
    # 0.4's edge filter: a read left without calls is skipped; a pileup whose reads all are
    # stops with one line
    settings = dict(WORKFLOW_SETTINGS, modkit="0.4", edge_filter="100000")
    result = run_pileup(bam, out, *numapore_arguments(options_of(settings, reference)))
    assert result.returncode == 1 and result.stderr.startswith(
        f"numapore: {bam}: --edge-filter 100000 removed every call of every read (read "
    ), result.stderr
    # nanopolish calls reads of mapping quality >= methylation.min_mapping_quality only
    qualities = [r.mapping_quality for r in pysam.AlignmentFile(bam) if not r.flag & 0x904]
    reads, highest = len(qualities), max(qualities)
    assert highest < 255
    assert no_calls_reason(bam, "cpg", 255) == (
        f"methylation.min_mapping_quality: 255 removed every read: none of the {reads} mapped "
        f"reads of its modBAM {bam} has a mapping quality of 255 or more (the highest is "
        f"{highest}), and nanopolish calls only those: its bedMethyl would be empty"
    )
    assert no_calls_reason(bam, "cpg", highest) == no_calls_reason(bam, "cpg")
