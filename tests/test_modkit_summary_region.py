"""`numapore summary --region` counts only the calls whose reference position is in the region
(the help's "process only the specified region"); modkit 0.6.1 counts every call of the reads
overlapping it (../shared/data/modkit061_more, README item 4). Against modkit's own outputs
(tests/data/modkit061_summary_region, its README): numapore's output equals 0.6.1's summary
with --include-bed of the region, and differs from 0.6.1's --region output (the suite's
summary_region_per_base_tsv) by exactly the calls `modkit extract calls` puts outside it."""

from __future__ import annotations

import csv
import gzip
import shlex
from collections import Counter
from pathlib import Path

import pytest
from conftest import SHARED
from modkit_more_suite import SUITE, suite_cases

from numapore.modbam import summary

GOLDEN = Path(__file__).parent / "data" / "modkit061_summary_region"
BAM = (
    SHARED / "data" / "modkit_pileup" / "inputs"
    / "CG_5mC_20230207_1700_6A_PAG66026_3c0abf27_oligo_741_adapters_modcalls_0th_sort_10_reads.bam"
)  # fmt: skip
THRESHOLDS = ["--filter-threshold", "C:0.7", "--filter-threshold", "A:0.8"]


def run_summary(argv: list[str], capsys) -> str:
    """numapore summary's stdout (exit 0)."""
    assert summary.main([str(BAM), *argv]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def tsv_counts(text: str) -> Counter:
    """A --tsv output's call counts ({B}_pass_calls_{state}, {B}_fail_calls_{state})."""
    pairs = (line.split("\t") for line in text.splitlines())
    return Counter({k: int(v) for k, v in pairs if "_calls_" in k and int(v)})


def extract_counts(inside: bool) -> Counter:
    """The calls of `modkit extract calls --region oligo_741_adapters:0-10` (the same reads and
    thresholds) whose reference position is in [0, 10) (inside) or not, as tsv_counts keys."""
    counts: Counter = Counter()
    with gzip.open(GOLDEN / "expected" / "extract_calls_0_10.tsv.gz", "rt") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if (0 <= int(row["ref_position"]) < 10) != inside:
                continue
            kind = "fail" if row["fail"] == "true" else "pass"
            code = row["call_code"]
            state = "unmodified" if code == "-" else f"modified_{code}"
            counts[f"{row['canonical_base']}_{kind}_calls_{state}"] += 1
    return counts


@pytest.mark.parametrize(
    "argv, golden",
    [
        (["--region", "oligo_741_adapters:0-10", *THRESHOLDS, "--tsv"],
         "summary_0_10_include_bed.tsv"),
        (["--region", "oligo_741_adapters:9-10", *THRESHOLDS], "summary_9_10_include_bed.txt"),
        (["--region", "oligo_741_adapters:0-10", "--no-sampling"],
         "summary_0_10_include_bed_estimated.txt"),
    ],
)  # fmt: skip
def test_region_equals_modkit_include_bed(argv, golden, capsys):
    """--region R gives 0.6.1's own summary with --include-bed R (lines sorted: modkit's order
    of lines varies between runs), the threshold estimated from the region's calls too."""
    expected = (GOLDEN / "expected" / golden).read_text()
    assert sorted(run_summary(argv, capsys).splitlines()) == sorted(expected.splitlines())


def test_region_differs_from_modkit061_by_the_calls_outside(capsys):
    """The suite's summary_region_per_base_tsv case: 0.6.1's counts minus numapore's are the
    calls of the region's reads outside it, numapore's the calls inside (extract calls)."""
    case = suite_cases({"modbam summary"})["summary_region_per_base_tsv"]
    assert shlex.split(case["options"]) == ["--region", "oligo_741_adapters:0-10", *THRESHOLDS,
                                            "--tsv"]  # fmt: skip
    numapore = tsv_counts(run_summary(shlex.split(case["options"]), capsys))
    modkit061 = tsv_counts((SUITE / case["expected"]).read_text())
    outside, inside = extract_counts(inside=False), extract_counts(inside=True)
    assert numapore == inside
    assert sum(inside.values()) == 14 and sum(outside.values()) == 302 - 14
    assert modkit061 - numapore == outside  # 0.6.1 lists only states with passing calls
    assert all(modkit061[k] == numapore[k] + outside[k] for k in modkit061)


def test_region_without_calls_is_one_line(capsys):
    """A region whose reads have no call inside it: one numapore: line, no table."""
    assert summary.main([str(BAM), "--region", "oligo_741_adapters:3-4", *THRESHOLDS]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no base modification calls" in err, err
