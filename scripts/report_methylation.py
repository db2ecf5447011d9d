"""Rule report_methylation: per-site fraction modified, calls per read, call probabilities and
modification along the reference of one run, from its bedMethyl and modBAM (any source of
calls)."""

from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.report.figures import methylation_overview

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
name = f"{smk.wildcards.sample} ({smk.wildcards.aligner})"
methylation_overview(
    smk.input.bedmethyl, smk.input.modbam, name, Path(smk.output.png), Path(smk.output.data)
)
