"""Rule report_accuracy: ROC curve and per-site scatter of a simulated sample's calls."""

from pathlib import Path

from numapore.report.figures import accuracy_figure
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
name = f"{smk.wildcards.sample} ({smk.wildcards.aligner})"
accuracy_figure(
    smk.input.calls,
    smk.input.truth,
    smk.params.threshold,
    name,
    Path(smk.output.png),
    Path(smk.output.data),
)
