"""Rule pileup: a modBAM's calls piled up into bedMethyl (numapore pileup, modkit's semantics),
bgzipped and indexed; the equivalent modkit command goes to the log."""

import sys
from pathlib import Path

from numapore.base.atomic import atomic_outputs
from numapore.base.rulelog import redirect_to_log
from numapore.methylation import pileup_cli
from numapore.methylation.bgzf import write_indexed_bed
from numapore.methylation.pileup_settings import modkit_command, pileup_arguments

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
arguments = pileup_arguments(smk.params.settings, str(smk.input.reference), smk.threads)
plain = str(Path(smk.output.bed).with_suffix(""))
print(f"equivalent modkit command: {modkit_command(smk.input.bam, plain, arguments)}")
with atomic_outputs([smk.output.bed, smk.output.tbi]) as (bed_gz, _tbi):
    # bed_gz is written with its index bed_gz.tbi, which is _tbi (temporary names keep the
    # final ones' suffixes); the text is a temporary file beside them.
    text = bed_gz.with_name(bed_gz.name + ".bed")
    try:
        status = pileup_cli.main([smk.input.bam, str(text), *arguments])
        if status:
            sys.exit(status)  # the pileup said why, on the log
        with open(text, "rb") as handle:
            write_indexed_bed(bed_gz, iter(lambda: handle.read(4 << 20), b""))
        with open(text, "rb") as handle:
            rows = sum(1 for _ in handle)
    finally:
        text.unlink(missing_ok=True)
print(f"{rows} bedMethyl rows")
if rows == 0:
    print(f"numapore: {smk.output.bed} is empty: no position has a call that passed")
