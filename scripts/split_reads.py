"""Rule split_reads: deal the sample's reads round-robin into the alignment shards."""

from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.execution.shards import split_fastx

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
counts = split_fastx(Path(smk.input[0]), [Path(p) for p in smk.output])
print(f"reads per shard: {counts}")
