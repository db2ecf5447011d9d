"""Rule call_methylation: nanopolish call-methylation under the host's strategy and I/O mode."""

import tempfile
from pathlib import Path

from numapore.launch import layout_step, run_step, write_record
from numapore.numa import startup_check
from numapore.rulelog import redirect_to_log
from numapore.shards import concat_tables, split_bam
from numapore.tools import call_methylation_command

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
host, topology = startup_check(smk.params.host)  # on the machine the job runs on
bam, output = Path(smk.input.bam), Path(smk.output[0])
# fast5-pool: K nanopolish processes on K shards of the reads, each with its own HDF5 library.
pool = smk.params.io_processes if smk.params.io_mode == "fast5-pool" else 1
genome_bytes = Path(smk.input.genome).stat().st_size
layout = layout_step(host, topology, "methylation", smk.threads, genome_bytes, pool=pool)
print(f"I/O mode: {smk.params.io_mode}")


def tool(shard_bam: Path, shard_out: Path, threads: int) -> str:
    """The unchanged nanopolish command for one shard."""
    return call_methylation_command(
        Path(smk.input.reads), shard_bam, Path(smk.input.genome), shard_out, threads,
        smk.params.min_mapq,
    )  # fmt: skip


with tempfile.TemporaryDirectory(prefix=output.name + ".", dir=output.parent) as workdir:
    processes = run_step(
        layout,
        topology,
        tool,
        bam,
        output,
        split=lambda src, shards: split_bam(src, shards, index=True),
        merge=concat_tables,
        workdir=Path(workdir),
        shard_suffixes=(".bam", ".tsv"),
    )
    write_record(Path(smk.log.record), layout, processes)
