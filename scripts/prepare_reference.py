"""Rule prepare_reference: check the reference FASTA, place it under results/ and faidx it."""

import sys
from pathlib import Path

from numapore.inputs.reference import prepare_reference
from numapore.base.rulelog import redirect_to_log
from numapore.inputs.sheet import InputError

redirect_to_log(snakemake)  # noqa: F821 (snakemake is injected by the script directive)
try:
    prepare_reference(Path(snakemake.input[0]), Path(snakemake.output.fasta))  # noqa: F821
except InputError as err:  # duplicate or missing contig names: the reason, not a traceback
    sys.exit(f"numapore: {err}")
