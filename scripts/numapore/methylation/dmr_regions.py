"""DSS jobs under a memory bound (config dmr.max_memory_gb): each DMR shard's sites cut into
regions that scripts/dmr_test.R tests one after the other, each small enough that the job's
peak memory stays under the bound.

The memory a DSS job takes, measured (benchmarks/README.md, bench_cohort.py): R with DSS loaded,
then per site of the region under test a cost growing with the samples (DSS's BSseq object,
DMLtest's smoothing and estimates), and per site of the whole shard the counts table R holds.
The bound gives the largest region; regions end only where two CpGs are farther apart than
DSS looks across (safe_gap: callDMR joins significant CpGs up to 5,000 bases apart, the
smoothing window, dis_merge), so no DMR and no smoothed estimate straddles two regions. Where a
stretch of dense CpGs longer than a region has no such gap, it is cut at its widest gap (said
in the job's log).

DSS estimates its dispersion prior over what it is given, so a region's results are DSS's on
that region alone, as with contig groups (scatter.dmr); the shard's fdr is recomputed over all
its regions. Without a bound a shard is one region: DSS on the whole shard, as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from numapore.base.errors import InputError

# callDMR's findBumps(sep = 5000) (DSS 2.46): significant CpGs up to this far apart are one bump
DSS_BUMP_SEP = 5000
# Measured with 12 samples (benchmarks/README.md, "The cohort at genome scale"): R and DSS
# loaded; per site of a region, fixed and per sample; per site of the shard's counts table.
R_AND_DSS_GIB = 1.0
REGION_BYTES_PER_SITE = 300
REGION_BYTES_PER_SITE_SAMPLE = 250
TABLE_BYTES_PER_SITE_SAMPLE = 16
SMALLEST_REGION = 10_000  # a bound that leaves room for fewer sites is refused


def dss_gib(region_sites: int, samples: int, shard_sites: int = 0) -> float:
    """The peak memory (GiB) of a DSS job testing regions of region_sites sites of samples
    samples, its shard holding shard_sites sites."""
    region = region_sites * (REGION_BYTES_PER_SITE + REGION_BYTES_PER_SITE_SAMPLE * samples)
    table = shard_sites * TABLE_BYTES_PER_SITE_SAMPLE * (samples + 1)
    return R_AND_DSS_GIB + (region + table) / 2**30


def max_region_sites(bound_gib: float, samples: int, shard_sites: int = 0) -> int:
    """The most sites of one region that keep a job of samples samples under bound_gib (0 when
    none do)."""
    room = (bound_gib - dss_gib(0, samples, shard_sites)) * 2**30
    per_site = REGION_BYTES_PER_SITE + REGION_BYTES_PER_SITE_SAMPLE * samples
    return max(0, math.floor(room / per_site))


def check_bound(bound_gib: float | None, contrast: str, samples: int) -> None:
    """config dmr.max_memory_gb against a contrast of samples columns: InputError when it
    leaves room for fewer than SMALLEST_REGION sites."""
    if bound_gib is None:
        return
    least = dss_gib(SMALLEST_REGION, samples)
    if max_region_sites(bound_gib, samples) < SMALLEST_REGION:
        raise InputError(
            f"config dmr.max_memory_gb: {bound_gib:g} is too small for DSS on contrast "
            f"'{contrast}' ({samples} samples): R and DSS take {R_AND_DSS_GIB:g} GiB before "
            f"any site, {least:.2f} GiB with {SMALLEST_REGION:,} sites; give at least "
            f"{math.ceil(least * 10) / 10:g}, or leave it unset (no bound)"
        )


def safe_gap(settings: Mapping[str, Any]) -> int:
    """The distance (bases) between two CpGs across which DSS joins nothing: callDMR's
    findBumps separation, the smoothing window, dis_merge."""
    return max(DSS_BUMP_SEP, int(settings["smoothing_span"]), int(settings["dis_merge"]))


def region_ids(
    chrom: Sequence[str], pos: Sequence[int], max_sites: int | None, min_gap: int
) -> tuple[np.ndarray, int]:
    """Each site's region (1, 2, ...; sites sorted by contig, then position): consecutive
    regions of at most max_sites sites (None: one region), each ending at a contig's end or
    before a gap wider than min_gap bases, else at the widest gap within reach; and how many
    ended so (in dense CpGs)."""
    n = len(pos)
    if max_sites is None or n <= max_sites:
        return np.ones(n, dtype=np.int64), 0
    positions = np.asarray(pos, dtype=np.int64)
    names = np.asarray(chrom, dtype=object)
    new_contig = np.r_[True, names[1:] != names[:-1]]
    width = np.r_[0, np.diff(positions)]
    width[new_contig] = np.iinfo(np.int64).max  # a contig's start: always a clean cut
    candidates = np.flatnonzero(width > min_gap)
    starts = [0]
    forced = 0
    while n - starts[-1] > max_sites:
        start = starts[-1]
        limit = start + max_sites
        k = np.searchsorted(candidates, limit, side="right") - 1
        if k >= 0 and candidates[k] > start:
            starts.append(int(candidates[k]))
        else:
            starts.append(start + 1 + int(np.argmax(width[start + 1 : limit + 1])))
            forced += 1
    ids = np.zeros(n, dtype=np.int64)
    ids[starts[1:]] = 1
    return np.cumsum(ids) + 1, forced
