"""Rule report_accounting: the read accounting of one run as a plot and an HTML table."""

from pathlib import Path

from numapore.report.figures import accounting_figure
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
name = f"{smk.wildcards.sample} ({smk.wildcards.aligner})"
accounting_figure(
    smk.input.accounting,
    name,
    Path(smk.output.png),
    Path(smk.output.table),
    Path(smk.output.data),
)
