"""Rule merge_methylation_calls: concatenate per-shard call tables in shard order (scattered
calling only: one shard's job writes the sample's table itself)."""

from pathlib import Path

from numapore.execution.shards import concat_tables
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
inputs = [Path(p) for p in smk.input]
print(f"{concat_tables(inputs, Path(smk.output[0]))} calls from {len(inputs)} shards")
