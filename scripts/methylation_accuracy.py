"""Rule methylation_accuracy: per-call AUC, called fraction and per-site correlation vs truth."""

from dataclasses import asdict
from pathlib import Path

from numapore.methylation.accuracy import evaluate
from numapore.base.atomic import atomic_output
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
result = asdict(
    evaluate(Path(smk.input.calls), Path(smk.input.truth), threshold=smk.params.threshold)
)
with atomic_output(smk.output[0]) as tmp, open(tmp, "w") as out:
    out.write("\t".join(result) + "\n")
    out.write("\t".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in result.values()))
    out.write("\n")
print(result)
