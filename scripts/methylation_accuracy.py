"""Rule methylation_accuracy: per-call AUC, called fraction and per-site correlation vs truth
(of nanopolish's calls, or of a modbam sample's realigned basecaller calls and bedMethyl)."""

from dataclasses import asdict
from pathlib import Path

from numapore.methylation.accuracy import evaluate, evaluate_modbam
from numapore.base.atomic import atomic_output
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
if "calls" in smk.input.keys():  # nanopolish's calls (signal samples)
    accuracy = evaluate(
        Path(smk.input.calls), Path(smk.input.truth), threshold=smk.params.threshold
    )
else:  # the basecaller's calls (modbam samples): the aligned modBAM and its bedMethyl
    accuracy = evaluate_modbam(
        Path(smk.input.modbam), Path(smk.input.bedmethyl), Path(smk.input.truth)
    )
result = asdict(accuracy)
with atomic_output(smk.output[0]) as tmp, open(tmp, "w") as out:
    out.write("\t".join(result) + "\n")
    out.write("\t".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in result.values()))
    out.write("\n")
print(result)
