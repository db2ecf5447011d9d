"""Rule dmr_score: a contrast's DMRs scored against the simulated truth regions (recall,
precision: numapore.methylation.dmr.score; `numapore dmr-score` by hand)."""

from numapore.base.atomic import atomic_output
from numapore.base.rulelog import redirect_to_log
from numapore.methylation.dmr import score_lines

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
lines = score_lines(smk.input.truth, smk.params.kind, smk.input.dmrs, smk.wildcards.contrast)
with atomic_output(smk.output[0]) as tmp:
    tmp.write_text("".join(lines))
print("".join(lines), end="")
