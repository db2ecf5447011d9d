"""Rule report_dmr: a DMR contrast's figure (difference along the genome, the top DMRs with each
sample's per-site values) and table of its top DMRs (numapore.report.dmr)."""

from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.report.dmr import dmr_figure

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
dmr_figure(
    smk.params.contrast,
    smk.input.dmrs,
    smk.input.sites,
    smk.params.code,
    smk.params.top,
    Path(smk.output.png),
    Path(smk.output.table),
    Path(smk.output.data),
)
