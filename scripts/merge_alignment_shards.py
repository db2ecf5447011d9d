"""Rule merge_alignment_shards: merge sorted BAM shards into the sample's BAM, then index it,
write samtools flagstat and stats, and check the alignment (reads in, primary alignments mapped;
fail when nothing mapped or when the reads file repeats a read id): one job instead of five."""

import json
import sys
from pathlib import Path

from numapore.execution.shards import merge_bams, start_index_and_reports
from numapore.run.atomic import atomic_output
from numapore.run.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
bam = Path(smk.output.bam)
merge_bams([Path(p) for p in smk.input.shards], bam, smk.threads, sys.stderr)
reports = {key: Path(smk.output[key]) for key in ("bai", "flagstat", "flagstat_text", "stats")}
# The BAM's path as the rule names it (relative): samtools stats records its command line.
reports_done = start_index_and_reports(bam, reports, smk.threads, sys.stderr)
# Imported while samtools runs (polars takes a few tenths of a second to load).
from numapore.run.accounting import AccountingError, alignment_summary  # noqa: E402

reports_done()
flagstat = json.loads(reports["flagstat"].read_text())
sample, aligner = smk.wildcards.sample, smk.wildcards.aligner
try:
    summary = alignment_summary(flagstat, smk.input.reads, sample, aligner, smk.params.reference)
except AccountingError as err:
    sys.exit(f"numapore: {err}")
with atomic_output(smk.output.summary) as tmp:
    tmp.write_text(summary)
