"""A workflow run in a project folder of its own: what tests and benchmarks set up to run
numapore on given samples without touching the repository's config/ or results/."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SHEET_COLUMNS = ["sample", "signal", "reads", "reference"]


def write_project(
    workdir: Path, rows: list[dict[str, str]], config: dict | None = None, repo: Path = REPO
) -> Path:
    """Write config/config.yaml (repo's, by default this repository's, without its demo sample,
        updated by config) and config/samples.tsv (rows: the four columns, and any other a row has,
    empty where a row lacks it) in workdir; return workdir."""
    (workdir / "config").mkdir(parents=True, exist_ok=True)
    base = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    base["simulate"] = {}  # no demo sample unless asked for
    base.update(config or {})
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(base))
    # Columns beyond the four (kind, reads2: short samples) when a row has them.
    columns = [
        *SHEET_COLUMNS,
        *(k for k in dict.fromkeys(k for r in rows for k in r) if k not in SHEET_COLUMNS),
    ]
    lines = ["\t".join(columns)]
    lines += ["\t".join(str(row.get(c, "")) for c in columns) for row in rows]
    (workdir / "config" / "samples.tsv").write_text("\n".join(lines) + "\n")
    return workdir


def snakemake_command(
    workdir: Path,
    cores: int | None,
    *args: str,
    profile: str | None = "hpc-numa",
    repo: Path = REPO,
) -> list[str]:
    """The command running the workflow of repo (by default this repository) in workdir with a
    profile of its profiles/ (hpc-numa by default; None: none) and its default profile; cores
    None leaves them to the profile."""
    return [
        str(repo / ".venv" / "bin" / "snakemake"),
        "--snakefile", str(repo / "workflow" / "Snakefile"),
        "--directory", str(workdir),
        *(["--profile", str(repo / "profiles" / profile)] if profile else []),
        "--workflow-profile", str(repo / "profiles" / "default"),
        *(["--cores", str(cores)] if cores is not None else []),
        *args,
    ]  # fmt: skip
