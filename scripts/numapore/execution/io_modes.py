"""The I/O modes in which nanopolish reads the raw signal, in one registry: which mode a run has
(the host file's io_mode, or --config io_mode), what each needs (the signal format nanopolish
reads, a conversion to BLOW5, samples whose signal it can read, settings nanopolish accepts)
and how the methylation step runs under it (one process, or a pool of readers). The schemas'
I/O mode enums are checked against it (tests/test_decisions.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from numapore.base.errors import InputError
from numapore.inputs.sheet import Sample


@dataclass(frozen=True)
class IoMode:
    """One I/O mode."""

    name: str
    does: str  # what it does, in a phrase
    # The files nanopolish reads each read's signal from: the FAST5 inputs ("fast5"), or a
    # BLOW5 converted from them or from POD5, or given ("blow5").
    signal_format: str
    # nanopolish runs as a pool of processes (the host's io_processes) on shards of the reads,
    # each with its own HDF5 library, rather than as one process.
    reader_pool: bool = False

    @property
    def converts_signal(self) -> bool:
        """Whether the signal becomes a BLOW5 (conversion, index, rejected listing) first."""
        return self.signal_format == "blow5"

    def nanopolish_processes(self, io_processes: int) -> int:
        """The nanopolish processes of one methylation job."""
        return io_processes if self.reader_pool else 1


IO_MODES = {
    mode.name: mode
    for mode in (
        IoMode("fast5", "nanopolish reads the FAST5 files, one process", "fast5"),
        IoMode(
            "fast5-pool",
            "nanopolish reads the FAST5 files, a pool of processes",
            "fast5",
            reader_pool=True,
        ),
        IoMode("slow5", "the signal converted to one BLOW5 first, which nanopolish reads", "blow5"),
    )
}
NAMES = tuple(IO_MODES)


def io_mode(name: str) -> IoMode:
    """The registry's entry of an I/O mode; ValueError naming the known ones."""
    if name not in IO_MODES:
        raise ValueError(f"unknown I/O mode {name!r}; expected one of {', '.join(NAMES)}")
    return IO_MODES[name]


def modes_reading(signal_format: str, names: Iterable[str] = NAMES) -> list[str]:
    """The I/O modes among names in which nanopolish reads the signal from signal_format."""
    return [name for name in names if io_mode(name).signal_format == signal_format]


def check_run(name: str, samples: Iterable[Sample], config: dict[str, Any], host_file: str) -> None:
    """Before any job starts: InputError when a sample's raw signal cannot be read in the I/O
    mode (POD5 and BLOW5 inputs: only from a BLOW5), ValueError when the BLOW5 settings are
    ones nanopolish cannot read."""
    mode = io_mode(name)
    if mode.converts_signal:
        # Imported here: the signal module loads numpy and the compiled encoder, which the
        # steps that import this registry (align, compare) do not otherwise need in their env.
        from numapore.signal.slow5 import check_nanopolish_compatible

        check_nanopolish_compatible(config["slow5"]["signal_compression"])
    for sample in samples:
        readable = sample.signal_format == mode.signal_format or mode.converts_signal
        if sample.input_kind.runs("raw_signal") and not readable:
            blow5 = ", ".join(modes_reading("blow5"))
            raise InputError(
                f"sample '{sample.name}': its raw signal is {sample.signal_format.upper()}, which "
                f"needs I/O mode {blow5}, but host file {host_file} has io_mode: {name} (a "
                f"{mode.signal_format.upper()} mode); set io_mode: {blow5} in the host file"
            )
