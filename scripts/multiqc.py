"""Rule multiqc: one MultiQC report over every sample, written in a scratch folder and moved
into place when complete (offline: no version check, no AI toolbox)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from numapore.base.atomic import scratch_dir
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
html, data = Path(smk.output.html), Path(smk.output.data)
inputs = [*smk.input.stats, *smk.input.flagstat, *smk.input.custom]
with scratch_dir(html) as work:
    command = [
        sys.executable, "-m", "multiqc", "--no-version-check", "--no-ai", "--force",
        "--title", "numapore", "--filename", html.name, "--outdir", str(work),
        # read counts as they are (not in millions: nanopore runs have few, long reads)
        "--cl-config", "{read_count_multiplier: 1, read_count_prefix: '', read_count_desc: ''}",
        *inputs,
    ]  # fmt: skip
    print(" ".join(command), flush=True)
    # Without PYTHONPATH: one naming scripts/ (a checkout run without its own install) would
    # make `-m multiqc` import this rule script instead of MultiQC.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(command, stdout=sys.stderr, stderr=sys.stderr, check=True, env=env)
    shutil.rmtree(data, ignore_errors=True)
    os.replace(work / data.name, data)
    os.replace(work / html.name, html)
