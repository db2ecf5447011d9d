"""Rule report_calls_qc: the report's figure and table of a QC of the calls
(numapore.report.calls_qc)."""

from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.report.calls_qc import calls_qc_report

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
w = smk.wildcards
files = {k: smk.input[k] for k in ("passing", "histogram", "thresholds", "summary")}
name = f"{w.sample} ({w.aligner}, {w.motif})"
out = smk.output
calls_qc_report(files, name, Path(out.png), Path(out.table), Path(out.data))
