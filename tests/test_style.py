"""The code stays in the shape the project promises: lint and formatters clean."""

import subprocess

import pytest
from conftest import REPO

VENV = REPO / ".venv" / "bin"


@pytest.mark.parametrize(
    "cmd",
    [
        ["snakemake", "--lint", "--cores", "1"],
        ["snakefmt", "--check", "workflow"],
        ["black", "--check", "--quiet", "scripts", "tests", "benchmarks", "setup.py"],
        ["ruff", "check", "--quiet", "scripts", "tests", "benchmarks", "setup.py"],
        ["lint-imports"],
    ],
    ids=["snakemake-lint", "snakefmt", "black", "ruff", "layers"],
)
def test_clean(cmd):
    result = subprocess.run(
        [str(VENV / cmd[0]), *cmd[1:]], cwd=REPO, capture_output=True, text=True
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    if cmd[0] == "snakemake":
        assert "Congratulations" in output, output
