"""Rule report_alignment_qc: reads mapped, read lengths, identity and coverage of one run."""

from pathlib import Path

from numapore.report.figures import alignment_qc
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
name = f"{smk.wildcards.sample} ({smk.wildcards.aligner})"
alignment_qc(smk.input.stats, smk.input.bam, name, Path(smk.output.png), Path(smk.output.data))
