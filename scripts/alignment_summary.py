"""Rule alignment_summary: reads in, primary alignments mapped; fail when nothing mapped."""

import json
import sys
from pathlib import Path

import pysam

from numapore.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
with open(smk.input.flagstat) as handle:
    mapped = json.load(handle)["QC-passed reads"]["primary mapped"]
with pysam.FastxFile(str(Path(smk.input.reads))) as fastx:
    reads_in = sum(1 for _ in fastx)
if mapped == 0:
    sys.exit(
        f"numapore: sample '{smk.wildcards.sample}': none of its {reads_in} reads mapped to the "
        f"reference {smk.params.reference} with {smk.wildcards.aligner}: is it the right reference "
        "(do its contigs include the sequenced genome)?"
    )
with open(smk.output[0], "w") as out:
    out.write("sample\taligner\treads_in\tprimary_mapped\tprimary_mapped_fraction\n")
    out.write(f"{smk.wildcards.sample}\t{smk.wildcards.aligner}\t{reads_in}\t{mapped}\t")
    out.write(f"{mapped / reads_in:.4f}\n")
