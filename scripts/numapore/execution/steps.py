"""The heavy steps as functions: what the align and call_methylation rules run.

Each one takes the host object (numapore.execution.hosts.HostConfig, loaded once by the rule
script), checks its layout against the machine the job runs on, plans the step
(numapore.execution.plan), runs the unchanged tool command (numapore.execution.tools) in every
process (numapore.execution.launch), merges, and writes the record of what ran. The I/O mode and
the pool size come from the workflow (the rule's params), decided once at DAG time. The rule
scripts are thin callers; tests and the comparison's cells call these too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from numapore.execution.hosts import HostConfig, check_host_against_machine
from numapore.execution.aligners import ALIGNERS
from numapore.execution.io_modes import IO_MODES
from numapore.execution.launch import Process, StepRun, run_step, write_record
from numapore.execution.plan import plan_step
from numapore.execution.shards import (
    concat_tables,
    merge_bams,
    split_bam,
    split_fastx,
    split_short_reads,
)
from numapore.execution.tools import align_command, call_methylation_command
from numapore.inputs.kinds import DEFAULT_KIND, KINDS
from numapore.inputs.sheet import reads_format
from numapore.inputs.short_reads import check_read_lengths
from numapore.base.atomic import atomic_output, scratch_dir
from numapore.signal.hdf5plugin import vbz_plugin_env


def host_line(host: HostConfig) -> str:
    """The job log's line naming the host file and the command line's settings over it."""
    given = ", ".join(f"{k}={v}" for k, v in host.overrides.items())
    return f"host file: {host.path or host.name}" + (f" (--config: {given})" if given else "")


def mate_shard(shard: Path) -> Path:
    """The R2 shard beside an R1 shard of a split pair ('in.2.fastq' -> 'in.2.R2.fastq')."""
    return shard.with_name(f"{shard.stem}.R2{shard.suffix}")


def run_alignment(
    host: HostConfig,
    aligner: str,
    index: str,
    index_files: Sequence[Path],
    reads: Path,
    output: Path,
    threads: int,
    record: Path,
    kind: str = DEFAULT_KIND,
    reads2: Path | None = None,
    sample: str = "sample",
    mark_duplicates: bool = False,
    pool: int = 1,
    minimap2_preset: str = "",
    batch: int = 0,
    keep: Callable[[], None] | None = None,
) -> StepRun:
    """Align reads of an input kind (reads2: the R2 mates of pairs; minimap2_preset: minimap2's
    -x where the kind lets a user choose it) into a sorted BAM under the host's alignment
    strategy. Short reads are split into consecutive shares of whole pairs and
    whole bwa batches (numapore.execution.shards.split_short_reads), other reads round-robin.
    pool > 1: that many unbound processes on shards, split and merged as instances are (the
    tests run the instances' split on a one-node machine so). batch: bwa's -K (config
    short_reads.bwa_batch_bases; 0: the kind's). keep: a check run once the BAM is written,
    before it gets its name (its error leaves nothing under that name)."""
    topology = check_host_against_machine(host)
    print(host_line(host), file=sys.stderr)
    longest = ALIGNERS[aligner].max_read_length
    if longest:  # before the index is loaded: one line naming the read
        for path in (reads, reads2):
            if path is not None:
                check_read_lengths(path, longest, aligner)
    index_bytes = sum(Path(p).stat().st_size for p in index_files)
    plan = plan_step(host, topology, "alignment", threads, index_bytes, pool, aligner)
    input_kind = KINDS[kind]
    batch = batch or input_kind.batch_bases

    def tool(src: Path, out: Path, t: int) -> str:
        """The unchanged aligner command for one shard (its R2 shard beside it)."""
        second = None if reads2 is None else (reads2 if src == reads else mate_shard(src))
        return align_command(
            aligner,
            index,
            src,
            out,
            t,
            kind,
            second,
            sample,
            mark_duplicates,
            minimap2_preset,
            batch,
        )

    def split(src: Path, shards: Sequence[Path]) -> object:
        """The reads into one shard per process."""
        if not batch:  # no batches to keep whole
            return split_fastx(src, shards)
        mates = None if reads2 is None else [mate_shard(p) for p in shards]
        counts = split_short_reads(src, reads2, shards, mates, batch)
        print(f"{'pairs' if mates else 'reads'} per process: {counts}", file=sys.stderr)
        return counts

    with scratch_dir(output) as workdir, atomic_output(output) as partial:
        run = run_step(
            plan,
            tool,
            reads,
            partial,
            split=split,
            merge=lambda shards, out: merge_bams(shards, out, threads, sys.stderr),
            workdir=Path(workdir),
            shard_suffixes=("." + reads_format(reads).removesuffix(".gz"), ".bam"),
        )
        write_record(record, plan, run, host.path, overrides=host.overrides)
        if keep is not None:
            keep()
    return run


def reads_to_call(bam: Path, min_mapq: int) -> int:
    """Reads nanopolish calls methylation for: primary alignments with MAPQ >= min_mapq."""
    import pysam

    with pysam.AlignmentFile(str(bam)) as handle:
        return sum(
            1
            for r in handle.fetch(until_eof=True)
            if not (r.is_unmapped or r.is_secondary or r.is_supplementary)
            and r.mapping_quality >= min_mapq
        )


class CalledReads:
    """Progress of nanopolish call-methylation: the reads with calls in its output tables so
    far, out of the reads it calls (read incrementally, whole lines only)."""

    def __init__(self, total: int) -> None:
        """Nothing read yet; total: the reads to call."""
        self.total = total
        self.reads: set[bytes] = set()
        self.offsets: dict[Path, int] = {}

    def __call__(self, processes: Sequence[Process]) -> str:
        """Read what the processes wrote since the last call; the progress line."""
        for p in processes:
            path = Path(p.output)
            if not path.exists():
                continue
            with open(path, "rb") as handle:
                handle.seek(self.offsets.get(path, 0))
                chunk = handle.read()
            whole = chunk[: chunk.rfind(b"\n") + 1]
            self.offsets[path] = self.offsets.get(path, 0) + len(whole)
            for line in whole.splitlines():
                fields = line.split(b"\t", 5)  # up to read_name: little CPU taken from nanopolish
                if len(fields) > 4 and fields[0] != b"chromosome":
                    self.reads.add(fields[4])
        share = 100 * len(self.reads) / self.total if self.total else 100.0
        return f"nanopolish: {len(self.reads)} of {self.total} reads called so far ({share:.0f}%)"


def run_methylation(
    host: HostConfig,
    reads: Path,
    bam: Path,
    genome: Path,
    output: Path,
    threads: int,
    min_mapq: int,
    io_mode: str,
    io_processes: int,
    record: Path,
    motif: str = "cpg",
) -> StepRun:
    """Call methylation of one motif per read under the host's strategy and the I/O mode the
    workflow resolved (io_mode, io_processes: the fast5-pool size)."""
    topology = check_host_against_machine(host)
    print(host_line(host), file=sys.stderr)
    # fast5-pool: K nanopolish processes on K shards of the reads, each with its own HDF5.
    pool = IO_MODES[io_mode].nanopolish_processes(io_processes)
    plan = plan_step(host, topology, "methylation", threads, genome.stat().st_size, pool)
    print(f"I/O mode: {io_mode}", file=sys.stderr)

    def tool(shard_bam: Path, shard_out: Path, t: int) -> str:
        """The unchanged nanopolish command for one shard."""
        return call_methylation_command(reads, shard_bam, genome, shard_out, t, min_mapq, motif)

    # nanopolish reads VBZ-compressed FAST5 only with the plugin on HDF5_PLUGIN_PATH.
    with (
        vbz_plugin_env(sys.stderr),
        scratch_dir(output) as workdir,
        atomic_output(output) as partial,
    ):
        run = run_step(
            plan,
            tool,
            bam,
            partial,
            split=lambda src, shards: split_bam(src, shards, index=True),
            merge=concat_tables,
            workdir=Path(workdir),
            shard_suffixes=(".bam", ".tsv"),
            # nanopolish 0.14's --progress prints nothing when it reads a BAM: count its output.
            progress=CalledReads(reads_to_call(bam, min_mapq)),
        )
        write_record(record, plan, run, host.path, io_mode, host.overrides)
    return run
