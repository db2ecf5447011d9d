"""numapore tobigwig, summary, sample-probs and stats against modkit 0.6.1: every case of theirs
in ../shared/data/modkit061_more/cases.tsv, run in process (each module's main(argv)) with the
case's options, writes modkit's output (bigWig: the same chromosomes and float32 value for every
interval; tables byte for byte, sorted where only modkit's line order varies; refused cases: a
non-zero exit and one `numapore:` line), or differs from it exactly as the README's item says;
then the mistakes users make with each option."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHARED
from modkit_more_suite import SUITE, suite_case_names, suite_cases

from numapore.modbam import sample_probs, stats, summary, tobigwig

COMMANDS = {
    "bedmethyl tobigwig": tobigwig,
    "modbam summary": summary,
    "modbam sample-probs": sample_probs,
    "stats": stats,
}
# deterministic = no cases where only the line order varies (README, Determinism): modkit's
# hash maps order the bases; numapore writes A, C, G, T
ORDER_ONLY = {
    "summary_region_per_base_tsv",
    "summary_no_filtering_mapped_only",
    "sample_probs_percentiles_two_bases",
}
# the README's items where numapore follows the documentation, each tested where named
DOCUMENTED = {
    "summary_region_per_base_tsv": "test_modkit_summary_region.py",  # calls outside --region
}


def load_cases() -> dict[str, dict[str, str]]:
    """The suite's cases of this module's commands, by name."""
    return suite_cases(COMMANDS)


def case_names() -> list[str]:
    """The cases numapore writes as modkit 0.6.1 does (DOCUMENTED's are tested where named)."""
    return [name for name in suite_case_names(COMMANDS) if name not in DOCUMENTED]


def bigwig_dump(path: Path) -> tuple[list, list]:
    """A bigWig's chromosomes and (chrom, start, end, float32 value) intervals."""
    import pybigtools

    reader = pybigtools.open(str(path))
    chroms = list(reader.chroms().items())
    records = [(c, s, e, repr(float(v))) for c, _ in chroms for s, e, v in reader.records(c)]
    return chroms, records


def expected_dump(path: Path) -> tuple[list, list]:
    """The suite's text dump of an expected bigWig, as bigwig_dump gives it."""
    chroms, records = [], []
    for line in (SUITE / (str(path) + ".tsv")).read_text().splitlines():
        fields = line.split("\t")
        if fields[0] == "#chrom_sizes":
            chroms.append((fields[1], int(fields[2])))
        else:
            records.append((fields[0], int(fields[1]), int(fields[2]), fields[3]))
    return chroms, records


def run_case(case, out: Path, capsys) -> tuple[int, str, str]:
    """The case's command in process, writing out: exit code, stdout, stderr."""
    options = shlex.split(case["options"])
    command = case["command"]
    if command == "bedmethyl tobigwig":
        argv = [case["input"], str(out), *options]
    elif command == "stats" or case["expected"].endswith("/"):
        argv = [case["input"], "-o", str(out), *options]
    else:  # the table on stdout
        argv = [case["input"], *options, "--suppress-progress"]
    argv += ["-t", case["threads"]]
    code = COMMANDS[command].main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def lines_of(text: str, case: str) -> list[str]:
    """A table's lines, sorted where modkit's order varies (the list of bases sorted too)."""
    lines = text.splitlines(keepends=True)
    if case not in ORDER_ONLY:
        return lines
    for k, line in enumerate(lines):
        if line.startswith(("mod_bases\t", "# bases ")):
            bases = line.split()[-1]
            lines[k] = line.replace(bases, ",".join(sorted(bases.split(","))))
    return sorted(lines)


@pytest.mark.parametrize("name", case_names())
def test_case_matches_modkit(name, tmp_path, monkeypatch, capsys):
    """The case's output equals modkit 0.6.1's (refused cases: one numapore: line)."""
    case = load_cases()[name]
    monkeypatch.chdir(SUITE)
    out = tmp_path / ("out.bw" if case["command"] == "bedmethyl tobigwig" else "out")
    code, stdout, stderr = run_case(case, out, capsys)
    if case["expected"] == "-":
        assert code != 0
        assert stderr.count("\n") == 1 and stderr.startswith("numapore: "), stderr
        assert not out.exists()
        return
    assert code == 0, stderr
    expected = Path(case["expected"])
    if case["command"] == "bedmethyl tobigwig":
        assert bigwig_dump(out) == expected_dump(expected)
    elif case["expected"].endswith("/"):  # the tables; modkit's HTML pages are informative
        for table in ("thresholds.tsv", "probabilities.tsv"):
            assert (out / table).read_text() == (SUITE / expected / table).read_text()
    else:
        text = out.read_text() if out.exists() else stdout
        assert lines_of(text, name) == lines_of((SUITE / expected).read_text(), name)


# --- the mistakes users make with each option -------------------------------------------------

CPG_BED = SUITE / "inputs" / "cpg_bc.bed"
FAI = SHARED / "data" / "modkit_pileup" / "inputs" / "CGI_ladder_3.6kb_ref.fa.fai"


def one_line_error(capsys) -> str:
    """The one numapore: line on stderr."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("numapore: "), err
    return err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--mod-code", "m", "--sizes", str(FAI), "--negative-strand"], "--negative-strand"),
        (["--mod-codes", "m"], "give one of --sizes and --header"),
        (["--mod-codes", "m", "--sizes", str(FAI), "--header", str(FAI)], "give one of"),
        (["--sizes", str(FAI)], "--mod-codes"),
        (["--mod-codes", ",", "--sizes", str(FAI)], "at least one modification code"),
        (["--mod-codes", "m", "--sizes", "missing.sizes"], "missing.sizes"),
        (["--mod-codes", "m", "--sizes", str(FAI)[: -len(".fai")]], "is not 'name length'"),
        (["--mod-codes", "m", "--header", str(FAI)], "not a BAM"),
        (["--mod-codes", "q", "--sizes", str(FAI)], "no bedMethyl rows of code(s) q"),
        (["--mod-codes", "m", "--sizes", str(FAI), "--typo"], "unrecognized arguments: --typo"),
    ],
)
def test_tobigwig_mistakes(argv, says, tmp_path, capsys):
    """Each mistake is one numapore: line naming it, and no bigWig."""
    out = tmp_path / "out.bw"
    assert tobigwig.main([str(CPG_BED), str(out), *argv]) != 0
    assert says in one_line_error(capsys)
    assert not out.exists()


def test_tobigwig_bad_input(tmp_path, capsys):
    """Not a bedMethyl, an empty file and a missing one: one line each."""
    text = tmp_path / "notes.txt"
    text.write_text("chr1 10 11 m\n")
    empty = tmp_path / "empty.bed"
    empty.write_text("")
    for bad, says in ((text, "not 18"), (empty, "no bedMethyl rows"), (tmp_path / "no", "no")):
        assert tobigwig.main([str(bad), str(tmp_path / "o.bw"), "-m", "m", "-g", str(FAI)]) == 1
        assert says in one_line_error(capsys)


def test_tobigwig_past_contig_end(tmp_path, capsys):
    """A position past the chromosome's length in the sizes is refused."""
    sizes = tmp_path / "short.sizes"
    sizes.write_text("oligo_1512_adapters\t50\n")
    assert tobigwig.main([str(CPG_BED), str(tmp_path / "o.bw"), "-m", "m", "-g", str(sizes)]) == 1
    assert "past its length 50" in one_line_error(capsys)


STATS_BED = SUITE / "inputs" / "cpg_bc.bed.gz"
REGIONS = SUITE / "inputs" / "regions.bed"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--regions", str(REGIONS), "-o", "-", "--min-coverage", "x"], "invalid int value"),
        (["--regions", str(REGIONS), "-o", "-", "--min-coverage", "-1"], "0 or more"),
        (["--regions", str(REGIONS)], "-o/--out-table"),
        (["-o", "-"], "--regions"),
        (["--regions", "missing.bed", "-o", "-"], "missing.bed"),
        (["--regions", str(STATS_BED), "-o", "-"], "not a BED file"),
        (["--regions", str(REGIONS), "-o", "-", "--no-headr"], "unrecognized arguments"),
    ],
)
def test_stats_mistakes(argv, says, capsys):
    """Each mistake is one numapore: line naming it."""
    assert stats.main([str(STATS_BED), *argv]) != 0
    assert says in one_line_error(capsys)


def test_stats_bad_input(tmp_path, capsys):
    """An unindexed or plain bedMethyl, an empty regions file, an existing output."""
    empty = tmp_path / "empty.bed"
    empty.write_text("")
    out = tmp_path / "out.tsv"
    out.write_text("keep me\n")
    cases = [
        ([str(CPG_BED), "--regions", str(REGIONS), "-o", "-"], "no tabix index"),
        ([str(STATS_BED), "--regions", str(empty), "-o", "-"], "no BED regions"),
        ([str(STATS_BED), "--regions", str(REGIONS), "-o", str(out)], "--force"),
    ]
    for argv, says in cases:
        assert stats.main(argv) == 1
        assert says in one_line_error(capsys)
    assert out.read_text() == "keep me\n"


def test_stats_stdout_and_bed3(tmp_path, capsys):
    """- writes to stdout; BED3 regions are '.' in name and strand."""
    bed3 = tmp_path / "r.bed"
    bed3.write_text("oligo_1512_adapters\t0\t156\n")
    assert stats.main([str(STATS_BED), "--regions", str(bed3), "-o", "-", "-c", "m"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "#chrom\tstart\tend\tname\tstrand\tcount_m\tcount_valid_m\tpercent_m"
    assert lines[1].startswith("oligo_1512_adapters\t0\t156\t.\t.\t")


BAM = SHARED / "data" / "modkit_pileup" / "inputs" / "bc_anchored_10_reads.sorted.bam"
SAMPLING_MISTAKES = [
    (["-n", "ten"], "invalid int value"),
    (["-n", "0"], "must be positive"),
    (["-f", "2"], "(0, 1]"),
    (["-n", "5", "--no-sampling"], "exclude each other"),
    (["--seed", "3"], "--seed needs --sampling-frac"),
    (["--invert-edge-filter"], "needs --edge-filter"),
    (["--edge-filter", "x"], "illegal --edge-filter"),
    (["--ignore", "hm"], "not a modification code"),
    (["--region", "nowhere"], "not in the BAM header"),
    (["--include-bed", "x.bed"], "--include-bed: modkit's, not supported"),
    (["--no-sampling", "--mappedonly"], "unrecognized arguments"),
]


@pytest.mark.parametrize(
    "argv, says",
    SAMPLING_MISTAKES
    + [
        (["--filter-threshold", "x"], "failed to parse threshold"),
        (["--filter-threshold", "0.7", "--no-filtering"], "exclude each other"),
        (["-p", "1.5"], "between 0 and 1"),
        (["--mod-threshold", "h:0.8"], "--mod-threshold: modkit's, not supported"),
        (["--filter-threshold", "Q:0.7"], "illegal per-base threshold"),
    ],
)
def test_summary_mistakes(argv, says, capsys):
    """Each mistake is one numapore: line naming it."""
    assert summary.main([str(BAM), *argv]) != 0
    assert says in one_line_error(capsys)


@pytest.mark.parametrize(
    "argv, says",
    SAMPLING_MISTAKES
    + [
        (["-p", "0.1,x"], "give fractions"),
        (["-p", "10,50"], "between 0 and 1"),
        (["--hist"], "--hist needs -o DIR"),
        (["--prefix", "s"], "need -o DIR"),
        (["-o", str(BAM)], "not a folder"),
        (["--dna-color", "C", "#0000FF"], "--dna-color: modkit's, not supported"),
    ],
)
def test_sample_probs_mistakes(argv, says, capsys):
    """Each mistake is one numapore: line naming it."""
    assert sample_probs.main([str(BAM), *argv]) != 0
    assert says in one_line_error(capsys)


def test_modbam_bad_input(tmp_path, capsys):
    """A missing BAM, a text file, a BAM without its index: one line each."""
    text = tmp_path / "calls.bam"
    text.write_text("not a bam\n")
    unindexed = tmp_path / "copy.bam"
    unindexed.write_bytes(BAM.read_bytes())
    for bad, says in ((tmp_path / "no.bam", "No such file"), (text, "not a BAM"),
                      (unindexed, "no .bai index")):  # fmt: skip
        for command in (summary, sample_probs):
            assert command.main([str(bad)]) == 1
            assert says in one_line_error(capsys)


def test_sample_probs_output_folder(tmp_path, capsys):
    """-o writes PREFIX_thresholds.tsv, refuses to overwrite it without --force."""
    folder = tmp_path / "probs"
    argv = [str(BAM), "-o", str(folder), "--prefix", "s1", "--no-sampling"]
    assert sample_probs.main(argv) == 0
    table = (folder / "s1_thresholds.tsv").read_text()
    assert table == (SUITE / "expected" / "sample_probs_default.txt").read_text()
    assert sample_probs.main(argv) == 1
    assert "--force" in one_line_error(capsys)
    assert sample_probs.main([*argv, "--force"]) == 0


def test_summary_same_at_any_threads(capsys):
    """-t changes nothing (the sample's batches follow --sampling-threads)."""
    outputs = set()
    for threads in ("1", "2", "8"):
        assert summary.main([str(BAM), "-t", threads, "-n", "4"]) == 0
        outputs.add(capsys.readouterr().out)
    assert len(outputs) == 1


# --- the compiled reading of bedMethyl rows (bedmethyl_rows.c) against Python's -------------

ODD_ROWS = [  # lines the C reader leaves to parse_line, among plain ones
    "#chrom\tchromStart\tchromEnd\tname\n",
    "chr1\t10\t11\tm\t4\t+\t10\t11\t255,0,0\t4\t50.00\t2\t2\t0\t0\t0\t0\t0\n",
    "chr1\t10\t11\th\t4\t+\t10\t11\t255,0,0\t4\t25.00\t1\t2\t1\t0\t0\t0\t0\n",
    "   \n",
    "chr1\t12\t13\tm\t3\t-\t12\t13\t255,0,0\t3 33.33 1 2 0 0 0 0 0\n",  # mixed delimiters
    "chr1\t14\t15\tm,CG,0\t5\t.\t14\t15\t255,0,0\t5\t40.00\t+2\t3\t0\t0\t0\t0\t0\r\n",
    "  # a comment after spaces\n",
    "chr2\t3\t4\tm\t2\t+\t3\t4\t255,0,0\t2\t100.00\t2\t0\t0\t0\t0\t0\t0\r\n",
    "chr2\t3\t4\tm\t6\t-\t3\t4\t255,0,0\t6\t50.00\t3\t3\t0\t0\t0\t0\t0\n",
    "chr2\t9\t10\th\t2\t+\t9\t10\t255,0,0\t2\t0.00\t0\t2\t0\t0\t0\t0\t0",  # no newline
]


def both_paths(monkeypatch, run) -> tuple:
    """run() with the compiled core, then with Python's paths."""
    compiled_result = run()
    monkeypatch.setenv("NUMAPORE_PURE_PYTHON", "1")
    return compiled_result, run()


@pytest.mark.parametrize("codes, positions", [("m", 4), ("h,m", 5)])
def test_tobigwig_compiled_rows_as_python(codes, positions, tmp_path, monkeypatch, capsys):
    """Comments, blank lines, mixed delimiters, CRLF, a signed count, a last line without its
    newline: the compiled reading gives Python's values."""
    bed, sizes = tmp_path / "odd.bed", tmp_path / "sizes"
    bed.write_bytes("".join(ODD_ROWS).encode())
    sizes.write_text("chr1\t100\nchr2\t50\n")

    def run():
        out = tmp_path / "out.bw"
        assert tobigwig.main([str(bed), str(out), "-m", codes, "-g", str(sizes)]) == 0
        return bigwig_dump(out)

    compiled_dump, python_dump = both_paths(monkeypatch, run)
    assert compiled_dump == python_dump
    assert len(compiled_dump[1]) == positions
    monkeypatch.delenv("NUMAPORE_PURE_PYTHON")
    monkeypatch.setattr(tobigwig, "CHUNK", 16)  # every line longer than the buffer
    monkeypatch.setattr(tobigwig, "BATCH", 2)  # batches full, and a position held
    assert run() == compiled_dump


@pytest.mark.parametrize(
    "line, says",
    [
        ("chr1\t10\t11\tm\t4\t+\t10\t11\t255,0,0\t4\t50.00\t2\tx\t0\t0\t0\t0\t0\n", "line 3"),
        ("chr1\t10\t11\tm\t4\t+\t10\t11\t255,0,0\t4\t50.00\t2\t2\t0\t0\t0\t0\t0\n", "line 3: dup"),
        ("chr1\t10\t11\th\t5\t+\t10\t11\t255,0,0\t5\t50.00\t2\t2\t0\t0\t0\t0\t0\n", "overlapping"),
        ("chr1\t10\t11\tm\t4\t+\t10\t11\t\xff\t4\t50.00\t2\t2\t0\t0\t0\t0\t0\n", "not a bedMethyl"),
    ],
)
def test_tobigwig_compiled_refusals_as_python(line, says, tmp_path, monkeypatch, capsys):
    """A bad row after good ones: the same one numapore: line either way, no bigWig."""
    bed, sizes = tmp_path / "bad.bed", tmp_path / "sizes"
    bed.write_bytes(("".join(ODD_ROWS[:2]) + line).encode("latin-1"))
    sizes.write_text("chr1\t100\n")

    def run():
        assert tobigwig.main([str(bed), str(tmp_path / "o.bw"), "-m", "h,m", "-g", str(sizes)]) == 1
        assert not (tmp_path / "o.bw").exists()
        return one_line_error(capsys)

    compiled_error, python_error = both_paths(monkeypatch, run)
    assert compiled_error == python_error and says in compiled_error


def test_stats_compiled_rows_as_python(tmp_path, monkeypatch, capsys):
    """stats over the odd rows (bgzipped, indexed): the compiled sums are Python's."""
    import pysam

    bed, regions = tmp_path / "odd.bed", tmp_path / "regions.bed"
    bed.write_bytes("".join(ODD_ROWS[1:3] + ODD_ROWS[4:6] + ODD_ROWS[7:]).encode() + b"\n")
    pysam.tabix_index(str(bed), preset="bed", force=True)
    regions.write_text("chr1\t0\t20\ta\t0\t+\nchr1\t11\t15\tb\t0\t.\nchr2\t0\t10\tc\t0\t-\n")

    def run():
        argv = [f"{bed}.gz", "--regions", str(regions), "-o", "-", "--min-coverage", "3"]
        assert stats.main(argv) == 0
        return capsys.readouterr().out

    compiled_table, python_table = both_paths(monkeypatch, run)
    assert compiled_table == python_table
    assert compiled_table.splitlines()[1].startswith("chr1\t0\t20\ta\t+\t1\t4\t")
    monkeypatch.delenv("NUMAPORE_PURE_PYTHON")
    monkeypatch.setattr(stats, "CLUSTER", 1)  # one query per region
    monkeypatch.setattr(stats, "LINES", 1)  # one line at a time
    assert run() == compiled_table


def test_commands_import_neither_numpy_nor_pysam(tmp_path):
    """tobigwig, summary and sample-probs (and stats, but for pysam's tabix) on the suite's
    cases, in one fresh interpreter, with neither numpy nor pysam imported at the end: their
    imports were most of a small input's time."""
    cases = load_cases()
    script = ["import sys", "from numapore.modbam import sample_probs, stats, summary, tobigwig"]
    for name in ("tobigwig_hm_header", "summary_default", "sample_probs_hist", "stats_regions"):
        case = cases[name]
        module = COMMANDS[case["command"]].__name__.rsplit(".", 1)[1]
        out = tmp_path / name
        argv = [case["input"], str(out), *shlex.split(case["options"])]
        if module in ("stats", "sample_probs"):
            argv = [case["input"], "-o", str(out), *shlex.split(case["options"])]
        elif module == "summary":
            argv = [case["input"], *shlex.split(case["options"])]
        script.append(f"assert {module}.main({argv!r}) == 0")
        if module == "sample_probs":
            script.append("print(sorted({'numpy', 'pysam'} & set(sys.modules)))")
    script.append("print(sorted({'numpy', 'pysam'} & set(sys.modules)))")
    env = dict(os.environ, PYTHONPATH=str(REPO / "scripts"))
    done = subprocess.run([sys.executable, "-c", "\n".join(script)], capture_output=True,
                          text=True, env=env, cwd=SUITE)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["[]", "['pysam']"]
