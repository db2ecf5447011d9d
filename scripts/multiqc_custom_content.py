"""Rule multiqc_custom_content: numapore's read fates and methylation summaries of every sample
as MultiQC custom content (*_mqc.tsv)."""

from pathlib import Path

from numapore.report.figures import multiqc_custom_content
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
multiqc_custom_content(smk.params.runs, Path(smk.output.accounting), Path(smk.output.methylation))
