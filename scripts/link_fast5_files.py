"""Rule link_fast5_files: link the sample's single FAST5 files into one folder for nanopolish
index, under names it reads (numapore.inputs.sheet.fast5_links)."""

import os
from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.inputs.sheet import fast5_links

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
folder = Path(smk.output[0])
for source, link in fast5_links([Path(p) for p in smk.input.signal]):
    (folder / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(Path(source).resolve(), folder / link)
    print(f"{folder / link} -> {Path(source).resolve()}")
