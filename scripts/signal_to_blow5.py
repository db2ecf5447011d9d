"""Rules pod5_to_blow5 and link_blow5: the sample's POD5 or BLOW5 input as the indexed BLOW5
nanopolish reads (numapore.signal.inputs); an empty rejected listing beside it (nothing is skipped).
"""

import sys
from pathlib import Path

from numapore.signal.convert import write_rejected
from numapore.base.rulelog import redirect_to_log
from numapore.signal.inputs import SignalError, pod5_to_blow5, use_blow5

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
output = Path(smk.output.blow5)
try:
    if smk.params.signal_format == "pod5":
        reads = pod5_to_blow5(
            [Path(p) for p in smk.input.signal],
            output,
            record_compression=smk.params.record_compression,
            signal_compression=smk.params.signal_compression,
            processes=smk.params.processes,
        )
    else:
        reads = use_blow5(Path(smk.input.signal[0]), output)
except SignalError as err:
    sys.exit(f"numapore: sample '{smk.wildcards.sample}': {err}")
write_rejected(output, [])
print(f"numapore: {reads} reads in {output}")
