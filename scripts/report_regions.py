"""Rule report_regions: a region set's page (its stats and entropy tables) and figure for the
report (numapore.report.regions)."""

from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.report.regions import regions_report

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
outputs = [Path(smk.output[name]) for name in ("png", "table", "data")]
regions_report(smk.wildcards.regionset, smk.input.stats, smk.input.entropy, *outputs)
