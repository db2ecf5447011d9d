"""Rule compare_plots: PNG plots of the summary table, and what they show (plots.data.json)."""

from pathlib import Path

from numapore.compare.summary import read_tsv
from numapore.report.comparison_plots import (
    io_modes,
    time_vs_threads,
    utilisation_core_hours,
    write_plots_data,
)
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
rows = read_tsv(Path(smk.input[0]))
panels = time_vs_threads(rows, Path(smk.output.time))
panels += utilisation_core_hours(rows, Path(smk.output.cost))
panels += io_modes(rows, Path(smk.output.io))
write_plots_data(panels, Path(smk.output.data))
