"""Rule calls_qc: the QC of the calls a pileup read (numapore.modbam.qc): `numapore summary`'s
and `numapore sample-probs`'s tables of its modBAM at the pileup's own threshold, and each
code's calls passing it."""

from numapore.base.rulelog import redirect_to_log
from numapore.modbam.qc import calls_qc

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
outputs = {k: smk.output[k] for k in ("summary", "tsv", "thresholds", "histogram", "passing")}
rows = calls_qc(smk.input.bam, smk.input.thresholds, outputs, smk.params.setting)
for row in rows:
    print(f"{row[0]} {row[1]}: {row[4]} of {row[5]} calls pass {row[2]} ({row[6]})")
