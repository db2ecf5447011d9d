"""Rule region_stats: a region set's table of `numapore stats` (modkit stats' values) per sample,
haplotype and group (numapore.modbam.regions), complete or absent; empty said."""

from numapore.base.rulelog import redirect_to_log
from numapore.modbam.regions import write_stats

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
write_stats(smk.params.entities, str(smk.input.bed), str(smk.output[0]), smk.wildcards.regionset)
