"""The comparison's cells: what one benchmark cell is (a heavy step with one aligner, strategy,
I/O mode, thread count and repeat), its name, the matrix of cells a config's `compare:` block
asks for, in its seeded shuffled run order, and the host settings a cell runs with.

A cell is named `<step>.<aligner>.<strategy>.<io_mode>.t<threads>.r<repeat>` (io_mode `na` for
alignment). The workflow imports this module at DAG time: it stays free of heavy imports.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numapore.base.errors import InputError
from numapore.execution.io_modes import modes_reading
from numapore.inputs.kinds import KINDS
from numapore.inputs.sheet import Sample

STEPS = ("alignment", "methylation")
NOT_APPLICABLE = "na"
CELL_PATTERN = re.compile(
    r"^(?P<step>alignment|methylation)\.(?P<aligner>[a-z0-9]+)\.(?P<strategy>[a-z]+)"
    r"\.(?P<io_mode>[a-z0-9-]+)\.t(?P<threads>\d+)\.r(?P<repeat>\d+)$"
)


@dataclass(frozen=True)
class Cell:
    """One benchmark cell: a step with one aligner, strategy, I/O mode, thread count, repeat."""

    step: str
    aligner: str
    strategy: str
    io_mode: str
    threads: int
    repeat: int

    @property
    def name(self) -> str:
        """The cell's name, used in its file paths."""
        return (
            f"{self.step}.{self.aligner}.{self.strategy}.{self.io_mode}"
            f".t{self.threads}.r{self.repeat}"
        )

    @property
    def label(self) -> str:
        """What is compared, without threads and repeat (a line in the plots)."""
        if self.step == "alignment":
            return f"{self.aligner} {self.strategy}"
        return f"{self.io_mode} {self.strategy}"

    @classmethod
    def parse(cls, name: str) -> Cell:
        """The cell a name stands for (ValueError for a name that is not a cell's)."""
        match = CELL_PATTERN.match(name)
        if not match:
            raise ValueError(f"{name!r} is not a benchmark cell name")
        fields = match.groupdict()
        return cls(**{**fields, "threads": int(fields["threads"]), "repeat": int(fields["repeat"])})


def matrix(compare: Mapping[str, Any], aligner: str) -> list[Cell]:
    """Every cell of the config's `compare:` block in run order: all cells of repeat 1, then all
    of repeat 2, ... (so a slow phase of the machine hits every configuration alike), each
    repeat's cells in an order shuffled by a generator seeded with `compare.seed` (the same
    seed, the same order): a load that drifts during a repeat then falls on no thread count,
    strategy or step in particular. Methylation cells use the alignments of `aligner` (the
    workflow's)."""
    configs = []
    for step in compare["steps"]:
        for threads in compare["threads"]:
            for strategy in compare["strategies"]:
                if step == "alignment":
                    configs += [
                        ("alignment", a, strategy, NOT_APPLICABLE, threads)
                        for a in compare["aligners"]
                    ]
                else:
                    configs += [
                        ("methylation", aligner, strategy, io, threads)
                        for io in compare["io_modes"]
                    ]
    configs = sorted(set(configs), key=configs.index)
    shuffler = random.Random(compare["seed"])
    cells = []
    for repeat in range(1, compare["repeats"] + 1):
        order = list(configs)
        shuffler.shuffle(order)
        cells += [Cell(*config, repeat) for config in order]
    return cells


def cell_host(base: Mapping[str, Any], cell: Cell) -> dict[str, Any]:
    """The host settings of a cell: the base host file's data with the cell's strategy and I/O
    mode (plain data, validated once when the cell's host object is made from it)."""
    host = json.loads(json.dumps(dict(base)))  # deep copy of plain YAML data
    host.setdefault("strategy", {})[cell.step] = cell.strategy
    host["description"] = f"benchmark cell {cell.name} (from: {host.get('description', '')})"
    if cell.step == "methylation":
        host["io_mode"] = cell.io_mode
        host.pop("io_processes", None)  # a pool of the cell's threads, one process per thread
    return host


# The step of the comparison each kind must run for it to be measured (alignment: every kind).
STEP_NEEDS = {"alignment": None, "methylation": "call_methylation"}


def measured_steps(steps: Sequence[str], kind: str) -> list[str]:
    """The steps of `compare.steps` a sample of an input kind can be measured in: methylation
    only for kinds that call it (a short-read sample is compared in its alignment only)."""
    input_kind = KINDS[kind]
    return [s for s in steps if STEP_NEEDS[s] is None or input_kind.runs(STEP_NEEDS[s])]


def compared_sample(settings: Mapping[str, Any], samples: Mapping[str, Sample]) -> Sample:
    """The sample the comparison benchmarks (settings: config compare:): compare.sample, else
    the first sample. InputError, naming the key, when it is no sample, when its kind runs none
    of compare.steps, or when its raw signal cannot be read in one of compare.io_modes (POD5,
    BLOW5: only a mode reading BLOW5)."""
    name = settings["sample"] or next(iter(samples), "")
    if name not in samples:
        raise InputError(
            f"compare.sample: {name!r} is not a sample (samples: {', '.join(samples) or 'none'})"
        )
    sample = samples[name]
    steps = measured_steps(settings["steps"], sample.kind)
    if not steps:
        raise InputError(
            f"compare.steps: sample '{name}' ({sample.kind} reads) runs none of "
            f"{', '.join(settings['steps'])}; add alignment"
        )
    fast5_modes = modes_reading("fast5", settings["io_modes"])
    if "methylation" in steps and sample.signal_format != "fast5" and fast5_modes:
        raise InputError(
            f"compare.io_modes: sample '{name}' has {sample.signal_format.upper()} raw signal, "
            f"read in I/O mode {', '.join(modes_reading('blow5'))} only; remove "
            f"{', '.join(fast5_modes)}"
        )
    return sample
