"""Rule split_alignments: split the sample's BAM by read name into methylation shards."""

from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.execution.shards import split_bam

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
counts = split_bam(Path(smk.input.bam), [Path(p) for p in smk.output])
print(f"alignments per shard: {counts}")
