"""Rule stage_modbam_reads: a modBAM sample's reads as FASTQ with their MM/ML/MN tags in the
headers (numapore.inputs.modbam_reads), their ids, what staging counted, and the reads staged
without calls with the reason."""

import sys
from pathlib import Path

from numapore.base.rulelog import redirect_to_log
from numapore.inputs.modbam_reads import NAMED_IN_LOG, mn_mismatched_reads, stage_modbam_reads
from numapore.inputs.phasing import check_vcf_contigs
from numapore.inputs.sheet import InputError

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
sample = smk.wildcards.sample
phased_vcf = smk.params.get("phased_vcf")


def check_phased_vcf() -> None:
    """Before the reads: a phased VCF of another assembly or naming stops the sample here."""
    if phased_vcf:
        check_vcf_contigs(Path(phased_vcf), Path(smk.input.fai), Path(smk.params.reference),
                          "phased_vcf")  # fmt: skip


def finish(staged) -> None:
    """Before the staged reads end (an align job reading them through a pipe finds the counts
    once it sees their end, and keeps nothing without them): the haplotags pileup.phased needs,
    then the counts."""
    if smk.params.get("phased") and not phased_vcf and not staged.with_haplotag:
        raise InputError(
            f"pileup.phased is true, but none of the {staged.reads} reads of {smk.input.reads} "
            "carries an HP tag (haplotag); haplotag them first (whatshap haplotag), or give the "
            "sample a phased VCF in the sheet's phased_vcf column"
        )
    staged.write(Path(smk.output.counts))


try:
    staged = stage_modbam_reads(
        Path(smk.input.reads), Path(smk.output.reads), Path(smk.params.reference), smk.threads,
        fai=Path(smk.input.fai), listing=Path(smk.output.untagged), ids=Path(smk.output.ids),
        check_first=check_phased_vcf, finish=finish,
    )  # fmt: skip
except InputError as err:  # the file and the reason; no traceback
    sys.exit(f"numapore: sample '{sample}': {err}")
print(staged.summary())
if staged.mn_mismatch:
    names = mn_mismatched_reads(Path(smk.output.untagged))
    more = f" and {len(names) - NAMED_IN_LOG} more" if len(names) > NAMED_IN_LOG else ""
    print(
        f"numapore: sample '{sample}': {staged.mn_mismatch} read(s) whose MN tag does not match "
        f"their sequence length, aligned without their tags: {', '.join(names[:NAMED_IN_LOG])}"
        f"{more} (all in {smk.output.untagged})"
    )
if staged.aligned_input:
    print(f"the input was aligned; its primary records are realigned to {smk.params.reference}")
