"""`numapore stats`: per BED region, the summed counts of a bgzipped, tabix-indexed bedMethyl,
as modkit 0.6.1's `modkit stats` writes them:

    numapore stats IN.bed.gz --regions REGIONS.bed -o OUT.tsv [--mod-codes m] [--min-coverage N]

One row per region in BED order: chrom start end name strand, then per code (sorted as modkit
sorts codes) count_x (sum of N_mod), count_valid_x (sum of N_valid_cov) and percent_x (float32,
0 without coverage). A + or - region sums that strand's records, a . region both; records with
N_valid_cov below --min-coverage are left out. A region on a contig the bedMethyl lacks gets no
row (as in modkit; numapore names it on stderr).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from itertools import accumulate, islice

from numapore.base import compiled
from numapore.methylation.bedmethyl import code_key, f32, f32_text, parse_line
from numapore.modbam.command import CommandError, Parser, add_ignored, run_main


@dataclass(frozen=True)
class Region:
    """A BED record: BED3 to BED5 are unstranded ('.'), BED6+ give a strand."""

    chrom: str
    start: int
    end: int
    name: str
    strand: str


def read_regions(path: str) -> list[Region]:
    """The regions of a BED file (leading # lines skipped), in file order."""
    try:
        with open(path) as handle:
            lines = [line.rstrip("\n") for line in handle]
    except UnicodeDecodeError:
        raise CommandError(f"{path}: not a BED file (binary)") from None
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise CommandError(f"{path}: no BED regions")
    stranded = len(lines[0].split("\t")) > 5
    regions = []
    for line in lines:
        fields = line.split("\t")
        try:
            chrom, start, end = fields[0], int(fields[1]), int(fields[2])
        except (IndexError, ValueError):
            raise CommandError(f"{path}: not a BED line: {line!r}") from None
        name = fields[3] if len(fields) > 3 else "."
        strand = fields[5] if stranded and len(fields) > 5 else "."
        if strand not in ("+", "-", ".") or start < 0 or end < start:
            raise CommandError(f"{path}: not a BED line: {line!r}")
        regions.append(Region(chrom, start, end, name, strand))
    return regions


def region_counts(tabix, region: Region, min_coverage: int, codes) -> dict[str, list[int]]:
    """The region's [sum N_mod, sum N_valid_cov] per code (Python's reading; the compiled
    core's bm_sum_regions does the same in RegionSums)."""
    counts: dict[str, list[int]] = {}
    for line in tabix.fetch(region.chrom, region.start, region.end):
        row = parse_line(line)
        if row.valid_cov < min_coverage:
            continue
        if region.strand != "." and row.strand not in (region.strand, "."):
            continue
        code = row.name.split(",")[0]
        if codes is not None and code not in codes:
            continue
        total = counts.setdefault(code, [0, 0])
        total[0] += row.n_mod
        total[1] += row.valid_cov
    return counts


CLUSTER = 256  # regions summed over one query at most
LINES = 4096  # lines of a query read in C at a time


class RegionSums:
    """bedmethyl_rows.c's sums (bm_sum_regions): the regions of a contig that overlap one
    another summed over one tabix query (each row read once), the lines read in C, a line it
    leaves to Python parsed by parse_line."""

    def __init__(self, core, min_coverage: int, codes):
        """Sums of the codes' rows (codes None: every code's)."""
        self.ffi, self.lib, self.min_coverage, self.wanted = core.ffi, core.lib, min_coverage, codes
        self.codes = None
        if codes is not None:
            joined = b"\0".join(code.encode() for code in sorted(codes))
            self.codes = (self.ffi.new("char[]", joined), len(joined))

    def all_counts(self, tabix, regions: list[Region]) -> list[dict[str, list[int]]]:
        """region_counts of each region, in order."""
        results: list = [None] * len(regions)
        by_chrom: dict[str, list[int]] = {}
        for i, region in enumerate(regions):
            if region.start == region.end:
                results[i] = region_counts(tabix, region, self.min_coverage, self.wanted)
            else:
                by_chrom.setdefault(region.chrom, []).append(i)
        for order in by_chrom.values():
            order.sort(key=lambda i: (regions[i].start, regions[i].end))
            cluster, reach = [], -1
            for i in order:
                if cluster and (regions[i].start >= reach or len(cluster) == CLUSTER):
                    self._cluster(tabix, regions, cluster, results)
                    cluster, reach = [], -1
                cluster.append(i)
                reach = max(reach, regions[i].end)
            self._cluster(tabix, regions, cluster, results)
        return results

    def _cluster(self, tabix, regions: list[Region], cluster: list[int], results: list) -> None:
        """The counts of the cluster's regions (sorted by start) into results."""
        ffi, lib, n = self.ffi, self.lib, len(cluster)
        sums = ffi.new("bm_sums[]", n)
        starts = ffi.new("int64_t[]", [regions[i].start for i in cluster])
        ends = ffi.new("int64_t[]", [regions[i].end for i in cluster])
        reach = ffi.new("int64_t[]", list(accumulate(ends, max)))
        for k, i in enumerate(cluster):
            sums[k].min_coverage, sums[k].strand = self.min_coverage, regions[i].strand.encode()
        if self.codes is not None:
            sums[0].codes, sums[0].codes_len = self.codes
        first, lo = regions[cluster[0]], ffi.new("int64_t *")
        lines = tabix.fetch(first.chrom, first.start, max(ends))
        while data := "\n".join(islice(lines, LINES)).encode():  # a few lines at a time
            buf, pos = ffi.from_buffer(data), 0
            while pos < len(data):
                pos += lib.bm_sum_regions(sums, starts, ends, reach, n, lo, buf + pos,
                                          len(data) - pos)  # fmt: skip
                status = sums[0].status
                if status == lib.BM_PYTHON:
                    line = data[pos : pos + sums[0].bad_len].decode()
                    pos += sums[0].bad_len
                    status = self._python_row(line, sums, starts, ends, n)
                if status == lib.BM_CODES:  # more codes than bm_sums holds
                    for i in cluster:
                        results[i] = region_counts(tabix, regions[i], self.min_coverage,
                                                   self.wanted)  # fmt: skip
                    return
        for k, i in enumerate(cluster):
            results[i] = {
                ffi.string(sums[k].code[c]).decode(): [sums[k].sum_mod[c], sums[k].sum_valid[c]]
                for c in range(sums[k].ncodes)
            }

    def _python_row(self, line: str, sums, starts, ends, n: int) -> int:
        """A line C leaves to Python into the sums of the regions it overlaps: 0 or BM_CODES."""
        row = parse_line(line)
        stop = int(line.split("\t")[2])
        code = row.name.split(",")[0]
        if self.wanted is not None and code not in self.wanted:
            return 0
        raw_code, strand = code.encode(), row.strand.encode()
        for k in range(n):
            if starts[k] < stop and ends[k] > row.start:
                status = self.lib.bm_sum_row(sums + k, raw_code, len(raw_code), strand,
                                             len(strand), row.valid_cov, row.n_mod)  # fmt: skip
                if status:
                    return status
        return 0


def percent_text(n_mod: int, n_valid: int) -> str:
    """modkit's percent_modified: f32(n_mod / n_valid) * 100 in float32, 0 without coverage."""
    return f32_text(f32(f32(n_mod / n_valid) * 100.0) if n_valid else 0.0)


def stats_lines(in_bed: str, regions: list[Region], min_coverage: int, codes, header: bool):
    """The output's lines."""
    import pysam

    if not os.path.isfile(in_bed + ".tbi"):
        raise CommandError(f"{in_bed}: no tabix index ({in_bed}.tbi); make it with tabix -p bed")
    try:
        tabix = pysam.TabixFile(in_bed)
    except (OSError, ValueError) as err:
        raise CommandError(f"{in_bed}: not a bgzipped, indexed bedMethyl ({err})") from None
    core = compiled.load("numapore.pileup._pileup_core")
    summer = RegionSums(core, min_coverage, codes) if core is not None else None
    with tabix:
        contigs = set(tabix.contigs)
        kept = []
        for region in regions:
            if region.chrom not in contigs:
                print(f"numapore stats: the bedMethyl has no contig {region.chrom}: "
                      f"region {region.name} skipped", file=sys.stderr)  # fmt: skip
                continue
            kept.append(region)
        try:
            if summer is not None:
                counts = summer.all_counts(tabix, kept)
            else:
                counts = [region_counts(tabix, region, min_coverage, codes) for region in kept]
        except (ValueError, UnicodeDecodeError) as err:
            raise CommandError(f"{in_bed}: {err}") from None
        rows = list(zip(kept, counts, strict=True))
    columns = sorted(codes if codes is not None else {c for _, n in rows for c in n}, key=code_key)
    lines = []
    if header:
        names = [
            f"{kind}_{code}" for code in columns for kind in ("count", "count_valid", "percent")
        ]
        lines.append("\t".join(["#chrom", "start", "end", "name", "strand", *names]))
    for region, counts in rows:
        cells = [region.chrom, str(region.start), str(region.end), region.name, region.strand]
        for code in columns:
            n_mod, n_valid = counts.get(code, (0, 0))
            cells += [str(n_mod), str(n_valid), percent_text(n_mod, n_valid)]
        lines.append("\t".join(cells))
    return lines


def run(args) -> None:
    """Write the table of the parsed command line."""
    if args.min_coverage < 0:
        raise CommandError("--min-coverage must be 0 or more")
    to_file = args.out_table not in ("-", "stdout")
    if to_file and os.path.exists(args.out_table) and not args.force:
        raise CommandError(f"{args.out_table} exists (--force to overwrite)")
    codes = None
    if args.mod_codes:
        codes = {code for raw in args.mod_codes for code in raw.split(",") if code}
    regions = read_regions(args.regions)
    text = "".join(line + "\n" for line in stats_lines(
        args.in_bedmethyl, regions, args.min_coverage, codes, not args.no_header
    ))  # fmt: skip
    if not to_file:
        sys.stdout.write(text)
        return
    with open(args.out_table, "w") as out:
        out.write(text)


def main(argv: list[str] | None = None, prog: str = "numapore stats") -> int:
    """Parse argv (default sys.argv[1:]) and run."""
    parser = Parser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("in_bedmethyl", help="bgzipped bedMethyl with a .tbi beside it")
    parser.add_argument("--regions", required=True, help="BED of the regions")
    parser.add_argument("-o", "--out-table", "--out", required=True, help="output, - for stdout")
    parser.add_argument("-c", "--mod-codes", "--codes", action="append",
                        help="codes to report (comma-separated; default: all met)")  # fmt: skip
    parser.add_argument("-m", "--min-coverage", "--min-cov", type=int, default=1)
    parser.add_argument("--no-header", action="store_true")
    parser.add_argument("--force", action="store_true", help="overwrite the output")
    add_ignored(parser, "-t", "--threads", "--io-threads", "--log-filepath", "--log")
    return run_main(parser, argv, run)


if __name__ == "__main__":
    sys.exit(main())
