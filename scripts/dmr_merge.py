"""Rule dmr_merge: a DMR contrast's DSS tables of every contig group, in order, as the per-site
table and the DMR BED, bgzipped and tabix-indexed (numapore.methylation.dmr)."""

from numapore.base.atomic import atomic_outputs
from numapore.base.rulelog import redirect_to_log
from numapore.methylation.bgzf import write_indexed_bed
from numapore.methylation.dmr import dmr_lines, site_lines

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
contrast = smk.params.contrast
outputs = [smk.output.sites, smk.output.sites_tbi, smk.output.dmrs, smk.output.dmrs_tbi]
with atomic_outputs(outputs) as (sites, _sites_tbi, dmrs, _dmrs_tbi):
    # each .gz is written with its index beside it (<temporary name>.tbi, the second path)
    site_text = site_lines(list(smk.input.sites))
    write_indexed_bed(sites, [line.encode() for line in site_text])
    dmr_text = dmr_lines(list(smk.input.dmrs), contrast.label1, contrast.label2)
    write_indexed_bed(dmrs, [line.encode() for line in dmr_text])
print(f"{contrast.name}: {len(site_text) - 1} sites tested, {len(dmr_text) - 1} DMRs")
