"""Rule dmr_counts: a DMR contrast's counts (each sample's or haplotype's valid coverage and
modified calls per site, from its bedMethyl) as DSS reads them, cut into the contig groups of
config scatter.dmr, each in regions DSS tests one at a time under config dmr.max_memory_gb
(numapore.methylation.dmr, dmr_regions)."""

import sys

from numapore.base.atomic import atomic_outputs
from numapore.base.errors import InputError
from numapore.base.rulelog import redirect_to_log
from numapore.methylation.dmr import write_counts

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
contrast = smk.params.contrast
with open(smk.input.fai) as fai:
    contigs = [line.split("\t", 1)[0] for line in fai if line.strip()]
try:
    with atomic_outputs(list(smk.output)) as paths:
        groups = write_counts(contrast, smk.params.code, contigs, [str(p) for p in paths],
                              smk.params.max_memory_gb, print)  # fmt: skip
except InputError as err:  # one line, before DSS runs
    sys.exit(f"numapore: {err}")
for i, members in enumerate(groups, 1):
    print(f"contig group {i}: {len(members)} contigs {', '.join(members[:5])}"
          + (" ..." if len(members) > 5 else ""))  # fmt: skip
