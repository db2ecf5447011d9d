"""Rule methylation_modbam: the alignments with MM/ML tags from one motif's calls, sorted and
indexed (the index renamed into place before the BAM: both complete or absent)."""

import subprocess
from pathlib import Path

from numapore.run.atomic import atomic_outputs, scratch_dir
from numapore.methylation.motifs import MOTIFS
from numapore.methylation.modbam import tag_alignments
from numapore.run.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
output = [smk.output.bam, smk.output.bai]
with scratch_dir(smk.output.bam) as scratch, atomic_outputs(output) as (bam, bai):
    unsorted = scratch / "unsorted.bam"
    stats = tag_alignments(
        Path(smk.input.bam), Path(smk.input.calls), MOTIFS[smk.wildcards.motif], unsorted, scratch
    )
    # --no-PG: the header stays the aligner's, as every other field of the alignments.
    sort = ["samtools", "sort", "--no-PG", "-@", str(smk.threads), "-T", str(scratch / "sort")]
    subprocess.run([*sort, "-o", str(bam), str(unsorted)], check=True)
    subprocess.run(["samtools", "index", "-@", str(smk.threads), str(bam), str(bai)], check=True)
print(stats)
