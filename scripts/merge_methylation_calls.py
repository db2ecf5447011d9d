"""Rule merge_methylation_calls: concatenate per-shard call tables in shard order."""

from pathlib import Path

from numapore.run.rulelog import redirect_to_log
from numapore.execution.shards import concat_tables, link_or_copy

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
inputs = [Path(p) for p in smk.input]
if len(inputs) == 1:
    link_or_copy(inputs[0], Path(smk.output[0]))
else:
    print(f"{concat_tables(inputs, Path(smk.output[0]))} calls from {len(inputs)} shards")
