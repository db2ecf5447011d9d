"""Rule multiqc_dmr: MultiQC's line per DMR contrast (DMRs found, CpGs in them)."""

from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.report.dmr import multiqc_dmr

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
multiqc_dmr(smk.params.contrasts, list(smk.input), Path(smk.output[0]))
