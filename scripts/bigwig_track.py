"""Rule bigwig_track: a bigWig track of a bedMethyl (numapore tobigwig: the values modkit's
`bedmethyl tobigwig` writes), complete or absent; the equivalent modkit command and the track's
intervals go to the log, and a track without any value is said."""

import shlex
import sys

import pybigtools

from numapore.base.rulelog import redirect_to_log
from numapore.modbam import tobigwig

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
bed, out = str(smk.input.bedmethyl), str(smk.output[0])
arguments = [*smk.params.arguments, "--sizes", str(smk.input.sizes)]
print(f"equivalent modkit command: modkit bedmethyl tobigwig {shlex.join([bed, out, *arguments])}")
status = tobigwig.main([bed, out, *arguments])
if status:
    sys.exit(status)  # tobigwig said why, in one numapore: line
codes = smk.params.arguments[1]
with pybigtools.open(out) as track:
    intervals = sum(1 for chrom in track.chroms() for _ in track.records(chrom))
print(f"{intervals} intervals")
if intervals == 0:
    print(f"numapore: track {out} has no value: no row of code(s) {codes} in {bed} "
          "(config tracks.mod_codes)", file=sys.stderr)  # fmt: skip
