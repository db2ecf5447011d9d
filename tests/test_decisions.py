"""Each decision in one place: the kinds table answers every per-kind question, so no code
outside it compares a kind name as a string (a new kind is then a new row, not a hunt through
the workflow)."""

import re

from conftest import REPO

from numapore.inputs.kinds import KINDS

TABLE = REPO / "scripts" / "numapore" / "inputs" / "kinds.py"
SOURCES = [
    *(REPO / "scripts").rglob("*.py"),
    *(REPO / "workflow").rglob("*.smk"),
    REPO / "workflow" / "Snakefile",
]


def kind_comparisons(text: str) -> list[str]:
    """The lines of text that compare a kind name as a string: `== "modbam"`, `"short" !=`,
    `in ("signal", ...)`."""
    names = "|".join(map(re.escape, KINDS))
    literal = rf""""(?:{names})"|'(?:{names})'"""
    compared = re.compile(
        rf"(?:==|!=)\s*(?:{literal})|(?:{literal})\s*(?:==|!=)"
        rf"|\bin\s*[\(\[\{{][^\)\]\}}]*(?:{literal})"
    )
    return [line.strip() for line in text.splitlines() if compared.search(line)]


def test_the_check_finds_a_comparison():
    """The check itself sees each form (a check that sees nothing would always pass)."""
    name = next(iter(KINDS))
    lines = [
        f'if sample.kind == "{name}":',
        f"if '{name}' != kind:",
        f'if kind in ("x", "{name}"):',
        f'a = "{name}"',  # an assignment: no comparison
        f'"{name}" in formats',  # a name of something else in a collection
    ]
    assert kind_comparisons("\n".join(lines)) == lines[:3]


def test_no_kind_name_compared_outside_the_table():
    found = [
        f"{path.relative_to(REPO)}: {line}"
        for path in SOURCES
        if path != TABLE
        for line in kind_comparisons(path.read_text())
    ]
    assert not found, "ask the kinds table (numapore.inputs.kinds) instead:\n" + "\n".join(found)
