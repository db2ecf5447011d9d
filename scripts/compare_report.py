"""Rule compare_report: the comparison as Markdown, and the recommended host-file fragment."""

from pathlib import Path

from numapore.compare.recommend import recommendation
from numapore.report.comparison import identical_note, reads_advice, report_markdown
from numapore.compare.subsample import count_reads
from numapore.compare.summary import read_tsv
from numapore.base.atomic import atomic_outputs
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
rows = read_tsv(Path(smk.input.summary))
advice = recommendation(rows, smk.params.host)
# How many reads the cells ran on (counted only when a cell was too short: sizing advice).
cells_reads = count_reads(Path(smk.input.reads)) if any(r["too_short"] for r in rows) else 0
notes = "\n".join(n for n in (identical_note(rows), reads_advice(rows, cells_reads)) if n)
text = report_markdown(rows, advice, smk.params.sample, smk.params.reads, smk.params.host, notes)
with atomic_outputs([smk.output.report, smk.output.host]) as (report, host):
    report.write_text(text)
    host.write_text(advice)
print(advice)
