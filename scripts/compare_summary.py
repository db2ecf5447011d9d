"""Rule compare_summary: the summary table of every cell, from the cells' raw files only."""

from pathlib import Path

from numapore.compare.measure import cell_rows
from numapore.compare.summary import summarise, write_tsv
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
rows = cell_rows(smk.input.records, smk.input.times, smk.input.benchmarks)
write_tsv(summarise(rows), Path(smk.output[0]))
print(f"{len(rows)} cells -> {smk.output[0]}")
