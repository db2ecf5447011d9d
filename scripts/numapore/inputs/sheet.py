"""Sample sheet loading and the input checks that must fail before any job starts."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas only where a sheet is read: jobs import reads_format without it
    import pandas as pd

from numapore.base.errors import InputError
from numapore.inputs.bam_header import PACBIO, header_platform, read_header
from numapore.inputs.kinds import DEFAULT_KIND, KINDS, MODBAM_SUFFIXES, InputKind, infer_kind
from numapore.inputs.modbam_reads import has_mod_tags
from numapore.inputs.phasing import check_phased_genotypes, vcf_sample
from numapore.inputs.schema import check_sheet
from numapore.inputs.seqcheck import open_text

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
    signal: tuple[Path, ...]  # raw signal: FAST5 folders/files, POD5 folders/files or a BLOW5
    reads: Path
    reference: Path
    signal_format: str = "fast5"  # SIGNAL_FORMATS: how the signal becomes what nanopolish reads
    notes: tuple[str, ...] = ()  # warnings about the inputs (paths listed twice)
    kind: str = DEFAULT_KIND  # numapore.inputs.kinds.KINDS: what the sample is, what it runs
    reads2: Path | None = None  # the second reads of pairs (R2; kind short), in R1's order
    group: str = ""  # the sheet's group column (tumour, normal, ...): cohort table, DMR contrasts
    phased_vcf: Path | None = None  # WhatsHap haplotags the aligned reads from it (rule haplotag)

    @property
    def paired(self) -> bool:
        """Whether the sample's reads are pairs (a second reads file)."""
        return self.reads2 is not None

    @property
    def input_kind(self) -> InputKind:
        """The sample's entry in the input kinds table."""
        return KINDS[self.kind]

    @property
    def reads_format(self) -> str:
        """The staged file extension of the reads: fasta, fastq, fasta.gz or fastq.gz (a
        modBAM's reads are staged as FASTQ with their tags in the headers)."""
        return "fastq" if self.input_kind.stages_tagged_reads else reads_format(self.reads)

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


# Raw signal inputs by file extension (any case). A kind is one reader of the workflow.
SIGNAL_FORMATS = {".fast5": "fast5", ".pod5": "pod5", ".blow5": "blow5"}
SIGNAL_HELP = (
    "raw signal is FAST5 files or folders, POD5 files or folders, or one BLOW5 file "
    "(extensions .fast5, .pod5, .blow5, any case)"
)


def signal_files(folder: Path) -> dict[str, list[Path]]:
    """The raw signal files under a folder (recursive) by kind; other files are ignored."""
    found: dict[str, list[Path]] = {}
    for path in folder.rglob("*"):
        kind = SIGNAL_FORMATS.get(path.suffix.lower())
        if kind and path.is_file():
            found.setdefault(kind, []).append(path)
    return found


def distinct_paths(paths: tuple[Path, ...], key: str) -> tuple[tuple[Path, ...], list[str]]:
    """The paths without repeats: a path listed twice, or inside a listed folder, is read once
    (kept where first listed, or as part of its folder); a note says so for each."""
    resolved = [p.resolve() for p in paths]
    kept, notes = [], []
    for i, (path, real) in enumerate(zip(paths, resolved, strict=True)):
        if real in resolved[:i]:
            notes.append(f"{key}: {path} is listed twice; it is read once")
            continue
        outer = next((paths[j] for j, o in enumerate(resolved) if o in real.parents), None)
        if outer is not None:
            notes.append(f"{key}: {path} is inside {outer}, also listed; it is read once")
            continue
        kept.append(path)
    return tuple(kept), notes


def check_signal(paths: tuple[Path, ...], key: str) -> str:
    """Fail unless every raw signal path exists and all hold one kind; return that kind."""
    kinds: dict[str, int] = {}
    for path in paths:
        if path.is_dir():
            for kind, files in signal_files(path).items():
                if kind == "blow5":
                    raise InputError(
                        f"{key}: folder {path} holds BLOW5 files ({files[0].name}); give one "
                        "BLOW5 file by name (merge several with `slow5tools merge`)"
                    )
                kinds[kind] = kinds.get(kind, 0) + len(files)
        elif path.is_file():
            if path.suffix.lower() == ".slow5":
                raise InputError(
                    f"{key}: {path} is SLOW5 text; nanopolish reads BLOW5: convert it with "
                    "`slow5tools view --to blow5 -c zlib -s none`"
                )
            kind = SIGNAL_FORMATS.get(path.suffix.lower())
            if kind is None:
                raise InputError(f"{key}: {path} is not a raw signal file: {SIGNAL_HELP}")
            kinds[kind] = kinds.get(kind, 0) + 1
        else:
            raise InputError(f"{key}: {missing_reason(path, 'raw signal path')}")
    if not kinds:
        raise InputError(
            f"{key}: no raw signal files (.fast5, .pod5) found in {', '.join(map(str, paths))}"
        )
    if len(kinds) > 1:
        counts = ", ".join(f"{n} {kind.upper()}" for kind, n in sorted(kinds.items()))
        raise InputError(
            f"{key}: the raw signal mixes kinds ({counts} files); give one kind per sample "
            "(convert the others, or make them separate samples)"
        )
    (kind,) = kinds
    if kind == "blow5" and (len(paths) > 1 or kinds[kind] > 1):
        raise InputError(
            f"{key}: {kinds[kind]} BLOW5 files; a sample reads one BLOW5 file "
            "(merge several with `slow5tools merge`)"
        )
    return kind


def check_modbam_reads(path: Path, key: str) -> None:
    """Fail unless a modBAM sample's reads are a BAM/CRAM file, or FASTQ whose first header
    carries MM/ML tags (the tags of the other reads are counted when they are staged)."""
    if not path.is_file():
        raise InputError(f"{key}: {missing_reason(path, 'reads file')}")
    if path.name.lower().endswith(MODBAM_SUFFIXES):
        with open(path, "rb") as handle:
            magic = handle.read(4)
        expected = b"CRAM" if path.name.lower().endswith(".cram") else b"\x1f\x8b"
        if not magic.startswith(expected):
            raise InputError(f"{key}: reads file {path} is not a {path.suffix[1:].upper()} file")
        read_header(path, key)  # a truncated file stops here, not partway through its staging
        return
    if not reads_format(path).startswith("fastq"):
        raise InputError(
            f"{key}: reads file {path}: a modbam sample's reads are BAM, CRAM or FASTQ with "
            "MM/ML tags in the headers"
        )
    header = first_line(path, key, "reads file")
    if not header.startswith("@"):
        raise InputError(f"{key}: reads file {path} does not start with '@' as FASTQ should")
    tags = header.split()[1:]
    if not has_mod_tags([t.encode() for t in tags]):
        raise InputError(
            f"{key}: reads file {path}: the first read's header carries no MM/ML tags (a FASTQ "
            "that lost them?); write it with dorado --emit-fastq or samtools fastq -T MM,ML,MN"
        )


def check_short_reads(reads: Path, reads2: Path | None, key: str) -> None:
    """Fail unless a short sample's reads (and R2) exist and start with a FASTQ record, both
    mates in one format (the staged pair shares its file names' suffix)."""
    for path in (reads, reads2) if reads2 else (reads,):
        if not reads_format(path).startswith("fastq"):
            raise InputError(f"{key}: reads file {path}: a short sample's reads are FASTQ")
        check_reads(path, key)
    if reads2 and reads_format(reads2) != reads_format(reads):
        raise InputError(
            f"{key}: reads2 file {reads2} is {reads_format(reads2)} but reads {reads} is "
            f"{reads_format(reads)}; give both mates in one format (both .gz or neither)"
        )


def check_reference(path: Path, key: str) -> None:
    """Fail unless the reference exists and starts with a FASTA header."""
    if not first_line(path, key, "reference").startswith(">"):
        raise InputError(f"{key}: reference {path} is not FASTA (it does not start with '>')")


def read_checked_sheet(sheet: Path, schema: Mapping[str, Any]) -> pd.DataFrame:
    """The sample sheet read (read_sheet) and checked against its schema (check_sheet): one
    InputError line for its first problem, by line and column."""
    table = read_sheet(sheet)
    check_sheet(list(table.columns), table.to_dict("records"), table.attrs["lines"],
                table.attrs["header_line"], sheet, schema)  # fmt: skip
    return table


def read_sheet(sheet: Path) -> pd.DataFrame:
    """Read the sample sheet TSV as strings. Lines starting with '#' are comments ('#' inside a
    value is kept: paths may hold it); every row has the header's fields; no value starts or
    ends with a blank; a UTF-8 byte-order mark is ignored; a line separated by spaces is refused.
    The file line of each row is in table.attrs['lines'], the header's in attrs['header_line']."""
    sheet = Path(sheet)
    if not sheet.is_file():
        raise InputError(missing_reason(sheet, "sample sheet"))
    header, rows, lines, header_line = None, [], [], 0
    # utf-8-sig: a byte-order mark (some editors write one) is not part of the first column.
    try:
        text = sheet.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(
            f"sample sheet {sheet}: not UTF-8 text (byte {err.start}); save it as UTF-8"
        ) from err
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split("\t")
        where = f"sample sheet {sheet}, line {number}"
        if len(fields) == 1 and len(line.split()) > 1 and (header is None or len(header) > 1):
            raise InputError(
                f"{where}: the sheet must be tab-separated; this line has no tab, its fields "
                "are separated by spaces"
            )
        if header is None:
            header, header_line = [f.strip() for f in fields], number
            continue
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
    import pandas as pd

    table = pd.DataFrame(rows, columns=header or [], dtype=str)
    table.attrs["lines"] = lines
    table.attrs["header_line"] = header_line
    return table


def signal_column(table: pd.DataFrame, sheet: Path) -> str | None:
    """The sheet's raw signal column: 'signal', or 'fast5' (its older name, still accepted);
    None when it has neither (no sample of the sheet has raw signal)."""
    both = {"signal", "fast5"} <= set(table.columns)
    if both:
        raise InputError(
            f"sample sheet {sheet}: has both a 'signal' and a 'fast5' column; keep one "
            "('fast5' is the older name of 'signal')"
        )
    if "signal" not in table.columns and "fast5" not in table.columns:
        return None
    return "signal" if "signal" in table.columns else "fast5"


def load_samples(table: pd.DataFrame, sheet: Path, base: Path) -> dict[str, Sample]:
    """Turn the sheet's rows into Samples, resolving paths against base and checking each input."""
    column = signal_column(table, sheet)
    missing = {"sample", "reads", "reference"} - set(table.columns)
    if missing:
        raise InputError(f"sample sheet {sheet}: missing column(s) {', '.join(sorted(missing))}")
    samples: dict[str, Sample] = {}
    numbers = table.attrs.get("lines") or range(2, len(table) + 2)
    for row_number, row in zip(numbers, table.itertuples(index=False), strict=True):
        name = row.sample
        key = f"sample sheet {sheet}, line {row_number}, sample '{name}'"
        if name in samples:
            raise InputError(f"{key}: duplicate sample name")
        signal_text = getattr(row, column) if column else ""
        declared = row.kind if "kind" in table.columns else ""
        reads2 = row.reads2 if "reads2" in table.columns else ""
        group = row.group if "group" in table.columns else ""
        vcf = row.phased_vcf if "phased_vcf" in table.columns else ""
        # A BAM/CRAM of no declared kind: its header tells PacBio HiFi from nanopore reads.
        pacbio = not declared and header_platform(base / row.reads)[0] == PACBIO
        kind = KINDS[infer_kind(declared, signal_text, row.reads, key, reads2, pacbio)]
        if kind.needs_signal and not signal_text:
            what = "an empty signal field" if column else "no signal column"
            raise InputError(f"{key}: a {kind.name} sample needs raw signal, but it has {what}")
        if signal_text and not kind.needs_signal:
            raise InputError(
                f"{key}: a {kind.name} sample takes no raw signal; leave its signal field empty"
            )
        listed = tuple(base / p.strip() for p in signal_text.split(",") if p.strip())
        signal, notes = distinct_paths(listed, key)
        signal_format = check_signal(signal, key) if kind.needs_signal else ""
        sample = Sample(
            name, signal, base / row.reads, base / row.reference, signal_format, tuple(notes),
            kind.name, base / reads2 if reads2 else None, group, base / vcf if vcf else None,
        )  # fmt: skip
        check_staged_input(sample, kind, key)
        if vcf:
            check_phased_vcf(sample, kind, key)
        check_reference(sample.reference, key)
        samples[name] = sample
    return samples


def check_phased_vcf(sample: Sample, kind: InputKind, key: str) -> None:
    """Fail unless a sample with a phased VCF is of a kind whose pileup reads its aligned
    reads (modbam, hifi: the haplotagged BAM is piled up) and the VCF has its sample."""
    if kind.staging != "tagged":
        raise InputError(
            f"{key}: a phased VCF haplotags the aligned reads of a modBAM sample (kind modbam or "
            f"hifi); a {kind.name} sample's pileup reads nanopolish's calls, not its reads: "
            "leave its phased_vcf field empty"
        )
    check_phased_genotypes(sample.phased_vcf, vcf_sample(sample.phased_vcf, sample.name, key), key)


def check_staged_input(sample: Sample, kind: InputKind, key: str) -> None:
    """Fail unless the sample's reads are what its kind's staging reads (kinds.STAGINGS)."""
    if kind.staging == "tagged":
        check_modbam_reads(sample.reads, key)
    elif kind.staging == "short_reads":
        check_short_reads(sample.reads, sample.reads2, key)
    else:
        check_reads(sample.reads, key)


def simulated_samples(simulate: dict[str, dict], base: Path, folder: Path) -> dict[str, Sample]:
    """Samples the simulator makes (config `simulate:`), at their paths in folder/<name>: raw
    signal and its basecalls (kind signal, the default), or an unaligned modBAM (kind modbam)."""
    samples = {}
    for name, settings in simulate.items():
        reference = base / settings["reference"]
        check_reference(reference, f"config simulate.{name}")
        out = folder / name
        kind = KINDS[settings.get("kind", DEFAULT_KIND)]
        check_simulated_truth(name, settings, kind.name)
        if not kind.needs_signal:  # the simulator's basecalled modBAM
            samples[name] = Sample(
                name, (), out / "reads.modbam.bam", reference, signal_format="", kind=kind.name,
                group=settings.get("group", ""),
            )  # fmt: skip
        else:
            samples[name] = Sample(
                name, (out / "fast5_multi",), out / "reads.fastq", reference,
                group=settings.get("group", ""),
            )  # fmt: skip
    return samples


def check_simulated_truth(name: str, settings: dict, kind: str) -> None:
    """InputError for a simulate: setting that would make nothing: HP tags on reads that carry
    no tags, a group that differs in no region."""
    where = f"config simulate.{name}"
    if settings.get("haplotagged", 0) and not KINDS[kind].stages_tagged_reads:
        tagged = next(k for k in KINDS if k != kind and KINDS[k].stages_tagged_reads)
        raise InputError(
            f"{where}.haplotagged: {settings['haplotagged']} is for kind {tagged} (its reads carry "
            f"HP tags); {name} is a {kind} sample, whose calls carry none: set {where}.kind: "
            f"{tagged}"
        )
    if settings.get("group_differs") and not settings.get("group_regions", 0):
        raise InputError(
            f"{where}.group_differs: true, but {where}.group_regions is 0: no region would "
            "differ (give the number of DMRs, the same in every sample of the cohort)"
        )


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
        raise InputError(
            f"no samples: {sheet} has no rows and config simulate: has none (the demo is off)"
        )
    check_reference_names(samples, sheet)
    return samples


def sample_groups(samples: dict[str, Sample]) -> dict[str, list[str]]:
    """The run's groups (the sheet's group column, simulate.<name>.group): group -> its samples,
    both in the order the samples come (sheet first, then the simulated ones)."""
    groups: dict[str, list[str]] = {}
    for sample in samples.values():
        if sample.group:
            groups.setdefault(sample.group, []).append(sample.name)
    return groups


def check_phased_samples(samples: Iterable[Sample]) -> None:
    """pileup.phased: fail, naming the first, when a sample's pileup cannot have haplotags: a
    signal sample's modBAM is made from nanopolish's calls, without its reads' tags."""
    for sample in samples:
        if sample.input_kind.runs("pileup") and not sample.input_kind.stages_tagged_reads:
            raise InputError(
                f"pileup.phased: sample '{sample.name}' is a {sample.kind} sample: its pileup "
                "reads nanopolish's calls, which carry no haplotags (only modbam and hifi "
                "samples are phased); run it without pileup.phased (a simulated one: "
                "--config simulate=none)"
            )


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


def fast5_links(files: list[Path]) -> list[tuple[Path, str]]:
    """Where each FAST5 file is linked for nanopolish index (which reads only '*.fast5' names):
    '<k>/<name>.fast5', k numbering the files' folders, so equal names in different folders
    (Guppy's batch_0.fast5) stay apart."""
    folders: dict[Path, int] = {}
    links: list[tuple[Path, str]] = []
    taken: set[str] = set()
    for path in files:
        k = folders.setdefault(path.resolve().parent, len(folders) + 1)
        name = path.name if path.suffix == ".fast5" else path.stem + ".fast5"
        link = f"{k}/{name}" if f"{k}/{name}" not in taken else f"{k}/{path.name}.fast5"
        taken.add(link)
        links.append((path, link))
    return links


def check_aligner(samples: Iterable[Sample], aligner: str) -> None:
    """Fail, naming the first sample, when the config's aligner cannot align its kind (SNAP
    aligns short reads only): before any job, not in the align job."""
    for sample in samples:
        try:
            sample.input_kind.aligner_preset(aligner, sample.name)
        except InputError as err:
            raise InputError(f"aligner: sample '{sample.name}': {err}") from None
