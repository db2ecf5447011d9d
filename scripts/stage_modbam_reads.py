"""Rule stage_modbam_reads: a modBAM sample's reads as FASTQ with their MM/ML/MN tags in the
headers (numapore.inputs.modbam_reads), and what staging counted."""

import sys
from pathlib import Path

from numapore.base.atomic import atomic_output
from numapore.base.rulelog import redirect_to_log
from numapore.inputs.modbam_reads import stage_modbam_reads
from numapore.inputs.sheet import InputError

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
try:
    staged = stage_modbam_reads(
        Path(smk.input.reads), Path(smk.output.reads), Path(smk.params.reference), smk.threads
    )
except InputError as err:  # the file and the reason; no traceback
    sys.exit(f"numapore: sample '{smk.wildcards.sample}': {err}")
print(staged.summary())
if staged.aligned_input:
    print(f"the input was aligned; its primary records are realigned to {smk.params.reference}")
with atomic_output(Path(smk.output.counts)) as tmp:
    Path(tmp).write_text(
        "reads\twith_tags\twithout_tags\tduplicates_left_out\taligned_input\n"
        f"{staged.reads}\t{staged.with_tags}\t{staged.without_tags}\t{staged.duplicates}\t"
        f"{staged.aligned_input}\n"
    )
