"""Statistics over named region sets (config regions:, issue 56 item 3): per region set, one
table of `numapore stats` (modkit 0.6.1's `modkit stats`) over the run's bedMethyl and one of
`numapore entropy --regions` (modkit's `entropy`) over its modBAMs, each with a row per region
(and strand, for entropy) of every sample, haplotype and group.

- A sample: `numapore stats` on its bedMethyl; `numapore entropy` on the modBAM its pileup read.
- A haplotype (pileup.phased): stats on the sample's hp1/hp2 bedMethyl; entropy on the sample's
  reads whose HP tag is 1 or 2 (a scratch BAM of them), at the sample's threshold.
- A group (the sheet's or simulate's `group`): stats over the summed counts of its samples'
  bedMethyl, which is what `modkit bedmethyl merge` of them then `modkit stats` gives (stats
  counts every record with valid coverage: --min-coverage 1, its default); entropy on the
  group's reads pooled (one `--in-bam` per sample, as modkit entropy takes several).

Entropy's pass threshold is the pileup's: pileup.filter_threshold when it is a number, the
probability of nanopolish's LLR threshold for a signal sample, else estimated as the pileup
estimates it (pileup.filter_percentile of the sample's calls); a haplotype has its sample's, a
group with estimated thresholds the float32 mean of its samples' (modkit 0.6.1 would estimate
one from the pooled calls; numapore's entropy takes one threshold for several BAMs).

The region sets are checked before any job (check_region_set): one InputError line naming the
set, its file and line for a file that cannot be read, holds no region, or has a line that is
not BED, a start after its end, a contig not in a sample's reference or an end beyond it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from numapore.base.errors import InputError
from numapore.base.textfiles import open_maybe_gzip
from numapore.methylation.bedmethyl import code_key, f32

STATS_FIRST = ["level", "of", "chrom", "start", "end", "name", "strand"]
ENTROPY_COLUMNS = [
    "level", "of", "chrom", "start", "end", "region_name", "mean_entropy", "strand",
    "median_entropy", "min_entropy", "max_entropy", "mean_num_reads", "min_num_reads",
    "max_num_reads", "successful_window_count", "failed_window_count",
]  # fmt: skip


# ---- the config's region sets, checked before any job


def reference_lengths(fasta: str | os.PathLike, prepared: str | None = None) -> dict[str, int]:
    """A reference's contig lengths: from a .fai newer than it (its own, or that of its
    prepared copy), else read from the FASTA (possibly gzip-compressed)."""
    for fai in (Path(f"{fasta}.fai"), Path(f"{prepared}.fai") if prepared else None):
        if fai and fai.is_file() and fai.stat().st_mtime >= Path(fasta).stat().st_mtime:
            with open(fai) as handle:
                rows = (line.split("\t") for line in handle)
                return {f[0]: int(f[1]) for f in rows if len(f) > 1}
    lengths: dict[str, int] = {}
    name = None
    with open_maybe_gzip(fasta, "rt") as handle:
        for line in handle:
            if line.startswith(">"):
                name = line[1:].split(maxsplit=1)[0] if line[1:].strip() else ""
                lengths[name] = 0
            elif name is not None:
                lengths[name] += len(line.strip())
    return lengths


def bed_lines(name: str, path: str) -> list[tuple[int, str]]:
    """A set's BED lines with their line numbers: blank lines and the leading '#' lines left
    out (as `numapore stats` reads them). InputError for a file that cannot be read."""
    where = f"config regions.{name}: {path}"
    try:
        with open(path, encoding="utf-8") as handle:
            lines = [(i, line.rstrip("\n").rstrip("\r")) for i, line in enumerate(handle, 1)]
    except IsADirectoryError:
        raise InputError(f"{where}: a folder, not a BED file") from None
    except FileNotFoundError:
        raise InputError(f"{where}: no such file") from None
    except OSError as err:
        raise InputError(f"{where}: cannot be read ({err.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(f"{where}: not a BED file (binary; a compressed BED?)") from None
    while lines and lines[0][1].startswith("#"):
        lines.pop(0)
    return [(i, line) for i, line in lines if line.strip()]


def check_region_set(name: str, path: str, references: Mapping[str, Mapping[str, int]]) -> int:
    """A region set's BED file checked against every reference its samples use (name ->
    contig lengths); its region count. InputError, one line, for the first mistake."""
    lines = bed_lines(name, path)
    if not lines:
        raise InputError(f"config regions.{name}: {path}: no BED region in it (empty)")
    stranded = len(lines[0][1].split("\t")) > 5
    for number, line in lines:
        where = f"config regions.{name}: {path}, line {number}"
        fields = line.split("\t")
        try:
            chrom, start, end = fields[0], int(fields[1]), int(fields[2])
        except (IndexError, ValueError):
            raise InputError(
                f"{where}: not a BED line (chrom, start and end, tab-separated): {line[:80]!r}"
            ) from None
        if start < 0 or end < 0:
            raise InputError(f"{where}: a negative position ({start}, {end})")
        if start > end:
            raise InputError(f"{where}: start {start} is after end {end}")
        if stranded and fields[5] not in ("+", "-", "."):
            raise InputError(f"{where}: strand {fields[5]!r} (column 6) is not +, - or .")
        for ref, lengths in references.items():
            if chrom not in lengths:
                raise InputError(f"{where}: contig {chrom!r} is not in the reference {ref}")
            if end > lengths[chrom]:
                raise InputError(
                    f"{where}: end {end} is beyond contig {chrom!r} ({lengths[chrom]} bp in "
                    f"the reference {ref})"
                )
    return len(lines)


# ---- numapore stats per sample, haplotype and group


def region_sums(bedmethyls: Sequence[str], regions) -> list[tuple]:
    """(region, {code: [N_mod, N_valid_cov]}) summed over the bedMethyl files, for every
    region on a contig some file has (as `numapore stats` of their merge)."""
    import pysam

    from numapore.modbam.stats import region_counts

    per_file = []
    for path in bedmethyls:
        with pysam.TabixFile(str(path)) as tabix:
            contigs = set(tabix.contigs)
            per_file.append(
                {
                    i: region_counts(tabix, region, 1, None)
                    for i, region in enumerate(regions)
                    if region.chrom in contigs
                }
            )
    rows = []
    for i, region in enumerate(regions):
        got = [counts[i] for counts in per_file if i in counts]
        if not got:
            continue
        total: dict[str, list[int]] = {}
        for counts in got:
            for code, (n_mod, n_valid) in counts.items():
                summed = total.setdefault(code, [0, 0])
                summed[0] += n_mod
                summed[1] += n_valid
        rows.append((region, total))
    return rows


def stats_table(entities: Sequence[Mapping], bed: str) -> list[str]:
    """The stats table's lines (header first): per entity ({'level', 'of', 'bedmethyl': [...]})
    its rows of `numapore stats`; codes as columns, those of any entity, sorted as modkit."""
    from numapore.modbam.stats import percent_text, read_regions

    regions = read_regions(bed)
    done = [(e, region_sums(e["bedmethyl"], regions)) for e in entities]
    codes = sorted({c for _, rows in done for _, counts in rows for c in counts}, key=code_key)
    names = [f"{kind}_{code}" for code in codes for kind in ("count", "count_valid", "percent")]
    lines = ["\t".join([*STATS_FIRST, *names])]
    for entity, rows in done:
        for region, counts in rows:
            cells = [entity["level"], entity["of"], region.chrom, str(region.start)]
            cells += [str(region.end), region.name, region.strand]
            for code in codes:
                n_mod, n_valid = counts.get(code, (0, 0))
                cells += [str(n_mod), str(n_valid), percent_text(n_mod, n_valid)]
            lines.append("\t".join(cells))
    return lines


# ---- numapore entropy per sample, haplotype and group


def motif_arguments(motif: str, combine_strands: bool) -> list[str]:
    """`numapore entropy`'s motif options for a pileup motif (pileup.combine_strands)."""
    from numapore.methylation.motifs import MOTIFS
    from numapore.pileup.settings import modkit_motif

    if motif == "cpg" and combine_strands:
        return ["--cpg"]
    sequence, offset = modkit_motif(motif)
    combine = combine_strands and MOTIFS[motif].palindrome
    return ["--motif", sequence, str(offset), *(["--combine-strands"] if combine else [])]


def estimated_threshold(bam: str, motif: str, percentile: float) -> float:
    """The pass threshold the pileup (and `numapore entropy` with one BAM) estimates from a
    modBAM: the percentile of its sampled calls, of the motif's modified base."""
    from numapore.pileup.common import BASE_INDEX, Options
    from numapore.pileup.settings import modkit_motif
    from numapore.pileup.thresholds import make_caller

    sequence, offset = modkit_motif(motif)
    caller = make_caller(bam, Options(filter_percentile=percentile, num_reads=10_042), None)
    return float(caller.per_base.get(BASE_INDEX[sequence[offset]], 0.0))


def haplotype_bam(bam: str, haplotype: int, out: Path) -> str:
    """A scratch BAM (indexed) of the modBAM's reads whose HP tag is haplotype."""
    import pysam

    with pysam.AlignmentFile(bam) as source:
        sink = pysam.AlignmentFile(str(out), "wb", template=source)
        for read in source:
            if read.has_tag("HP") and read.get_tag("HP") == haplotype:
                sink.write(read)
        sink.close()
    pysam.index(str(out))
    return str(out)


def entropy_arguments(entity: Mapping, bed: str, motif_args: Sequence[str], out: str) -> list:
    """`numapore entropy`'s command line (without the program) for an entity's BAMs."""
    args = [a for bam in entity["bams"] for a in ("--in-bam", bam)]
    args += ["--ref", entity["reference"], *motif_args, "--regions", bed, "-o", out]
    if entity["threshold"] is not None:
        return [*args, "--filter-threshold", repr(entity["threshold"])]
    return [*args, "--filter-percentile", repr(entity["percentile"])]


def entropy_table(entities: Sequence[Mapping], bed: str, motif: str, combine: bool, scratch: Path):
    """The entropy table's lines (header first): per entity ({'level', 'of', 'bams',
    'reference', 'haplotype' (None, 1, 2), 'threshold' (None: entropy's estimate), 'percentile',
    'mean_of': [(BAM, threshold or None: estimated)] whose mean it takes}) the regions.bed
    rows of `numapore entropy --regions` (motif, combine: pileup.motif and .combine_strands);
    each command is printed (the job's log)."""
    from numapore.modbam import entropy

    estimates: dict[str, float] = {}
    lines = ["\t".join(ENTROPY_COLUMNS)]
    for i, given in enumerate(entities):
        entity = dict(given)
        if entity.get("mean_of"):  # a haplotype's (its sample's) or a group's threshold
            found = []
            for bam, fixed in entity["mean_of"]:
                if fixed is None and bam not in estimates:
                    estimates[bam] = estimated_threshold(bam, motif, entity["percentile"])
                found.append(estimates[bam] if fixed is None else fixed)
            entity["threshold"] = float(f32(f32(sum(found)) / f32(len(found))))
        if entity.get("haplotype"):
            out = scratch / f"{i}.hp{entity['haplotype']}.bam"
            entity["bams"] = [haplotype_bam(entity["bams"][0], entity["haplotype"], out)]
        folder = scratch / f"{i}.entropy"
        args = entropy_arguments(entity, bed, motif_arguments(motif, combine), str(folder))
        print(f"{entity['level']} {entity['of']}: numapore entropy {' '.join(args)}", flush=True)
        if entropy.main(args):
            raise InputError(f"numapore entropy failed on {entity['level']} {entity['of']}")
        for row in (folder / "regions.bed").read_text().splitlines():
            lines.append(f"{entity['level']}\t{entity['of']}\t{row}")
    return lines


def write_table(lines: Sequence[str], out: str, setting: str, what: str) -> int:
    """Write the table (complete or absent); its data rows. A table without any says so on
    stderr, naming the setting that emptied it."""
    from numapore.base.atomic import atomic_output

    with atomic_output(out) as tmp:
        Path(tmp).write_text("".join(f"{line}\n" for line in lines))
    rows = len(lines) - 1
    print(f"{out}: {rows} rows")
    if rows == 0:
        print(f"numapore: {out} has no row: {what} (config {setting})", file=sys.stderr)
    return rows


def write_stats(entities: Sequence[Mapping], bed: str, out: str, name: str) -> int:
    """A region set's stats table (rule region_stats); its rows."""
    why = f"no region of {bed} is on a contig of the bedMethyl files"
    return write_table(stats_table(entities, bed), out, f"regions.{name}", why)


def write_entropy(
    entities: Sequence[Mapping], bed: str, motif: str, combine: bool, out: str, name: str
) -> int:
    """A region set's entropy table (rule region_entropy); its rows."""
    from numapore.base.atomic import scratch_dir

    with scratch_dir(out) as scratch:
        lines = entropy_table(entities, bed, motif, combine, scratch)
    why = (
        f"no region of {bed} has an entropy window ({motif}: 4 positions within 50 bases, each "
        "read by 3 reads or more, numapore entropy's defaults)"
    )
    return write_table(lines, out, f"regions.{name}", why)
