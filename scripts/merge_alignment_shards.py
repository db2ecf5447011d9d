"""Rule merge_alignment_shards: merge sorted BAM shards into the sample's BAM."""

import sys
from pathlib import Path

from numapore.run.rulelog import redirect_to_log
from numapore.execution.shards import merge_bams

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
merge_bams([Path(p) for p in smk.input], Path(smk.output[0]), smk.threads, sys.stderr)
