"""Rule prepare_reference: check the reference FASTA, place it under results/ and faidx it."""

from pathlib import Path

from numapore.reference import prepare_reference
from numapore.rulelog import redirect_to_log

redirect_to_log(snakemake)  # noqa: F821 (snakemake is injected by the script directive)
prepare_reference(Path(snakemake.input[0]), Path(snakemake.output.fasta))  # noqa: F821
