"""Rule split_alignments: split the sample's BAM by read name into methylation shards."""

from pathlib import Path

import pysam

from numapore.rulelog import redirect_to_log
from numapore.shards import split_bam

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
outputs = [Path(p) for p in smk.output]
counts = split_bam(Path(smk.input.bam), outputs)
for path in outputs:
    pysam.index(str(path))
print(f"alignments per shard: {counts}")
