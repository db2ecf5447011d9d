"""Rule bigwig_track: a bigWig track of a bedMethyl (numapore tobigwig: the values modkit's
`bedmethyl tobigwig` writes), complete or absent; the equivalent modkit command and the track's
intervals go to the log; a bedMethyl without a row of the codes stops it in one line."""

import shlex
import sys

from numapore.base.rulelog import redirect_to_log
from numapore.modbam import tobigwig
from numapore.report.tracks import track_summary

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
bed, out = str(smk.input.bedmethyl), str(smk.output[0])
arguments = [*smk.params.arguments, "--sizes", str(smk.input.sizes)]
print(f"equivalent modkit command: modkit bedmethyl tobigwig {shlex.join([bed, out, *arguments])}")
status = tobigwig.main([bed, out, *arguments])
if status:
    sys.exit(status)  # tobigwig said why, in one numapore: line
# tobigwig refuses a bedMethyl without a row of the codes, so a track has an interval at least
print(f"{track_summary(out)[0]} intervals")
