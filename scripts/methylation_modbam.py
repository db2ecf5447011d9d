"""Rule methylation_modbam: the alignments with MM/ML tags from one motif's calls, sorted and
indexed (the index renamed into place before the BAM: both complete or absent)."""

import subprocess
import sys
from pathlib import Path

from numapore.base.atomic import atomic_outputs, scratch_dir
from numapore.methylation.motifs import MOTIFS
from numapore.nanopolish.modbam import tag_alignments
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
output = [smk.output.bam, smk.output.bai]
with scratch_dir(smk.output.bam) as scratch, atomic_outputs(output) as (bam, bai):
    # The tagged alignments go to samtools sort through a pipe: no unsorted copy on disk (its
    # blocks are stored, not deflated, for sort to read straight back). --no-PG: the header
    # stays the aligner's, as every other field of the alignments.
    sort = ["samtools", "sort", "--no-PG", "-@", str(smk.threads), "-T", str(scratch / "sort")]
    sorting = subprocess.Popen([*sort, "-o", str(bam), "-"], stdin=subprocess.PIPE)
    try:
        stats = tag_alignments(
            Path(smk.input.bam),
            Path(smk.input.calls),
            MOTIFS[smk.wildcards.motif],
            Path(f"/dev/fd/{sorting.stdin.fileno()}"),
            scratch,
        )
    except BaseException:
        if sorting.poll() not in (None, 0):  # sort failed first (its message is in the log)
            sys.exit(f"numapore: samtools sort failed ({sorting.returncode}) sorting the modBAM")
        sorting.kill()
        raise
    finally:
        sorting.stdin.close()  # the end of the alignments for sort
        code = sorting.wait()
    if code:
        sys.exit(f"numapore: samtools sort failed ({code}) sorting the modBAM")
    subprocess.run(["samtools", "index", "-@", str(smk.threads), str(bam), str(bai)], check=True)
print(stats)
