"""Rule alignment_summary: reads in, primary alignments mapped; fail when nothing mapped or
when the reads file repeats a read id (before nanopolish would call such reads twice)."""

import json
import sys

from numapore.run.accounting import AccountingError, unique_read_ids
from numapore.run.atomic import atomic_output
from numapore.run.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
with open(smk.input.flagstat) as handle:
    mapped = json.load(handle)["QC-passed reads"]["primary mapped"]
try:
    reads_in = len(unique_read_ids(smk.input.reads, smk.wildcards.sample))
except AccountingError as err:
    sys.exit(f"numapore: {err}")
if mapped == 0:
    sys.exit(
        f"numapore: sample '{smk.wildcards.sample}': none of its {reads_in} reads mapped to the "
        f"reference {smk.params.reference} with {smk.wildcards.aligner}: is it the right reference "
        "(do its contigs include the sequenced genome)?"
    )
with atomic_output(smk.output[0]) as tmp, open(tmp, "w") as out:
    out.write("sample\taligner\treads_in\tprimary_mapped\tprimary_mapped_fraction\n")
    out.write(f"{smk.wildcards.sample}\t{smk.wildcards.aligner}\t{reads_in}\t{mapped}\t")
    out.write(f"{mapped / reads_in:.4f}\n")
