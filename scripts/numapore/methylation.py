"""Per-site CpG methylation frequency from nanopolish call-methylation tables.

Same semantics as nanopolish's scripts/calculate_methylation_frequency.py: a call counts when
|log_lik_ratio| >= threshold; it is methylated when log_lik_ratio > 0; a multi-CpG group adds
num_motifs called sites, or, with split_groups, one site per CG of its sequence.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from typing import IO
from collections.abc import Iterable, Iterator

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


@dataclass
class SiteStats:
    """Counts for one CpG site or group: reads, called sites and methylated called sites."""

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


def read_calls(handle: IO[str], source: str = "calls") -> Iterator[dict[str, str]]:
    """Yield call-methylation rows as dicts, failing clearly if the header is not nanopolish's."""
    reader = csv.DictReader(handle, delimiter="\t")
    missing = set(CALL_COLUMNS) - set(reader.fieldnames or [])
    if missing:
        raise ValueError(f"{source}: not a nanopolish call table, missing {sorted(missing)}")
    yield from reader


def site_frequencies(
    calls: Iterable[dict[str, str]], threshold: float = 2.0, split_groups: bool = False
) -> dict[Site, SiteStats]:
    """Aggregate per-read calls into per-site statistics keyed by (chromosome, start, end)."""
    sites: dict[Site, SiteStats] = {}

    def add(key: Site, n_sites: int, methylated: bool, sequence: str) -> None:
        stats = sites.setdefault(key, SiteStats(n_sites, sequence))
        stats.num_reads += 1
        stats.called_sites += n_sites
        if methylated:
            stats.called_sites_methylated += n_sites

    for call in calls:
        n_sites = int(call["num_motifs"])
        llr = float(call["log_lik_ratio"])
        if abs(llr) < threshold:  # ambiguous call
            continue
        chrom, start, sequence = call["chromosome"], int(call["start"]), call["sequence"]
        if split_groups and n_sites > 1:
            # Positions of each CG relative to the first one, which sits at 'start'.
            first = sequence.find("CG")
            pos = first
            while pos != -1:
                site = start + pos - first
                add((chrom, site, site), 1, llr > 0, "split-group")
                pos = sequence.find("CG", pos + 1)
        else:
            add((chrom, start, int(call["end"])), n_sites, llr > 0, sequence)
    return sites


def write_frequency_tsv(sites: dict[Site, SiteStats], handle: IO[str]) -> int:
    """Write the frequency table sorted by site; return the number of rows."""
    handle.write("\t".join(FREQUENCY_COLUMNS) + "\n")
    rows = 0
    for (chrom, start, end), s in sorted(sites.items()):
        if s.called_sites == 0:
            continue
        handle.write(
            f"{chrom}\t{start}\t{end}\t{s.group_size}\t{s.called_sites}\t"
            f"{s.called_sites_methylated}\t{s.frequency:.3f}\t{s.sequence}\n"
        )
        rows += 1
    return rows


def write_bedmethyl(sites: dict[Site, SiteStats], handle: IO[str]) -> int:
    """Write sites as bedMethyl (BED9 + coverage + percent); return the number of rows.

    nanopolish reports both strands on the forward-strand C, so each record spans the C of the
    first to the C of the last CpG of the group, strand '.', coverage = reads with a call.
    """
    rows = 0
    for (chrom, start, end), s in sorted(sites.items()):
        if s.called_sites == 0:
            continue
        percent = round(100 * s.frequency)
        score = min(s.num_reads, 1000)
        handle.write(
            f"{chrom}\t{start}\t{end + 1}\tm\t{score}\t.\t{start}\t{end + 1}\t0,0,0\t"
            f"{s.num_reads}\t{percent}\n"
        )
        rows += 1
    return rows
