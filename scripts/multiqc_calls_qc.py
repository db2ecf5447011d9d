"""Rule multiqc_calls_qc: MultiQC's QC of the calls over every sample (a table, and the call
probabilities as a line plot)."""

from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.report.calls_qc import multiqc_calls_qc

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
multiqc_calls_qc(smk.params.runs, Path(smk.output.table), Path(smk.output.plot))
