"""Sample sheet loading and the input checks that must fail before any job starts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from numapore.errors import InputError
from numapore.seqcheck import open_text

# Formats nanopolish, minimap2, bwa and bowtie2 all read; gzip is allowed for each.
READS_SUFFIXES = {
    ".fasta": "fasta",
    ".fa": "fasta",
    ".fna": "fasta",
    ".fastq": "fastq",
    ".fq": "fastq",
}


@dataclass(frozen=True)
class Sample:
    """One row of the sample sheet, with paths resolved."""

    name: str
    fast5: tuple[Path, ...]
    reads: Path
    reference: Path

    @property
    def reads_format(self) -> str:
        """The staged file extension of the reads: fasta, fastq, fasta.gz or fastq.gz."""
        return reads_format(self.reads)

    @property
    def reference_name(self) -> str:
        """A file-name-safe name for the reference (its file name without FASTA/gzip suffixes)."""
        return reference_name(self.reference)


def reads_format(path: Path) -> str:
    """Return 'fasta', 'fastq', 'fasta.gz' or 'fastq.gz' from the reads file name."""
    suffixes = [s.lower() for s in path.suffixes]
    gz = bool(suffixes) and suffixes[-1] == ".gz"
    core = suffixes[-2] if gz and len(suffixes) >= 2 else (suffixes[-1] if suffixes else "")
    if core not in READS_SUFFIXES:
        raise InputError(
            f"reads file {path}: cannot tell FASTA from FASTQ by its name; use one of "
            f"{', '.join(sorted(READS_SUFFIXES))} (optionally .gz)"
        )
    return READS_SUFFIXES[core] + (".gz" if gz else "")


def reference_name(path: Path) -> str:
    """Name a reference after its file: 'genomes/hg38.fa.gz' -> 'hg38'."""
    name = path.name
    for suffix in (".gz", ".fasta", ".fa", ".fna"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "reference"


def missing_reason(path: Path, what: str) -> str:
    """Why an input path cannot be used as a file: a folder, or absent."""
    if path.is_dir():
        return f"{what} {path} is a folder, not a file"
    return f"{what} {path} does not exist"


def first_line(path: Path, key: str, what: str) -> str:
    """The first non-blank line of a FASTA/FASTQ file (compression checked against the name)."""
    if not path.is_file():
        raise InputError(f"{key}: {missing_reason(path, what)}")
    try:
        with open_text(path) as handle:
            for _ in range(1000):  # a few leading blank lines, not a whole file
                line = handle.readline(1 << 16)
                if line.strip() or not line:
                    return line
    except InputError as err:
        raise InputError(f"{key}: {what} {err}") from err
    except (OSError, EOFError) as err:
        raise InputError(f"{key}: {what} {path} cannot be read: {err}") from err
    return ""


def check_reads(path: Path, key: str) -> None:
    """Fail unless the reads file exists and starts with a FASTA or FASTQ record."""
    fmt = reads_format(path)
    first = first_line(path, key, "reads file")
    if not first:
        raise InputError(f"{key}: reads file {path} is empty (no reads)")
    marker = ">" if fmt.startswith("fasta") else "@"
    if not first.startswith(marker):
        raise InputError(
            f"{key}: reads file {path} does not start with '{marker}' as a {fmt} file should"
        )


def check_fast5(paths: tuple[Path, ...], key: str) -> None:
    """Fail unless every FAST5 path exists and the set holds at least one .fast5 file."""
    found = 0
    for path in paths:
        if path.is_dir():
            found += sum(1 for _ in path.rglob("*.fast5"))
        elif path.is_file():
            if path.suffix != ".fast5":
                raise InputError(f"{key}: {path} is not a .fast5 file or a folder of them")
            found += 1
        else:
            raise InputError(f"{key}: {missing_reason(path, 'FAST5 path')}")
    if not found:
        raise InputError(f"{key}: no .fast5 files found in {', '.join(map(str, paths))}")


def check_reference(path: Path, key: str) -> None:
    """Fail unless the reference exists and starts with a FASTA header."""
    if not first_line(path, key, "reference").startswith(">"):
        raise InputError(f"{key}: reference {path} is not FASTA (it does not start with '>')")


def read_sheet(sheet: Path) -> pd.DataFrame:
    """Read the sample sheet TSV as strings. Lines starting with '#' are comments ('#' inside a
    value is kept: paths may hold it); every row has the header's fields; no value starts or
    ends with a blank. The file line of each row is in table.attrs['lines']."""
    sheet = Path(sheet)
    if not sheet.is_file():
        raise InputError(missing_reason(sheet, "sample sheet"))
    header, rows, lines = None, [], []
    for number, line in enumerate(sheet.read_text().splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split("\t")
        if header is None:
            header = [f.strip() for f in fields]
            continue
        where = f"sample sheet {sheet}, line {number}"
        if len(fields) > len(header) and not "".join(fields[len(header) :]).strip():
            raise InputError(
                f"{where}: ends in a tab after its last column '{header[-1]}'; remove it"
            )
        if len(fields) != len(header):
            raise InputError(
                f"{where}: {len(fields)} tab-separated fields but the header has {len(header)} "
                "(a stray or missing tab?)"
            )
        for column, value in zip(header, fields, strict=True):
            if value != value.strip():
                raise InputError(
                    f"{where}, column '{column}': {value!r} starts or ends with a space or tab; "
                    "remove it"
                )
        rows.append(fields)
        lines.append(number)
    table = pd.DataFrame(rows, columns=header or [], dtype=str)
    table.attrs["lines"] = lines
    return table


def load_samples(table: pd.DataFrame, sheet: Path, base: Path) -> dict[str, Sample]:
    """Turn the sheet's rows into Samples, resolving paths against base and checking each input."""
    missing = {"sample", "fast5", "reads", "reference"} - set(table.columns)
    if missing:
        raise InputError(f"sample sheet {sheet}: missing column(s) {', '.join(sorted(missing))}")
    samples: dict[str, Sample] = {}
    numbers = table.attrs.get("lines") or range(2, len(table) + 2)
    for row_number, row in zip(numbers, table.itertuples(index=False), strict=True):
        name = row.sample
        key = f"sample sheet {sheet}, line {row_number}, sample '{name}'"
        if name in samples:
            raise InputError(f"{key}: duplicate sample name")
        fast5 = tuple(base / p.strip() for p in row.fast5.split(",") if p.strip())
        sample = Sample(name, fast5, base / row.reads, base / row.reference)
        check_fast5(sample.fast5, key)
        check_reads(sample.reads, key)
        check_reference(sample.reference, key)
        samples[name] = sample
    return samples


def simulated_samples(simulate: dict[str, dict], base: Path) -> dict[str, Sample]:
    """Samples the signal simulator makes (config `simulate:`), at their paths under results/."""
    samples = {}
    for name, settings in simulate.items():
        reference = base / settings["reference"]
        check_reference(reference, f"config simulate.{name}")
        out = Path("results/simulated") / name
        samples[name] = Sample(name, (out / "fast5_multi",), out / "reads.fastq", reference)
    return samples


def combine_samples(
    from_sheet: dict[str, Sample], simulated: dict[str, Sample], sheet: Path
) -> dict[str, Sample]:
    """All samples of a run: the sheet's and the simulated ones, names unique, at least one."""
    clash = sorted(set(from_sheet) & set(simulated))
    if clash:
        raise InputError(
            f"sample name(s) {', '.join(clash)} are both in {sheet} and in config simulate:"
        )
    samples = {**from_sheet, **simulated}
    if not samples:
        raise InputError(f"no samples: {sheet} has no rows and config simulate: is empty")
    check_reference_names(samples, sheet)
    return samples


def check_reference_names(samples: dict[str, Sample], sheet: Path) -> None:
    """Fail if two different reference files would share one results folder name."""
    seen: dict[str, Path] = {}
    for sample in samples.values():
        other = seen.setdefault(sample.reference_name, sample.reference)
        if other.resolve() != sample.reference.resolve():
            raise InputError(
                f"sample sheet {sheet}: references {other} and {sample.reference} would both be "
                f"named '{sample.reference_name}'; rename one of the files"
            )
