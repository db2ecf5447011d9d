"""Rule split_reads / split_paired_reads: deal the sample's reads round-robin into the alignment
shards; short reads (and R2 with them, in step) in consecutive shares of whole bwa batches."""

from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.execution.shards import split_fastx, split_short_reads

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
# Short reads: bwa's batch size (numapore.inputs.kinds: the kind's, or config
# short_reads.bwa_batch_bases) from the rule; kinds without batches are dealt round-robin.
if not smk.params.batch:
    counts = split_fastx(Path(smk.input[0]), [Path(p) for p in smk.output])
    print(f"reads per shard: {counts}")
else:
    paired = "reads2" in smk.input.keys()
    counts = split_short_reads(
        Path(smk.input[0]),
        Path(smk.input.reads2) if paired else None,
        [Path(p) for p in (smk.output.reads if paired else smk.output)],
        [Path(p) for p in smk.output.reads2] if paired else None,
        smk.params.batch,
    )
    print(f"{'pairs' if paired else 'reads'} per shard: {counts}")
