"""Samples none of whose reads can be used, whose main output would be empty.

The checks stop such a sample where they find it (numapore.base.errors.empty_sample): no read
of the reads file has raw signal (check_reads_have_signal, after nanopolish index), none mapped
(the alignment check, numapore.inputs.readids), no read got a call (the pileup: no_calls_reason).
With allow_empty_samples: true they let it through, and the run's closing lines list it
(closing_lines): read from the sample's outputs, so that a later run that has nothing to do
says it again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from numapore.base.errors import ALLOW_EMPTY, empty_sample
from numapore.base.textfiles import open_maybe_gzip

# The readers of read ids (polars) and of the accounting's inputs (h5py, pysam) are imported by
# the two functions that need them: the workflow imports this module when it starts, every
# Snakemake start and rule script would pay for them (about half a second of CPU).


def no_signal_reason(reads: int, source: str | os.PathLike, signal: str, signal_reads: int) -> str:
    """Why a sample none of whose reads has raw signal is empty: the reads file, the signal."""
    there = f"its {signal_reads} reads have other read ids" if signal_reads else "it holds no read"
    return (
        f"none of its {reads} reads (reads file {source}) has raw signal in {signal} ({there}): "
        "nothing to call methylation on; were these reads basecalled from that signal?"
    )


def no_calls_reason(modbam: str | os.PathLike, motif: str, min_mapq: int | None = None) -> str:
    """Why a sample whose reads got no methylation call has an empty bedMethyl; min_mapq (a
    modBAM of nanopolish's calls): the mapping-quality filter, when no mapped read passed it."""
    if min_mapq is not None:
        qualities = mapped_qualities(modbam)
        if qualities and max(qualities) < min_mapq:
            return (
                f"methylation.min_mapping_quality: {min_mapq} removed every read: none of the "
                f"{len(qualities)} mapped reads of its modBAM {modbam} has a mapping quality of "
                f"{min_mapq} or more (the highest is {max(qualities)}), and nanopolish calls "
                "only those: its bedMethyl would be empty"
            )
    return f"no read of its modBAM {modbam} has a {motif} call: its bedMethyl would be empty"


def mapped_qualities(bam: str | os.PathLike) -> list[int]:
    """The mapping quality of each primary mapped record of a BAM."""
    import pysam

    with pysam.AlignmentFile(str(bam), check_sq=False) as handle:
        return [
            r.mapping_quality
            for r in handle.fetch(until_eof=True)
            if not (r.is_unmapped or r.is_secondary or r.is_supplementary)
        ]


def no_rows_reason(modbam: str | os.PathLike, motif: str, setting: str | None = None) -> str:
    """Why a sample whose calls all fell to the pileup's filters has an empty bedMethyl;
    setting: the filter that removed them, with its value (e.g. pileup.filter_threshold: 1.0)."""
    if setting:
        return (
            f"{setting} removed every {motif} call of its modBAM {modbam}: "
            "its bedMethyl would be empty"
        )
    return (
        f"no {motif} call of its modBAM {modbam} passed the pileup's filters (config pileup:): "
        "its bedMethyl would be empty"
    )


def check_reads_have_signal(
    sample: str,
    reads: str | os.PathLike,
    readdb: str | os.PathLike,
    *,
    source: str | os.PathLike,
    signal: str,
    blow5_index: str | os.PathLike | None = None,
    allowed: bool = False,
) -> str:
    """After nanopolish index: how many of the reads have raw signal (the readdb's FAST5 files,
    or the BLOW5's index in I/O mode slow5); EmptySample when none has, unless allowed."""
    from numapore.inputs.readids import read_id_column
    from numapore.report.accounting import blow5_read_ids, readdb_with_signal

    ids = read_id_column(reads).unique()
    signal_ids = blow5_read_ids(blow5_index) if blow5_index else readdb_with_signal(readdb)
    with_signal = int(ids.is_in(signal_ids.implode()).sum())
    if with_signal == 0:
        reason = no_signal_reason(len(ids), source, signal, len(signal_ids))
        empty_sample(sample, reason, allowed)
    return f"{with_signal} of {len(ids)} reads have raw signal"


@dataclass
class SampleOutputs:
    """What closing_lines reads of one sample: its main output (a bedMethyl, or for a sample
    without methylation its alignment check), the alignment check and the read accounting
    (signal samples), and what the reasons name."""

    sample: str
    main: Path
    alignment: Path
    source: str
    reference: str
    aligner: str
    accounting: Path | None = None
    signal: str = ""
    fates: Path | None = None  # where each read's fate is (the accounting, the staging counts)


def _table(path: Path) -> list[dict[str, str]]:
    """A small TSV's rows as dicts."""
    header, *rows = path.read_text().splitlines()
    return [dict(zip(header.split("\t"), row.split("\t"), strict=False)) for row in rows]


def _is_empty(main: Path) -> bool:
    """Whether a main output holds nothing: a bedMethyl without rows, an alignment check
    with no read mapped."""
    if main.name.endswith(".bedmethyl.gz"):
        with open_maybe_gzip(main, "rb") as handle:
            return not handle.read(1)
    return _table(main)[0]["primary_mapped"] == "0"


def _reason(out: SampleOutputs) -> str:
    """Why the sample's main output is empty: the first step where no read was left."""
    if out.accounting is not None and out.accounting.is_file():
        counts = {(r["stage"], r["what"]): r["reads"] for r in _table(out.accounting)}
        if counts.get(("basecalled", "reads with raw signal")) == "0":
            signal_reads = next(
                int(n)
                for (stage, what), n in counts.items()
                if what == "reads" and stage != "basecalled"
            )
            reads = int(counts[("basecalled", "reads")])
            return no_signal_reason(reads, out.source, out.signal, signal_reads)
    if out.alignment.is_file():
        check = _table(out.alignment)[0]
        if check["primary_mapped"] == "0":
            from numapore.inputs.readids import none_mapped_reason

            reads_in = int(check["reads_in"])
            return none_mapped_reason(reads_in, out.source, out.reference, out.aligner)
    return f"its bedMethyl {out.main} has no rows (each read's fate: {out.fates})"


def closing_lines(runs: list[SampleOutputs]) -> list[str]:
    """The run's closing warnings: one line per sample whose main output is empty (those
    allow_empty_samples let through), with the reason; samples whose outputs are not there
    yet are left out."""
    return [
        f"numapore: warning: sample '{out.sample}' is empty ({ALLOW_EMPTY}): {_reason(out)}"
        for out in runs
        if out.main.is_file() and _is_empty(out.main)
    ]
