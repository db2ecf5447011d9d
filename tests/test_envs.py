"""The conda path, checked statically (conda channels are not reachable here): every rule's env
provides what its script imports and the tools its commands run (tests/envcheck.py), the envs
pin what requirements.txt pins, and the check fails when a dependency is taken out of an env."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import envcheck
import pytest
import forked_snakemake
import yaml
from conftest import REPO
from project import snakemake_command, write_project

ENVS = sorted((REPO / "envs").glob("*.yaml"))


@pytest.fixture(scope="module")
def rules() -> list[envcheck.Rule]:
    """Every rule of workflow/rules/*.smk as the checker reads it."""
    return envcheck.parse_rules()


def test_the_checker_sees_every_rule_snakemake_has(rules, tmp_path, ecoli_dir):
    """The .smk reading finds exactly the rules Snakemake itself lists."""
    row = {"sample": "ecoli", "signal": ecoli_dir / "fast5", "reads": ecoli_dir / "reads.fasta"}
    work = write_project(tmp_path, [{**row, "reference": ecoli_dir / "region.fa"}])
    run = forked_snakemake.run(
        snakemake_command(work, 1, "--list-rules", profile=None),
        capture_output=True, text=True, cwd=work,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    listed = {line.strip() for line in run.stdout.splitlines() if re.fullmatch(r"\s*\w+", line)}
    assert {r.name for r in rules} == listed


def test_every_rule_env_provides_what_the_rule_runs(rules):
    """Imports of each rule script (through the package) and tools of its commands are in its
    env; every rule that runs something names an env."""
    problems = [p for rule in rules for p in envcheck.rule_problems(rule)]
    assert not problems, "\n".join(problems)
    assert sum(1 for r in rules if r.script or r.shell) >= 30


def test_env_pins_equal_requirements():
    """A package both in an env and in requirements.txt has one version."""
    assert not envcheck.pin_mismatches(ENVS, REPO / "requirements.txt")


def without(env: Path, package: str, folder: Path) -> Path:
    """A copy of every env in folder, with package taken out of env."""
    for other in ENVS:
        shutil.copy(other, folder)
    data = yaml.safe_load(env.read_text())
    kept = []
    for dep in data["dependencies"]:
        if isinstance(dep, dict):
            kept.append({"pip": [p for p in dep["pip"] if p.split("==")[0].lower() != package]})
        elif dep.split("=")[0].lower() != package:
            kept.append(dep)
    data["dependencies"] = kept
    (folder / env.name).write_text(yaml.safe_dump(data))
    return folder


@pytest.mark.parametrize(
    "env, package",
    [
        (env, package)
        for env in ENVS
        for package in envcheck.env_packages(env)
        if package != "pip"  # the installer of an env's pip list, not a dependency of a rule
    ],
    ids=lambda v: v.name if isinstance(v, Path) else v,
)
def test_removing_any_dependency_fails_the_check(rules, env, package, tmp_path):
    """Each dependency of each env is needed by a rule using it: taking it out is reported,
    naming the rule, the env and the package."""
    folder = without(env, package, tmp_path)
    problems = [p for rule in rules for p in envcheck.rule_problems(rule, env_dir=folder)]
    assert any(f"env {env.name} lacks {package} " in p for p in problems), problems


def test_command_position_is_told_from_prose():
    """Tools count where a command line runs them, not where a message names them."""
    assert envcheck.command_tools("minimap2 -ax map-ont -t 2 ref.mmi r.fa | samtools sort -") == {
        "minimap2",
        "samtools",
    }
    assert envcheck.command_tools("nanopolish index ") == {"nanopolish"}
    assert envcheck.command_tools("{ numactl --show; grep Cpus /proc/self/status; }") == {"numactl"}
    assert envcheck.command_tools("samtools") == {"samtools"}
    assert envcheck.command_tools("no call: nanopolish could not align the signal") == set()
    assert envcheck.command_tools("reads; nanopolish would call such reads twice") == set()
