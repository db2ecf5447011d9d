"""Rule merge_alignment_shards: merge sorted BAM shards into the sample's BAM, then index it and
write samtools flagstat and stats (tiny jobs of their own before: one job instead of four)."""

import sys
from pathlib import Path

from numapore.run.rulelog import redirect_to_log
from numapore.execution.shards import index_and_report, merge_bams

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
bam = Path(smk.output.bam)
merge_bams([Path(p) for p in smk.input], bam, smk.threads, sys.stderr)
reports = {key: Path(smk.output[key]) for key in ("bai", "flagstat", "flagstat_text", "stats")}
# The BAM's path as the rule names it (relative): samtools stats records its command line.
index_and_report(bam, reports, smk.threads, sys.stderr)
