"""Rules simulate_reads and simulate_modbam_reads: simulate a sample's reads (raw signal and
basecalls, or an unaligned modBAM) and their methylation truth."""

from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.simulate.read_model import SimConfig
from numapore.simulate.reads import parse_region, simulate

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
    formats=tuple(smk.params.formats),
    mod_sharpness=s["mod_sharpness"],
    mod_missing=s["mod_missing"],
    mod_mode=s["mod_mode"],
    mod_codes=s["mod_codes"],
    truth_seed=s["truth_seed"],
    group_regions=s["group_regions"],
    asm_regions=s["asm_regions"],
    truth_length=s["truth_length"],
    truth_difference=s["truth_difference"],
    group_differs=s["group_differs"],
    haplotagged=s["haplotagged"],
)
out = Path(smk.output.reads).parent
summary = simulate(Path(smk.input[0]), out, cfg, processes=smk.threads)
print(summary)
