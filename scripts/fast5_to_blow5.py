"""Rule fast5_to_blow5: convert the sample's FAST5 files into one indexed BLOW5 with K readers."""

from pathlib import Path

from numapore.signal.convert import ConversionError, convert, write_rejected
from numapore.base.errors import InputError
from numapore.base.rulelog import LogAndTerminal, redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
try:
    convert(
        [Path(p) for p in smk.input.signal],
        Path(smk.output.blow5),
        record_compression=smk.params.record_compression,
        signal_compression=smk.params.signal_compression,
        processes=smk.params.processes,
        on_bad_fast5=smk.params.on_bad_fast5,
        progress=LogAndTerminal(),  # files done (%) and reads/s, every 5 s
    )
except ConversionError as err:  # a bad FAST5 under on_bad_fast5: fail: one line, no traceback
    raise InputError(
        f"{err} (on_bad_fast5: skip leaves such files and reads out, listed with the reason)"
    ) from None
if not Path(smk.output.rejected).exists():  # on_bad_fast5: fail writes no list; empty = none
    write_rejected(Path(smk.output.blow5), [])
