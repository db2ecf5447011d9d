"""The cohort table's filters (config cohort:, issue 56 item 4), as modkit 0.6.4 defines its
`bedmethyl merge --min-samples --min-sample-coverage` (nanoporetech/modkit #625, #626): a sample
counts at a site, in the tally and in the summed counts, only with at least min_sample_coverage
valid coverage there; a site is kept when at least min_samples samples count there. modkit 0.6.4
is not buildable here (0.6.1 is our built reference, and its merge has no filters): the tables are
checked against the definition computed row by row from the bedMethyl files themselves (not with
the table's polars code), on the modkit 0.6.1 suite's real files whose unfiltered table equals
0.6.1's merge (test_phased.py). Then the mistakes users make with the two keys."""

from __future__ import annotations

import gzip
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from project import REPO

from numapore.base.errors import InputError
from numapore.methylation.bedmethyl import read_bedmethyl
from numapore.methylation.cohort import Filters, dropped_lines, write_cohort_table
from numapore.methylation.cohort import read_sample_counts, write_sample_counts
from numapore.workflow import build

SUITE = REPO.parent / "shared" / "data" / "modkit061_pileup"
MERGE_CASES = REPO / "tests" / "data" / "modkit" / "merge061" / "cases.tsv"


def suite_case() -> tuple[list[tuple[str, Path]], list[str]]:
    """The merge golden case with the most inputs: (sample, bedMethyl) pairs and contig order."""
    rows = [line.split("\t") for line in MERGE_CASES.read_text().splitlines()[1:]]
    _, inputs, sizes = max(rows, key=lambda row: len(row[1].split()))
    beds = [(f"s{i}", SUITE / path) for i, path in enumerate(inputs.split())]
    contigs = [line.split("\t")[0] for line in (SUITE / sizes).read_text().splitlines()]
    return beds, contigs


def expected_sites(beds, min_samples: int, min_coverage: int) -> dict[tuple, list[int]]:
    """The definition, computed from the files' rows: per site (chrom, start, code, strand) the
    summed valid coverage and N_mod of the samples that count there, for the sites kept."""
    counting = defaultdict(dict)
    for name, path in beds:
        for row in read_bedmethyl(path):
            if row.valid_cov >= min_coverage:
                site = (row.chrom, row.start, row.name.split(",")[0], row.strand)
                valid, mod = counting[site].get(name, (0, 0))
                counting[site][name] = (valid + row.valid_cov, mod + row.n_mod)
    return {
        site: [sum(v for v, _ in by.values()), sum(m for _, m in by.values())]
        for site, by in counting.items()
        if len(by) >= min_samples
    }


def table_sites(path: Path) -> dict[tuple, list[int]]:
    """The written table's sites with their summed valid coverage and N_mod (columns 10, 12)."""
    sites = {}
    for line in gzip.decompress(path.read_bytes()).decode().splitlines()[1:]:
        f = line.split("\t")
        sites[(f[0], int(f[1]), f[3], f[5])] = [int(f[9]), int(f[11])]
    return sites


@pytest.mark.parametrize("min_samples, min_coverage", [(1, 0), (2, 0), (3, 0), (1, 5), (2, 3)])
def test_filters_keep_the_sites_the_definition_keeps(tmp_path, min_samples, min_coverage):
    beds, contigs = suite_case()
    assert len(beds) >= 3
    out = tmp_path / "cohort.bed.gz"
    written = write_cohort_table(out, beds, contigs, Filters(min_samples, min_coverage))
    expected = expected_sites(beds, min_samples, min_coverage)
    assert table_sites(out) == expected
    assert written.rows == len(expected)
    everything = expected_sites(beds, 1, 0)
    if (min_samples, min_coverage) != (1, 0):
        assert len(expected) < len(everything)  # the filter bit on this data
    if min_samples < 3:  # (no site of this data is in 3 of its files: each names codes its way)
        assert expected
    # per sample: the sites its file has, and those of them the table kept
    for name, path in beds:
        rows = list(read_bedmethyl(path))
        assert written.read[name] == len(rows)
        kept = [
            r
            for r in rows
            if r.valid_cov >= min_coverage
            and (r.chrom, r.start, r.name.split(",")[0], r.strand) in expected
        ]
        assert written.kept[name] == len(kept)


def test_a_sample_left_without_sites_is_named(tmp_path):
    """A sample whose rows all fall below min_sample_coverage contributes no site: the job's
    lines (and, from the counts beside the table, the run's last lines) name it and the
    settings; a table the filters empty says so."""
    beds, contigs = suite_case()
    shallow = tmp_path / "shallow.bed"
    with open(shallow, "w") as out:  # the first file's rows, each with valid coverage 1
        for line in (
            gzip.open(beds[0][1], "rt") if str(beds[0][1]).endswith(".gz") else open(beds[0][1])
        ):
            f = line.rstrip("\n").split("\t")
            f[4] = f[9] = "1"
            out.write("\t".join(f) + "\n")
    beds = [*beds, ("shallow", shallow)]
    table = tmp_path / "cohort.bed.gz"
    filters = Filters(1, 2)
    written = write_cohort_table(table, beds, contigs, filters)
    assert written.kept["shallow"] == 0 and written.read["shallow"] > 0
    counts = tmp_path / "cohort.samples.tsv"
    write_sample_counts(counts, written)
    read, kept = read_sample_counts(counts)
    assert (read, kept) == (written.read, written.kept)
    assert dropped_lines(table, read, kept, filters) == [
        f"cohort table {table}: sample 'shallow' contributes no site (its "
        f"{written.read['shallow']} sites all left out by cohort.min_samples: 1, "
        "cohort.min_sample_coverage: 2)"
    ]
    empty = tmp_path / "empty.bed.gz"
    none_kept = write_cohort_table(empty, beds, contigs, Filters(1, 10**6))
    assert none_kept.rows == 0
    lines = dropped_lines(empty, none_kept.read, none_kept.kept, Filters(1, 10**6))
    assert lines[0] == (
        f"cohort table {empty} is empty: cohort.min_samples: 1, cohort.min_sample_coverage: "
        "1000000 left out every site"
    )
    assert len(lines) == 1 + len(beds)


def test_an_unsorted_bedmethyl_is_merged_in_memory_and_said(tmp_path, capsys):
    """The table streams the files as a k-way merge, which needs each in the reference's contig
    order by position: a file that is not (its rows reversed here) is said in the job's log and
    the table made in memory, the same table."""
    beds, contigs = suite_case()
    name, first = beds[0]
    opener = gzip.open if str(first).endswith(".gz") else open
    with opener(first, "rt") as handle:
        lines = handle.readlines()
    rows = [line for line in lines if not line.startswith("#")]
    assert len(rows) > 10
    unsorted = tmp_path / "unsorted.bed"
    unsorted.write_text("".join([line for line in lines if line.startswith("#")] + rows[::-1]))
    tables = [tmp_path / "sorted.bed.gz", tmp_path / "unsorted.bed.gz"]
    written = write_cohort_table(tables[0], beds, contigs, batch_bytes=400)
    assert capsys.readouterr().out == ""  # streamed
    again = write_cohort_table(tables[1], [(name, unsorted), *beds[1:]], contigs, batch_bytes=400)
    assert capsys.readouterr().out == (
        f"cohort table: {unsorted} is not in the reference's contig order by position: the "
        "table is made in memory at once (memory grows with the files)\n"
    )
    assert gzip.decompress(tables[1].read_bytes()) == gzip.decompress(tables[0].read_bytes())
    assert again == written


# ----------------------------------------------------------------------------------------------
# The mistakes users make with the keys, through the plan's build (as the workflow reads them).


@pytest.fixture
def groups_clone(tmp_path, monkeypatch) -> Path:
    """A folder laid out as the clone for --configfile .test/config-groups.yaml (5 samples of
    one reference: one cohort table)."""
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    for name in (".test", "resources"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def build_with(section: str = "cohort", **settings):
    """The groups config's plan with these settings of a section (cohort:) on the command
    line."""
    files = [Path("config/config.yaml"), Path(".test/config-groups.yaml")]
    given = {section: settings}
    config = build.load_config(files, given)
    schemas = REPO / "workflow" / "schemas"
    return build.build(config, schemas=schemas, configfiles=files, given=given, cores=2)


def problem(**cohort) -> str:
    with pytest.raises(InputError) as err:
        build_with(**cohort)
    return str(err.value)


def test_the_filters_reach_the_table_as_the_plan_decides(groups_clone):
    plan = build_with(min_samples="all", min_sample_coverage=4)
    assert plan.cohort_filters("ecoli_window", "cpg") == Filters(5, 4)  # all: the 5 samples
    assert build_with().cohort_filters("ecoli_window", "cpg") == Filters(3, 3)  # the file's
    unfiltered = build_with(min_samples=1, min_sample_coverage=0)
    assert unfiltered.cohort_filters("ecoli_window", "cpg") == Filters(1, 0)


@pytest.mark.parametrize(
    "cohort, message",
    [
        (
            {"min_samples": 6},
            "config cohort.min_samples: 6 is more than the 5 samples of the cohort table of "
            "ecoli_window (cpg: case1, case2, control1, control2, demo): it would be empty",
        ),
        (
            {"min_samples": "All"},
            "config cohort.min_samples: 'All' is neither a number of samples from 1 nor all; "
            "did you mean `all`?",
        ),
        (
            {"min_samples": "every"},
            "config cohort.min_samples: 'every' is neither a number of samples from 1 nor all",
        ),
        (
            {"min_samples": 0},
            "config cohort.min_samples: 0 is neither a number of samples from 1 nor all",
        ),
        (
            {"min_sample_coverage": -1},
            "--config cohort=...: cohort.min_sample_coverage: -1 is less than the minimum of 0",
        ),
        (
            {"min_sample_coverage": "5x"},
            "--config cohort=...: cohort.min_sample_coverage: '5x' is not of type 'integer'",
        ),
        (
            {"min_sample": 2},
            "--config cohort=...: unknown config key 'cohort.min_sample'; did you mean "
            "`min_samples`?",
        ),
    ],
)
def test_mistakes_are_one_line(groups_clone, cohort, message):
    assert problem(**cohort) == message
