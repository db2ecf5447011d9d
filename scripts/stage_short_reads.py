"""Rule stage_short_reads / stage_paired_reads: check a short sample's reads (and R2: as many
records, mates in the same order), then link them under results/ or write tidied copies."""

import sys
from pathlib import Path

from numapore.base.errors import InputError
from numapore.base.rulelog import redirect_to_log
from numapore.inputs.short_reads import stage_short_reads

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
paired = "reads2" in smk.output.keys()
try:
    print(
        stage_short_reads(
            Path(smk.input.reads), Path(smk.output.reads), smk.wildcards.fmt,
            Path(smk.input.reads2) if paired else None,
            Path(smk.output.reads2) if paired else None,
        )
    )  # fmt: skip
except InputError as err:  # the file, the record and the reason; no traceback
    sys.exit(f"numapore: sample '{smk.wildcards.sample}': {err}")
