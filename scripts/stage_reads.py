"""Rule stage_reads: check the reads once (numapore.inputs.seqcheck), then link them under results/,
or write a tidied copy when the tools need one (lowercase bases, CR line ends, blank lines)."""

import sys
from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.inputs.sheet import InputError
from numapore.inputs.seqcheck import stage_sequences

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
try:
    print(stage_sequences(Path(smk.input[0]), Path(smk.output[0]), "reads", smk.wildcards.fmt))
except InputError as err:  # the file, the line and the reason; no traceback
    sys.exit(f"numapore: {err}")
