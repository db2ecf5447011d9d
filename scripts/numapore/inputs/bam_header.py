"""What a modBAM's header and its first records say before any job reads it: the platform its
reads come from (the header's @RG PL, the basecaller's @PG, an ONT read group's basecall_model),
the modification codes of its MM tags and whether its reads carry haplotags (HP). Read with
pysam: the header alone, or the first records (a CRAM's only when its reference is indexed, so
that nothing is written beside the user's files)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from numapore.base.errors import InputError
from numapore.inputs.kinds import MODBAM_SUFFIXES
from numapore.inputs.seqcheck import open_text

PACBIO = "PacBio"
ONT = "Oxford Nanopore"
# Read group platforms (SAM's PL values) and the programs (@PG PN, else ID without its version)
# that write a platform's reads.
PLATFORM_NAMES = {"PACBIO": PACBIO, "ONT": ONT}
PLATFORM_PROGRAMS = {
    **dict.fromkeys(("ccs", "primrose", "jasmine", "lima", "pbmm2", "baz2bam"), PACBIO),
    **dict.fromkeys(("dorado", "guppy", "bonito", "minknow"), ONT),
}
FIRST_RECORDS = 1000  # records read to find the codes and haplotags a file carries
# One MM tag's group: the canonical base, the strand, the codes (letters, each one code, or one
# ChEBI number) and the optional mode ('.' or '?').
MM_GROUP = re.compile(r"([ACGTUN])([-+])([a-z]+|\d+)[.?]?")
COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A", "U": "A", "N": "N"}


@dataclass(frozen=True)
class FirstRecords:
    """What the first records of a reads file carry: codes as (canonical base of the forward
    strand, code), read from MM (or Mm) tags; records read; whole: every record of the file."""

    records: int
    whole: bool
    codes: frozenset[tuple[str, str]]
    haplotagged: int


def mm_codes(mm: str) -> set[tuple[str, str]]:
    """The (base, code) pairs an MM tag's groups call ('C+mh?,...;A+a.,...' -> C m, C h, A a);
    a group on the reverse strand ('G-m') counts on its complement (C)."""
    found = set()
    for group in mm.split(";"):
        match = MM_GROUP.fullmatch(group.split(",", 1)[0])
        if match:
            base, strand, codes = match.groups()
            base = base if strand == "+" else COMPLEMENT[base]
            found |= {(base, codes)} if codes.isdigit() else {(base, c) for c in codes}
    return found


def platform_of(header: dict) -> tuple[str, str]:
    """(platform, what of the header says so) from a header as pysam's to_dict gives it;
    ('', '') when it says neither platform, or both."""
    said: dict[str, str] = {}
    for group in header.get("RG", []):
        platform = PLATFORM_NAMES.get(str(group.get("PL", "")).upper())
        if platform:
            said.setdefault(platform, f"@RG PL:{group['PL']}")
        if "basecall_model=" in str(group.get("DS", "")):
            said.setdefault(ONT, "@RG DS:basecall_model=...")
    for program in header.get("PG", []):
        name = str(program.get("PN") or re.split(r"[-.]", str(program.get("ID", "")))[0])
        platform = PLATFORM_PROGRAMS.get(name.lower())
        if platform:
            said.setdefault(platform, f"@PG PN:{name}" if "PN" in program else f"@PG ID:{name}")
    return next(iter(said.items())) if len(said) == 1 else ("", "")


def is_alignment_file(path: Path) -> bool:
    """Whether a reads file is a BAM or a CRAM (by its name)."""
    return path.name.lower().endswith(MODBAM_SUFFIXES)


@lru_cache(maxsize=256)
def _header(path: str, stamp: tuple[int, int]) -> dict:
    """The header of a BAM/CRAM (cached per path, modification time and size)."""
    import pysam

    verbosity = pysam.set_verbosity(0)  # htslib's own lines: the InputError says it once
    try:
        with pysam.AlignmentFile(path, check_sq=False) as handle:
            return handle.header.to_dict()
    finally:
        pysam.set_verbosity(verbosity)


def read_header(path: Path, key: str) -> dict:
    """A BAM/CRAM's header; InputError naming key when the file is truncated (no end-of-file
    block: samtools would stop partway) or its header cannot be read."""
    try:
        stat = path.stat()
        return _header(str(path), (stat.st_mtime_ns, stat.st_size))
    except (OSError, ValueError) as err:
        if "truncated" in str(err):
            raise InputError(
                f"{key}: reads file {path} is truncated (it lacks the end-of-file block a complete "
                "BAM/CRAM ends with): copy or download it again in full"
            ) from None
        raise InputError(f"{key}: reads file {path}: its header cannot be read ({err})") from None


def header_platform(path: Path) -> tuple[str, str]:
    """(platform, what says so) of a BAM/CRAM's header; ('', '') when it says neither or cannot
    be read (the checks of the reads file say why), or is not a BAM/CRAM."""
    if not is_alignment_file(path):
        return "", ""
    try:
        return platform_of(read_header(path, ""))
    except InputError:
        return "", ""


def first_records(path: Path, reference: Path, n: int = FIRST_RECORDS) -> FirstRecords | None:
    """What the first n records of a modBAM sample's reads (BAM, CRAM or FASTQ with the tags in
    its headers) carry; None when they cannot be read here (a CRAM whose reference has no faidx
    index, a damaged file: the staging job says why)."""
    try:
        stat = path.stat()
        return _first_records(str(path), str(reference), n, (stat.st_mtime_ns, stat.st_size))
    except (OSError, ValueError, InputError):
        return None


@lru_cache(maxsize=256)
def _first_records(path: str, reference: str, n: int, stamp: tuple[int, int]) -> FirstRecords:
    """first_records, cached per path, modification time and size."""
    codes: set[tuple[str, str]] = set()
    records = haplotagged = 0
    if is_alignment_file(Path(path)):
        import pysam

        options = {}
        if path.lower().endswith(".cram"):
            if not Path(f"{reference}.fai").is_file():
                raise ValueError("no faidx index beside the reference")
            options["reference_filename"] = reference
        verbosity = pysam.set_verbosity(0)
        try:
            with pysam.AlignmentFile(path, check_sq=False, **options) as handle:
                for record in handle.fetch(until_eof=True):
                    if records == n:
                        return FirstRecords(records, False, frozenset(codes), haplotagged)
                    records += 1
                    for tag in ("MM", "Mm"):
                        if record.has_tag(tag):
                            codes |= mm_codes(str(record.get_tag(tag)))
                    haplotagged += record.has_tag("HP")
        finally:
            pysam.set_verbosity(verbosity)
        return FirstRecords(records, True, frozenset(codes), haplotagged)
    with open_text(Path(path)) as handle:
        while records < n:
            header = handle.readline()
            if header and not header.strip():  # a blank line between records
                continue
            if not header:
                return FirstRecords(records, True, frozenset(codes), haplotagged)
            for _ in range(3):  # its sequence, '+' and qualities
                handle.readline()
            records += 1
            for field in header.split()[1:]:
                if field.startswith(("MM:Z:", "Mm:Z:")):
                    codes |= mm_codes(field[5:])
                haplotagged += field.startswith("HP:i:")
        whole = not handle.read(1 << 16).strip()
    return FirstRecords(records, whole, frozenset(codes), haplotagged)
