"""Rule read_accounting: the sample's read accounting table; fails if the totals disagree."""

import sys
from pathlib import Path

from numapore.base.errors import AccountingError
from numapore.base.rulelog import redirect_to_log
from numapore.inputs.kinds import KINDS
from numapore.inputs.modbam_reads import StagedReads
from numapore.report.accounting import (
    AccountingInputs,
    ModbamAccountingInputs,
    account,
    account_modbam,
    write_table,
)

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
try:
    # Reads staged with their calls: the staging counted and listed them (the modbam route).
    if KINDS[smk.params.kind].stages_tagged_reads:
        rows = account_modbam(
            ModbamAccountingInputs(
                sample=smk.wildcards.sample,
                aligner=smk.wildcards.aligner,
                source=smk.params.source,
                staged=StagedReads.read(Path(smk.input.staged)),
                untagged=smk.input.untagged,
                reads=smk.input.reads,
                bam=smk.input.bam,
                listing=smk.input.listing,
            )
        )
    else:
        rows = account(
            AccountingInputs(
                sample=smk.wildcards.sample,
                aligner=smk.wildcards.aligner,
                fast5=smk.params.signal,
                signal_format=smk.params.signal_format,
                reads=smk.input.reads,
                readdb=smk.input.readdb,
                bam=smk.input.bam,
                calls=smk.input.calls,
                modbam=smk.input.modbam,
                min_mapq=smk.params.min_mapq,
                blow5_index=smk.input.get("blow5_index"),
                rejected=smk.input.get("rejected"),
                census=(
                    (smk.input.census_reads, smk.input.census_files)
                    if "census_reads" in smk.input.keys()
                    else None
                ),
            )
        )
except AccountingError as err:
    sys.exit(f"numapore: read accounting: {err}")
write_table(rows, smk.output[0])
print(f"numapore: {len(rows)} accounting rows -> {smk.output[0]}")
