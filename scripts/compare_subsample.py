"""Rules compare_subsample_reads / _alignments: the first N reads of the compared sample, or
their alignments."""

from pathlib import Path

from numapore.base.atomic import atomic_output
from numapore.compare.subsample import subsample_alignments, subsample_reads
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
output = Path(smk.output[0])
with atomic_output(output) as tmp:
    if smk.rule == "compare_subsample_reads":
        names = subsample_reads(Path(smk.input[0]), tmp, smk.params.reads)
        print(f"{len(names)} reads (compare.reads: {smk.params.reads}) -> {output}")
    else:
        count = subsample_alignments(Path(smk.input.bam), Path(smk.input.reads), tmp)
        print(f"{count} alignments of the reads in {smk.input.reads} -> {output}")
