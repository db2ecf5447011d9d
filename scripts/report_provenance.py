"""Rule report_provenance: host file, strategy per step, command lines, NUMA policies and tool
versions of one run, as an HTML page."""

from pathlib import Path

from numapore.report.provenance import provenance_page
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
name = f"{smk.wildcards.sample} ({smk.wildcards.aligner})"
provenance_page(
    name,
    smk.params.host,
    smk.params.records,
    Path(smk.output.page),
    Path(smk.output.data),
    overrides=smk.params.get("overrides"),
    pileup_tuning=smk.input.get("pileup_tuning") or None,
)
