"""Rule haplotag: WhatsHap (`whatshap haplotag`, the release the environment has) tags a sample's
aligned reads by haplotype from its phased VCF: HP and PS on each read it can place, supplementary
records as their primary. WhatsHap reads a bgzipped, indexed VCF: a copy is made so beside the
output, and removed. Runs as `python -m whatshap` of this job's own Python (the conda env's, or
numapore's environment, where requirements.txt pins it)."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pysam
import whatshap

from numapore.base.textfiles import open_maybe_gzip

smk = snakemake  # noqa: F821 (injected by the script directive)
out = Path(smk.output.bam)
tmp = out.with_name(f".{out.name}.part")
vcf = out.with_name(f".{out.name}.vcf")
with open(smk.log[0], "w") as log:
    with open_maybe_gzip(smk.input.vcf, "rb") as src, open(vcf, "wb") as dst:
        while block := src.read(1 << 20):
            dst.write(block)
    pysam.tabix_index(str(vcf), preset="vcf", force=True)  # vcf.gz and its .tbi
    command = [
        sys.executable, "-m", "whatshap", "haplotag", "--ignore-read-groups",
        "--sample", smk.params.vcf_sample, "--reference", smk.input.reference,
        "--skip-missing-contigs", "--tag-supplementary", "-o", str(tmp), f"{vcf}.gz",
        smk.input.bam,
    ]  # fmt: skip
    print(f"whatshap {whatshap.__version__}: {shlex.join(['whatshap', *command[3:]])}", file=log,
          flush=True)  # fmt: skip
    done = subprocess.run(command, stdout=log, stderr=log)
    for leftover in (Path(f"{vcf}.gz"), Path(f"{vcf}.gz.tbi"), vcf):
        leftover.unlink(missing_ok=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        sys.exit(f"numapore: sample '{smk.wildcards.sample}': whatshap haplotag failed (exit "
                 f"{done.returncode}); see {smk.log[0]}")  # fmt: skip
    pysam.index(str(tmp), f"{tmp}.bai")
    os.replace(f"{tmp}.bai", smk.output.bai)
    os.replace(tmp, out)
