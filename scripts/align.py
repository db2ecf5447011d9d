"""Rule align: the chosen aligner | samtools sort, under the host's alignment strategy."""

from pathlib import Path

from numapore.execution.hosts import load_host_config
from numapore.execution.steps import run_alignment
from numapore.run.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
run_alignment(
    host=load_host_config(smk.params.host),
    aligner=smk.wildcards.aligner,
    index=smk.params.index,
    index_files=[Path(p) for p in smk.input.index],
    reads=Path(smk.input.reads),
    output=Path(smk.output[0]),
    threads=smk.threads,
    record=Path(smk.log.record),
)
