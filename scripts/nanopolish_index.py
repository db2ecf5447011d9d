"""Rule nanopolish_index: check a BLOW5 is whole, then index the reads' signal with nanopolish
and check that some of the reads have raw signal (numapore.report.empty).

nanopolish writes its index beside the reads it is given: a link to them in a scratch folder,
so that the files get their final names (a rename) only once all are complete. A BLOW5 is given
as a link there too: nanopolish rewrites its .idx, which other jobs may be reading."""

import os
import subprocess
import sys
from pathlib import Path

from numapore.signal.hdf5plugin import vbz_plugin_env
from numapore.base.atomic import scratch_dir
from numapore.base.rulelog import redirect_to_log
from numapore.signal.slow5_files import blow5_problem
from numapore.execution.tools import nanopolish_index_command, name_blow5_in_readdb
from numapore.report.empty import check_reads_have_signal

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
blow5 = Path(smk.input.signal[0]) if smk.wildcards.signal == "blow5" else None
# nanopolish only says "Error in creating index" for a damaged BLOW5: give the reason.
problem = blow5_problem(blow5) if blow5 else None
if problem:
    sys.exit(f"numapore: {blow5}: {problem}. Delete it and rerun to convert the FAST5 again.")
reads = Path(smk.input.reads)
with scratch_dir(smk.output[0]) as scratch:
    link = scratch / reads.name
    link.symlink_to(os.path.relpath(reads, scratch))
    given = blow5 and scratch / blow5.name  # nanopolish rewrites its .idx: name_blow5_in_readdb
    if given:
        given.symlink_to(os.path.relpath(blow5, scratch))
    command = nanopolish_index_command(link, list(smk.input.signal), given)
    print(command, flush=True)
    # Snakemake sets OMP_NUM_THREADS to the rule's threads, 0 here (HOLDS_NO_CORE), which
    # libgomp refuses with a warning in the log; nanopolish index runs one thread.
    with vbz_plugin_env(sys.stdout):  # multi-read FAST5 may be VBZ-compressed
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        done = subprocess.run(command, shell=True, stdout=sys.stdout, stderr=sys.stderr, env=env)
    if done.returncode != 0:
        sys.exit(done.returncode)
    if given:
        try:
            name_blow5_in_readdb(scratch / f"{link.name}.index.readdb", given, blow5)
        except ValueError as err:  # another nanopolish's read index: one line, no traceback
            sys.exit(str(err))
    # Reads none of which has raw signal (basecalled from another run?): stop here, naming them.
    print(
        check_reads_have_signal(
            smk.wildcards.sample, reads, scratch / Path(smk.output[3]).name,
            source=smk.params.reads, signal=smk.params.signal,
            blow5_index=f"{blow5}.idx" if blow5 else None,
            allowed=smk.config["allow_empty_samples"],
        )
    )  # fmt: skip
    for output in map(Path, smk.output):
        os.replace(scratch / output.name, output)
