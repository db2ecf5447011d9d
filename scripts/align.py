"""Rule align: the chosen aligner | samtools sort, under the host's alignment strategy."""

import sys
import tempfile
from pathlib import Path

from numapore.launch import layout_step, run_step, write_record
from numapore.numa import startup_check
from numapore.rulelog import redirect_to_log
from numapore.samples import reads_format
from numapore.shards import merge_bams, split_fastx
from numapore.tools import align_command

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
host, topology = startup_check(smk.params.host)  # on the machine the job runs on
reads, output = Path(smk.input.reads), Path(smk.output[0])
index_bytes = sum(Path(p).stat().st_size for p in smk.input.index)
layout = layout_step(host, topology, "alignment", smk.threads, index_bytes)
with tempfile.TemporaryDirectory(prefix=output.name + ".", dir=output.parent) as workdir:
    processes = run_step(
        layout,
        topology,
        lambda src, out, t: align_command(smk.wildcards.aligner, smk.params.index, src, out, t),
        reads,
        output,
        split=split_fastx,
        merge=lambda shards, out: merge_bams(shards, out, smk.threads, sys.stderr),
        workdir=Path(workdir),
        shard_suffixes=("." + reads_format(reads).removesuffix(".gz"), ".bam"),
    )
    write_record(Path(smk.log.record), layout, processes)
