"""Rule compare_plots: PNG plots of the summary table."""

from pathlib import Path

from numapore.compare.summary import read_tsv
from numapore.report.comparison_plots import io_modes, time_vs_threads, utilisation_core_hours
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
rows = read_tsv(Path(smk.input[0]))
time_vs_threads(rows, Path(smk.output.time))
utilisation_core_hours(rows, Path(smk.output.cost))
io_modes(rows, Path(smk.output.io))
