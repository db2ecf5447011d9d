"""Rule pileup_haplotypes (pileup.phased): the pileup's bedMethyl of the records with HP:i:1 and
of those with HP:i:2, bgzipped and indexed: modkit 0.6.1's `pileup --phased` hp1 and hp2 files
(numapore pileup --phased writes the same, with its combined one, which rule pileup writes)."""

import sys
from dataclasses import replace

from numapore.base.rulelog import redirect_to_log
from numapore.pileup import cli as pileup_cli
from numapore.pileup.engine import PileupError
from numapore.pileup.settings import modkit_command, numapore_arguments

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
options = replace(smk.params.options, threads=smk.threads)  # the run's plan decided the rest
bam = smk.input.bam
folder = f"results/{smk.wildcards.sample}/methylation/phased"
command = modkit_command(bam, folder, [*numapore_arguments(options), "--phased", "--bgzf"])
print(f"equivalent modkit command: {command} (its hp1.bed.gz and hp2.bed.gz)")
try:
    # What pileup_cli.run does for --phased's haplotype files: one pass per haplotype with the
    # same options, the threshold estimated from all the records as for the combined file.
    outputs = pileup_cli.Outputs(smk.output.hp1, bgzf=True)
    for haplotype, out in ((1, smk.output.hp1), (2, smk.output.hp2)):
        one = replace(options, haplotype=haplotype)
        result = pileup_cli.write_pileup(bam, outputs, out, one, None, False)
        print(f"HP {haplotype}: {result.stats.used} read(s) used, {result.stats.rows} rows")
except PileupError as err:
    sys.exit(f"numapore: sample '{smk.wildcards.sample}': {err}")
