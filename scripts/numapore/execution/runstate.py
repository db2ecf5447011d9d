"""What the previous run in a results folder used (I/O mode, strategies, command-line overrides),
kept in a small state file, so that a run whose settings differ says which results it replaces:
results of different modes live at the same paths."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from numapore.base.atomic import atomic_output
from numapore.execution.hosts import STEPS, HostConfig

# Under results/, beside the outputs it describes.
STATE_FILE = Path("results/.numapore/run-settings.json")


def run_settings(host: HostConfig) -> dict[str, Any]:
    """The settings of a run that decide how its heavy steps run (with the host's overrides)."""
    return {
        "host_file": str(host.path) if host.path else host.name,
        "io_mode": host.io_mode,
        "strategy": {step: host.strategy_for(step) for step in STEPS},
        "overrides": dict(host.overrides),
    }


def read_settings(path: Path = STATE_FILE) -> dict[str, Any] | None:
    """The previous run's settings, or None (no previous run, or an unreadable file)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_settings(settings: Mapping[str, Any], path: Path = STATE_FILE) -> None:
    """Keep this run's settings for the next run (complete or absent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path) as partial:
        partial.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")


def remade_steps(previous: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, str]:
    """The steps whose jobs Snakemake runs again because a setting changed, each with what
    changed: the methylation calls when the I/O mode (a param of call_methylation) or the
    overridden methylation strategy differs, the alignment when its overridden strategy does
    (an override is a param of its rule; a host file's own strategy is not)."""
    old, new = dict(previous.get("overrides", {})), dict(current.get("overrides", {}))
    changes: dict[str, list[str]] = {}
    if previous.get("io_mode") != current["io_mode"]:
        changes.setdefault("methylation", []).append(
            f"now I/O mode {current['io_mode']}, was {previous.get('io_mode')}"
        )
    for step in STEPS:
        key = f"strategy.{step}"
        if old.get(key) != new.get(key):
            changes.setdefault(step, []).append(
                f"now {step} strategy {current['strategy'][step]}, "
                f"was {previous.get('strategy', {}).get(step)}"
            )
    return {step: "; ".join(what) for step, what in changes.items()}


# What each remade step replaces of a sample (an existing file says the sample has one).
STEP_RESULTS = {
    "alignment": ("alignments", "results/{s}/align/{s}.{a}.bam", "results/{s}/align/"),
    "methylation": (
        "methylation calls",
        "results/{s}/methylation/{s}.{a}.{m}.calls.tsv",
        "results/{s}/methylation/",
    ),
}


def replaced_results(
    previous: Mapping[str, Any] | None,
    current: Mapping[str, Any],
    samples: Iterable[str],
    aligner: str,
    motif: str,
    state: Path = STATE_FILE,
) -> list[str]:
    """One line per remade step that replaces existing results: what changed since the
    previous run (state) and the results of which samples are made again."""
    if previous is None:
        return []
    lines = []
    samples = list(samples)
    for step, change in remade_steps(previous, current).items():
        what, probe, folder = STEP_RESULTS[step]
        had = [s for s in samples if Path(probe.format(s=s, a=aligner, m=motif)).exists()]
        if had:
            where = ", ".join(folder.format(s=s) for s in had)
            lines.append(
                f"the {what} of {', '.join(had)} ({where}) were made with other settings "
                f"({change}; {state}): this run replaces them and what is made from them; to "
                "keep them, copy results/ or run in another folder first"
            )
    return lines
