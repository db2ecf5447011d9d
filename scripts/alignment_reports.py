"""Rule alignment_reports: samtools flagstat (text) and stats of the sample's BAM, side by
side, each complete or absent (numapore.execution.shards.start_index_and_reports)."""

import sys
from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.execution.shards import REPORTS_BESIDE, start_index_and_reports

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
outputs = {key: Path(smk.output[key]) for key in REPORTS_BESIDE}
# Threads 0 (the rule holds no core beside a later step): samtools uses one thread of its own.
start_index_and_reports(Path(smk.input[0]), outputs, max(1, smk.threads), sys.stderr)()
