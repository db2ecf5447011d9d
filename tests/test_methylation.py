"""Per-site frequency semantics, on call tables written by hand."""

import io

import pytest

from numapore.methylation import (
    CALL_COLUMNS,
    read_calls,
    site_frequencies,
    write_bedmethyl,
    write_frequency_tsv,
)


def table(*rows: tuple) -> io.StringIO:
    """A call table: rows of (chrom, start, end, read, llr, num_motifs, sequence)."""
    lines = ["\t".join(CALL_COLUMNS)]
    for chrom, start, end, read, llr, motifs, seq in rows:
        lines.append(f"{chrom}\t+\t{start}\t{end}\t{read}\t{llr}\t-1\t-1\t1\t{motifs}\t{seq}")
    return io.StringIO("\n".join(lines) + "\n")


CALLS = [
    ("c1", 10, 10, "r1", 3.0, 1, "AAAAACGAAAAA"),
    ("c1", 10, 10, "r2", -2.5, 1, "AAAAACGAAAAA"),
    ("c1", 10, 10, "r3", 1.9, 1, "AAAAACGAAAAA"),  # ambiguous: |llr| < 2
    ("c1", 20, 26, "r1", 4.0, 3, "AAAAACGACGTCGAAAAA"),  # CpGs at 20, 23 and 26
    ("c1", 20, 26, "r2", 5.0, 3, "AAAAACGACGTCGAAAAA"),
]


def test_threshold_and_group_counts():
    sites = site_frequencies(read_calls(table(*CALLS)), threshold=2.0)
    single = sites[("c1", 10, 10)]
    assert (single.num_reads, single.called_sites, single.called_sites_methylated) == (2, 2, 1)
    group = sites[("c1", 20, 26)]
    assert (group.group_size, group.called_sites, group.called_sites_methylated) == (3, 6, 6)


def test_threshold_is_configurable():
    sites = site_frequencies(read_calls(table(*CALLS)), threshold=1.5)
    assert sites[("c1", 10, 10)].called_sites == 3


def test_split_groups_gives_one_row_per_cpg():
    sites = site_frequencies(read_calls(table(*CALLS)), threshold=2.0, split_groups=True)
    # CGs of the group's sequence sit at offsets 5, 8 and 11: positions 20, 23 and 26.
    assert {k for k in sites if k[1] >= 20} == {("c1", 20, 20), ("c1", 23, 23), ("c1", 26, 26)}
    assert sites[("c1", 23, 23)].called_sites == 2
    assert sites[("c1", 23, 23)].sequence == "split-group"


def test_frequency_tsv_and_bedmethyl_rows():
    sites = site_frequencies(read_calls(table(*CALLS)))
    tsv, bed = io.StringIO(), io.StringIO()
    assert write_frequency_tsv(sites, tsv) == 2
    assert tsv.getvalue().splitlines()[1] == "c1\t10\t10\t1\t2\t1\t0.500\tAAAAACGAAAAA"
    assert write_bedmethyl(sites, bed) == 2
    assert bed.getvalue().splitlines()[1].split("\t") == [
        "c1", "20", "27", "m", "2", ".", "20", "27", "0,0,0", "2", "100",
    ]  # fmt: skip


def test_not_a_call_table_is_refused():
    with pytest.raises(ValueError, match="missing"):
        list(read_calls(io.StringIO("a\tb\n1\t2\n"), "x.tsv"))
