"""Rule simulate_reads: simulate a sample's raw signal, reads and methylation truth."""

from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.simulate.reads import SimConfig, parse_region, simulate

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
s = smk.params.settings
cfg = SimConfig(
    n_reads=s["reads"],
    seed=s["seed"],
    mean_length=s["mean_length"],
    sd_length=s["sd_length"],
    error_rate=s["error_rate"],
    region=parse_region(s["region"]) if s["region"] else None,
    formats=("fastq", "truth", "multi"),
)
out = Path(smk.output.reads).parent
summary = simulate(Path(smk.input[0]), out, cfg, processes=smk.threads)
print(summary)
