"""Rule region_entropy: a region set's table of `numapore entropy --regions` (modkit entropy's
values) per sample, haplotype and group (numapore.modbam.regions), complete or absent; each
command in the log, empty said."""

from numapore.base.rulelog import redirect_to_log
from numapore.modbam.regions import write_entropy

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
write_entropy(
    smk.params.entities,
    str(smk.input.bed),
    smk.wildcards.motif,
    smk.params.combine_strands,
    str(smk.output[0]),
    smk.wildcards.regionset,
)
