"""Rule report_methylation: per-site frequencies, calls per read, LLRs, methylation along the
reference of one run."""

from pathlib import Path

from numapore.report.figures import methylation_overview
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
name = f"{smk.wildcards.sample} ({smk.wildcards.aligner})"
methylation_overview(
    smk.input.calls, smk.input.frequency, name, Path(smk.output.png), Path(smk.output.data)
)
