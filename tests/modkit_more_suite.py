"""The modkit 0.6.1 conformance suite beyond pileup (../shared/data/modkit061_more): its cases
of some commands, read from its manifest, for the tests of numapore's commands."""

from __future__ import annotations

import csv
from collections.abc import Collection

import pytest
from project import REPO

SUITE = REPO.parent / "shared" / "data" / "modkit061_more"


def suite_cases(commands: Collection[str]) -> dict[str, dict[str, str]]:
    """The suite's cases of these commands (modkit's words: `bedmethyl tobigwig`), by name."""
    if not (SUITE / "cases.tsv").is_file():
        pytest.fail(f"shared data missing: {SUITE} (tests need ../shared beside the repository)")
    with open(SUITE / "cases.tsv", newline="") as handle:
        rows = csv.DictReader(handle, delimiter="\t")
        return {row["case"]: row for row in rows if row["command"] in commands}


def suite_case_names(commands: Collection[str]) -> list[str]:
    """Their names, for pytest ids (one that fails when the suite is missing)."""
    return list(suite_cases(commands)) if (SUITE / "cases.tsv").is_file() else ["missing-suite"]
