"""Rule merge_alignment_shards (a scattered alignment): merge sorted BAM shards into the sample's
BAM, then index it, write its samtools flagstat (JSON), and check the alignment (reads in, primary
alignments mapped; fail when nothing mapped or when the reads file repeats a read id)."""

import sys
from pathlib import Path

from numapore.execution.shards import finish_sample_bam, merge_bams
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
bam = Path(smk.output.bam)
merge_bams([Path(p) for p in smk.input.shards], bam, smk.threads, sys.stderr)
finish_sample_bam(
    bam, {key: Path(path) for key, path in smk.output.items()}, smk.threads, sys.stderr,
    reads=Path(smk.input.counted), sample=smk.wildcards.sample, aligner=smk.wildcards.aligner,
    reference=smk.params.reference, kind=smk.params.kind, paired=smk.params.paired,
    rewrites_sorted_bam=smk.params.rewrites_sorted_bam,
    duplicates=smk.params.duplicates, source=smk.params.reads,
    allow_empty=smk.config["allow_empty_samples"],
)  # fmt: skip
