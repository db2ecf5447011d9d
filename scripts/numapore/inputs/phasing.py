"""A sample's phased VCF (the sheet's phased_vcf column), from which WhatsHap haplotags its
aligned reads (rule haplotag): the checks that can run before any job (the file, its header, its
one sample) and the one against the reference (its contigs), which the staging job runs with
the prepared reference's index, before the alignment."""

from __future__ import annotations

import re
from pathlib import Path

from numapore.base.errors import InputError
from numapore.base.textfiles import open_maybe_gzip

CONTIG_LINE = re.compile(r"##contig=<ID=([^,>]+)(?:.*?[,<]length=(\d+))?")


def vcf_lines(path: Path):
    """The lines of a VCF, plain or gzip/bgzip-compressed (told by its first bytes)."""
    with open_maybe_gzip(path, "rt", encoding="utf-8", errors="replace") as handle:
        yield from handle


def vcf_header(path: Path, key: str) -> tuple[list[str], list[tuple[str, int | None]]]:
    """The VCF's sample names and its ##contig lines (name, length or None); InputError naming
    key when the file is missing or not a VCF."""
    if not path.is_file():
        raise InputError(f"{key}: phased VCF {path} does not exist" + " (a folder)" * path.is_dir())
    contigs: list[tuple[str, int | None]] = []
    try:
        for number, line in enumerate(vcf_lines(path), start=1):
            if number == 1 and not line.startswith("##fileformat=VCF"):
                raise InputError(
                    f"{key}: phased VCF {path} is not VCF (its first line is not ##fileformat=VCF)"
                )
            if line.startswith("##contig="):
                match = CONTIG_LINE.match(line)
                if match:
                    length = int(match.group(2)) if match.group(2) else None
                    contigs.append((match.group(1), length))
            elif line.startswith("#CHROM"):
                return line.rstrip("\n").split("\t")[9:], contigs
    except (OSError, EOFError, UnicodeError) as err:
        raise InputError(f"{key}: phased VCF {path} cannot be read: {err}") from err
    raise InputError(f"{key}: phased VCF {path} has no #CHROM header line")


def vcf_sample(path: Path, sample: str, key: str) -> str:
    """The VCF sample whose phasing tags the sample's reads: its only one, or the one named as
    the sheet's sample; InputError otherwise."""
    names, _ = vcf_header(path, key)
    if len(names) == 1:
        return names[0]
    if sample in names:
        return sample
    listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    raise InputError(
        f"{key}: phased VCF {path} has "
        + (f"{len(names)} samples ({listed}), none named '{sample}'" if names else "no sample")
        + ": give a VCF of this sample alone, or name the sheet's sample as the VCF names it"
    )


def is_phased_heterozygous(genotype: str) -> bool:
    """Whether a GT value is phased ('|') with two different called alleles (0|1, 1|2): what
    WhatsHap tags a read's haplotype from."""
    alleles = genotype.split("|")
    return len(alleles) > 1 and len(set(alleles) - {"."}) > 1


def check_phased_genotypes(path: Path, sample: str, key: str) -> None:
    """InputError naming key, the VCF and its sample when no record of the VCF has a phased
    heterozygous genotype (GT 0|1) for the sample (WhatsHap would tag no read: empty haplotype
    bedMethyl files); read until the first one."""
    names, _ = vcf_header(path, key)
    column = 9 + names.index(sample)
    records = 0
    for line in vcf_lines(path):
        if line.startswith("#") or not line.strip():
            continue
        records += 1
        fields = line.rstrip("\n").split("\t")
        keys = fields[8].split(":") if len(fields) > column else []
        if "GT" in keys:
            values = fields[column].split(":")
            position = keys.index("GT")
            if position < len(values) and is_phased_heterozygous(values[position]):
                return
    what = f"none of its {records} records has a" if records else "it has no record, hence no"
    raise InputError(
        f"{key}: phased VCF {path}: {what} phased heterozygous genotype (GT 0|1) for sample "
        f"'{sample}' (0/1 is unphased): WhatsHap would tag no read and the haplotype bedMethyl "
        "files would be empty; give the VCF a phasing wrote (whatshap phase)"
    )


def fai_lengths(fai: Path) -> dict[str, int]:
    """Contig -> length from a faidx index."""
    rows = (line.split("\t") for line in fai.read_text().splitlines() if line)
    return {row[0]: int(row[1]) for row in rows}


def record_contigs(path: Path) -> list[str]:
    """The contigs the VCF's records are on, in order, each once (for a VCF without ##contig
    lines)."""
    seen: dict[str, None] = {}
    for line in vcf_lines(path):
        if not line.startswith("#"):
            seen.setdefault(line.split("\t", 1)[0], None)
    return list(seen)


def check_vcf_contigs(path: Path, fai: Path, reference: Path, key: str) -> None:
    """InputError, naming the VCF and a contig, when the VCF's contigs do not match the
    reference's (a VCF called on another assembly or naming): none of its contigs is in the
    reference, or one in both has another length there."""
    _, contigs = vcf_header(path, key)
    lengths = fai_lengths(fai)
    if not contigs:
        contigs = [(name, None) for name in record_contigs(path)]
    if not contigs:
        raise InputError(f"{key}: phased VCF {path} holds no variant (no contig)")
    for name, length in contigs:
        if name in lengths and length is not None and length != lengths[name]:
            raise InputError(
                f"{key}: phased VCF {path}: contig '{name}' has length {length} in the VCF but "
                f"{lengths[name]} in the reference {reference}: the VCF was called on another "
                "assembly; give one called on this reference"
            )
    if not any(name in lengths for name, _ in contigs):
        shown = ", ".join(name for name, _ in contigs[:3])
        ours = ", ".join(list(lengths)[:3])
        raise InputError(
            f"{key}: phased VCF {path}: none of its contigs ({shown}"
            + (", ..." if len(contigs) > 3 else "")
            + f") is in the reference {reference} ({ours}"
            + (", ..." if len(lengths) > 3 else "")
            + "): the VCF names the contigs otherwise (chr1 against 1?) or comes from another "
            "genome"
        )
