"""Rule compare_report: the comparison as Markdown, and the recommended host-file fragment."""

from pathlib import Path

from numapore.run.atomic import atomic_outputs
from numapore.compare.matrix import (
    identical_note,
    pivot_table,
    read_tsv,
    reads_advice,
    recommendation,
    storage_description,
)
from numapore.run.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
rows = read_tsv(Path(smk.input.summary))
advice = recommendation(rows, smk.params.host)
# How many reads the cells ran on (counted only when a cell was too short: sizing advice).
cells_reads = 0
if any(r["too_short"] for r in rows):
    import pysam

    with pysam.FastxFile(smk.input.reads) as fastx:
        cells_reads = sum(1 for _ in fastx)
notes = "\n".join(n for n in (identical_note(rows), reads_advice(rows, cells_reads)) if n)
reads = f"first {smk.params.reads} reads" if smk.params.reads else "all reads"
text = f"""# numapore: strategy comparison on this host

Sample `{smk.params.sample}` ({reads}); base host file `{smk.params.host}`;
{storage_description(rows)}. Seconds are the median over repeats of the tool processes' wall time;
speed-up is against strategy `none` (and I/O mode `fast5`) at the same threads.
Every cell: `results/compare/summary.tsv`.

## Alignment: aligner x strategy

{pivot_table(rows, "alignment")}
## Methylation calling: I/O mode x strategy

{pivot_table(rows, "methylation")}
## What can be compared

{notes or "- Every cell ran long enough to measure, and every strategy ran its own way."}

## Plots

![time vs threads](time_vs_threads.png)
![CPU utilisation and core-hours](utilisation_core_hours.png)
![I/O modes](io_modes.png)

## Recommendation (`recommended-host.yaml`)

```yaml
{advice}```
"""
with atomic_outputs([smk.output.report, smk.output.host]) as (report, host):
    report.write_text(text)
    host.write_text(advice)
print(advice)
