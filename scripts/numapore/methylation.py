"""Per-site methylation from nanopolish call-methylation tables, for every motif it calls.

The frequency table is nanopolish's own calculate_methylation_frequency.py output, byte for byte
(tests run that script on real call tables): a call counts when |log_lik_ratio| >= threshold x
num_motifs; it is methylated when log_lik_ratio > 0; a group adds num_motifs called sites, or,
with split_groups, one site per motif of its sequence (that script splits on "CG" whatever the
motif; here each motif splits on its own pattern, so non-CpG tables agree with it unsplit only).

The bedMethyl table has one row per motif site (groups always split), 18 columns in modkit's
order. The calls are streamed: only per-site counters are kept, never the call rows.
"""

from __future__ import annotations

import csv
import math
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO


@dataclass(frozen=True)
class Motif:
    """A motif nanopolish calls (`-q name`): its pattern and where its modified base sits.

    nanopolish reports every call on the forward strand, `start` at the motif's first base.
    forward_offset: the modified base of the forward strand, from `start`; reverse_offset: the
    forward-strand position of the reverse strand's modified base (the complement of what a
    reverse-strand read carries there).
    """

    name: str
    pattern: str  # a regular expression on the forward strand
    base: str  # the canonical base that carries the modification (SAM MM)
    code: str  # the SAM MM / bedMethyl modification code
    forward_offset: int
    reverse_offset: int

    def sites(self, sequence: str) -> list[int]:
        """Offsets of every (possibly overlapping) motif in sequence, from its first one."""
        hits = [m.start() for m in re.finditer(f"(?={self.pattern})", sequence)]
        return [h - hits[0] for h in hits]


# nanopolish 0.14's -q values. CpG: 5mC on both Cs of CG; GpC (NOMe-seq): the C of GC; dam: 6mA
# of GATC; dcm: 5mC on the second C of CCWGG.
MOTIFS = {
    m.name: m
    for m in [
        Motif("cpg", "CG", "C", "m", 0, 1),
        Motif("gpc", "GC", "C", "m", 1, 0),
        Motif("dam", "GATC", "A", "a", 1, 2),
        Motif("dcm", "CC[AT]GG", "C", "m", 1, 3),
    ]
}

FREQUENCY_COLUMNS = [
    "chromosome",
    "start",
    "end",
    "num_motifs_in_group",
    "called_sites",
    "called_sites_methylated",
    "methylated_frequency",
    "group_sequence",
]
CALL_COLUMNS = [
    "chromosome",
    "strand",
    "start",
    "end",
    "read_name",
    "log_lik_ratio",
    "log_lik_methylated",
    "log_lik_unmethylated",
    "num_calling_strands",
    "num_motifs",
    "sequence",
]
# modkit's bedMethyl columns (UCSC's bedMethyl documentation), after the BED9 ones.
BEDMETHYL_COUNTS = [
    "N_valid_cov",
    "percent_modified",
    "N_mod",
    "N_canonical",
    "N_other_mod",
    "N_delete",
    "N_fail",
    "N_diff",
    "N_nocall",
]
REFERENCE_SCRIPT = "calculate_methylation_frequency.py"


@dataclass(slots=True)
class SiteStats:
    """Counts for one site or group: reads, called sites and methylated called sites."""

    group_size: int
    sequence: str
    num_reads: int = 0
    called_sites: int = 0
    called_sites_methylated: int = 0

    @property
    def frequency(self) -> float:
        """Fraction of called sites that are methylated."""
        return self.called_sites_methylated / self.called_sites


Site = tuple[str, int, int]


@dataclass
class Pileup:
    """Everything the outputs need from a call table, gathered in one pass over its rows.

    groups: the frequency table's keys (split or not); positions: per chromosome, the forward
    modified base of every motif site -> [confident calls, methylated, below threshold];
    calls / confident_calls / confident_unmethylated: per call, |llr| >= threshold (not x
    num_motifs), for the summary figure users compare with by-hand counts.
    """

    groups: dict[Site, SiteStats] = field(default_factory=dict)
    positions: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    calls: int = 0
    confident_calls: int = 0
    confident_unmethylated: int = 0


def read_calls(handle: IO[str], source: str = "calls") -> Iterator[dict[str, str]]:
    """Yield call-methylation rows as dicts, failing clearly if the header is not nanopolish's."""
    reader = csv.DictReader(handle, delimiter="\t")
    missing = set(CALL_COLUMNS) - set(reader.fieldnames or [])
    if missing:
        raise ValueError(f"{source}: not a nanopolish call table, missing {sorted(missing)}")
    yield from reader


def pileup(
    calls: Iterable[dict[str, str]],
    motif: Motif = MOTIFS["cpg"],
    threshold: float = 2.0,
    split_groups: bool = False,
) -> Pileup:
    """Aggregate per-read calls (streamed) into per-group and per-position counters."""
    out = Pileup()
    groups = out.groups

    def add(key: Site, n_sites: int, methylated: bool, sequence: str) -> None:
        stats = groups.get(key)
        if stats is None:
            stats = groups[key] = SiteStats(n_sites, sequence)
        stats.num_reads += 1
        stats.called_sites += n_sites
        if methylated:
            stats.called_sites_methylated += n_sites

    for call in calls:
        n_sites = int(call["num_motifs"])
        llr = float(call["log_lik_ratio"])
        chrom, start, sequence = call["chromosome"], int(call["start"]), call["sequence"]
        out.calls += 1
        if abs(llr) >= threshold:
            out.confident_calls += 1
            out.confident_unmethylated += llr <= 0
        confident = abs(llr) >= threshold * n_sites  # nanopolish's rule: scaled by the group
        offsets = motif.sites(sequence)
        by_position = out.positions.setdefault(chrom, {})
        for offset in offsets:
            counts = by_position.setdefault(start + offset + motif.forward_offset, [0, 0, 0])
            if confident:
                counts[0] += 1
                counts[1] += llr > 0
            else:
                counts[2] += 1
        if not confident:
            continue
        if split_groups and n_sites > 1:
            for offset in offsets:
                add((chrom, start + offset, start + offset), 1, llr > 0, "split-group")
        else:
            add((chrom, start, int(call["end"])), n_sites, llr > 0, sequence)
    return out


def write_frequency_tsv(sites: dict[Site, SiteStats], handle: IO[str]) -> int:
    """Write the frequency table as nanopolish's script prints it; return the number of rows."""
    handle.write("\t".join(FREQUENCY_COLUMNS) + "\n")
    rows = 0
    for (chrom, start, end), s in sorted(sites.items()):
        if s.called_sites == 0:
            continue
        handle.write(
            f"{chrom}\t{start}\t{end}\t{s.group_size:d}\t{s.called_sites:d}\t"
            f"{s.called_sites_methylated:d}\t{s.frequency:.3f}\t{s.sequence}\n"
        )
        rows += 1
    return rows


def write_bedmethyl(
    positions: dict[str, dict[int, list[int]]], motif: Motif, handle: IO[str]
) -> int:
    """Write one bedMethyl row per motif site (modkit's 18 columns); return the number of rows.

    Both strands are combined on the forward strand's modified base (strand '+', as modkit's
    --combine-strands); N_valid_cov = confident calls, N_fail = calls below the threshold; a
    site with only the latter is kept (percent 0) so no call is left out.
    """
    rows = 0
    for chrom in sorted(positions):
        for pos, (valid, methylated, failed) in sorted(positions[chrom].items()):
            percent = 100 * methylated / valid if valid else 0.0
            handle.write(
                f"{chrom}\t{pos}\t{pos + 1}\t{motif.code}\t{valid}\t+\t{pos}\t{pos + 1}\t"
                f"255,0,0\t{valid}\t{percent:.2f}\t{methylated}\t{valid - methylated}\t"
                f"0\t0\t{failed}\t0\t0\n"
            )
            rows += 1
    return rows


def llr_to_ml(llr: float) -> int:
    """The SAM ML byte of a call: p = 1 / (1 + e^-LLR) (the posterior at even prior odds),
    N = ceil(256 p) - 1, the bin (N/256, (N+1)/256] holding p; N >= 128 exactly when LLR > 0."""
    p = 0.5 * (1 + math.tanh(llr / 2))  # = logistic(llr), without overflow
    n = min(255, max(0, math.ceil(256 * p) - 1))
    return max(n, 128) if llr > 0 else min(n, 127)


def reference_frequency_script(nanopolish: str | None = None) -> Path:
    """nanopolish's calculate_methylation_frequency.py beside the nanopolish binary (Debian:
    /usr/lib/nanopolish; bioconda: bin/, share/nanopolish/scripts/); a clear error if absent."""
    binary = nanopolish or shutil.which("nanopolish")
    if binary is None:
        raise FileNotFoundError(
            f"numapore: cannot run nanopolish's {REFERENCE_SCRIPT}: nanopolish is not on PATH"
        )
    bindir = Path(binary).resolve().parent
    prefixes = [bindir.parent]
    if os.environ.get("CONDA_PREFIX"):
        prefixes.append(Path(os.environ["CONDA_PREFIX"]))
    places = [bindir / REFERENCE_SCRIPT]
    for prefix in prefixes:
        places += [
            prefix / "bin" / REFERENCE_SCRIPT,
            prefix / "lib" / "nanopolish" / REFERENCE_SCRIPT,
            prefix / "share" / "nanopolish" / "scripts" / REFERENCE_SCRIPT,
        ]
    for place in places:
        if place.is_file():
            return place
    raise FileNotFoundError(
        f"numapore: cannot run nanopolish's {REFERENCE_SCRIPT}: not found beside {binary} "
        f"(looked in {', '.join(map(str, dict.fromkeys(places)))}); this nanopolish install "
        "does not ship its scripts"
    )
