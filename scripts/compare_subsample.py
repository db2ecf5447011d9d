"""Rules compare_subsample_reads / _pairs / _alignments: the first N reads (or pairs, mates kept
together) of the compared sample, or their alignments."""

from pathlib import Path

from numapore.base.atomic import atomic_outputs
from numapore.compare.subsample import subsample_alignments, subsample_pairs, subsample_reads
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
outputs = [Path(p) for p in smk.output]
with atomic_outputs(outputs) as temps:
    if smk.rule == "compare_subsample_reads":
        names = subsample_reads(Path(smk.input[0]), temps[0], smk.params.reads)
        print(f"{len(names)} reads (compare.reads: {smk.params.reads}) -> {outputs[0]}")
    elif smk.rule == "compare_subsample_pairs":
        reads = [Path(smk.input.reads), Path(smk.input.reads2)]
        pairs = subsample_pairs(*reads, *temps, smk.params.reads)
        print(f"{pairs} pairs (compare.reads: {smk.params.reads}) -> {outputs[0]}, {outputs[1]}")
    else:
        count = subsample_alignments(Path(smk.input.bam), Path(smk.input.reads), temps[0])
        print(f"{count} alignments of the reads in {smk.input.reads} -> {outputs[0]}")
