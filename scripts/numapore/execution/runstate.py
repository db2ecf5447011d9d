"""Which existing results a run replaces because it runs a heavy step with other settings than
the run that made them: results of different I/O modes and strategies live at the same paths.
The settings a result was made with are in its job's run record (*.run.json: io_mode, the
command-line overrides, numapore.execution.launch.write_record)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# What each step's results are, for the message.
STEP_RESULTS = {"alignment": "alignments", "methylation": "methylation calls"}
STEP_FOLDERS = {"alignment": "align", "methylation": "methylation"}


def read_record(path: Path) -> dict[str, Any] | None:
    """A run record, or None (absent: the job has not run; unreadable)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def changed_settings(
    step: str,
    record: Mapping[str, Any],
    io_mode: str,
    strategy: str,
    overrides: Mapping[str, str],
) -> list[str]:
    """What the step's job would run with other than its record says, among the settings that
    make Snakemake run it again (its rule's params): the I/O mode (methylation) and the
    command-line overrides of the step (overrides: those the rule gets); empty when none."""
    changes = []
    if step == "methylation" and record.get("io_mode") not in (None, io_mode):
        changes.append(f"now I/O mode {io_mode}, was {record['io_mode']}")
    key = f"strategy.{step}"
    if dict(record.get("overrides") or {}).get(key) != overrides.get(key):
        changes.append(f"now {step} strategy {strategy}, was {record.get('strategy')}")
    return changes


def replaced_results(
    records: Mapping[str, Mapping[str, Sequence[str]]],
    io_mode: str,
    strategies: Mapping[str, str],
    overrides: Mapping[str, Mapping[str, str]],
) -> list[str]:
    """One line per step and change naming the samples whose results this run replaces:
    records is sample -> step -> its jobs' run records, strategies step -> the strategy this
    run uses, overrides step -> the command-line overrides its rule gets."""
    found: dict[tuple[str, str], list[str]] = {}
    for sample, steps in records.items():
        for step, paths in steps.items():
            record = next((r for r in map(read_record, paths) if r is not None), None)
            if record is None:
                continue
            changes = changed_settings(
                step, record, io_mode, strategies[step], overrides.get(step, {})
            )
            if changes:
                found.setdefault((step, "; ".join(changes)), []).append(sample)
    lines = []
    for (step, change), samples in found.items():
        where = ", ".join(f"results/{s}/{STEP_FOLDERS[step]}/" for s in samples)
        lines.append(
            f"the {STEP_RESULTS[step]} of {', '.join(samples)} ({where}) were made with other "
            f"settings ({change}): this run replaces them and what is made from them; to keep "
            "them, copy results/ or run in another folder first"
        )
    return lines
