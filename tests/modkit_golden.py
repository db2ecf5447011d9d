"""The workflow's bedMethyl against modkit's own (tests/data/modkit, golden.tsv): the files of
modkit 0.6.1 (the workflow's default semantics) compared with the run's bedMethyl, those of
modkit 0.4.4 with `numapore pileup --modkit-compat 0.4` of the run's modBAM (the switch).

Where modkit 0.6.1's file holds one of its bugs (golden.tsv's `differs`; the shared 0.6.1
suite's README names A and C, H is below), the check shows that the bug is the only
difference, from the run's modBAM and numapore's own strand-by-strand pileup:
- A: the generic path skips, per record, the first aligned position it visits after the
  record's last MM-listed position (with a motif it visits the motif positions only): that
  read's no call (or N_diff, for another base) is missing from modkit's row;
- C: with `--combine-strands` and a motif whose minus-strand offset is below its plus-strand
  one (GC 1), the minus-strand counts of an interval land in one row at the interval's start
  (up to --max-depth's 8,000 reads there);
- H: a primary record without an MM tag makes modkit's generic path drop its whole interval
  (`-i`, 1,000,000 bases), rows and all, with a DEBUG log line only ("unexpected error
  MM-tag-missing": `MmTagInfo::from_record(&record)?` in pileup_processor.rs); nanopolish's
  modBAMs keep the reads it did not call without tags.
"""

from __future__ import annotations

import collections
import gzip
import re
import shlex
import sys
from pathlib import Path

import pandas as pd
import forked_snakemake
import pysam

MODKIT_GOLDEN = Path(__file__).resolve().parent / "data" / "modkit"
INTERVAL = 1_000_000  # modkit 0.6.1's default -i
MAX_DEPTH = 8000  # modkit 0.6.1's default --max-depth, applied by its generic path
IUPAC = {"A": "A", "C": "C", "G": "G", "T": "T", "W": "[AT]", "S": "[CG]", "N": "[ACGT]"}
COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A"}


def rows_of(text: str) -> dict[tuple[str, int, str], list[str]]:
    """bedMethyl rows by (contig, start, name)."""
    rows = {}
    for line in text.splitlines():
        fields = line.split("\t")
        rows[(fields[0], int(fields[1]), fields[3])] = fields
    return rows


def pileup(work: Path, bam: str, options: list[str], out: Path) -> str:
    """`numapore pileup bam out options` in the run folder; the text."""
    numapore = Path(sys.executable).parent / "numapore"
    done = forked_snakemake.run(
        [str(numapore), "pileup", "-q", bam, str(out), *options],
        capture_output=True, text=True, cwd=work,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out.read_text()


def motif_of(argv: list[str]) -> tuple[str, int]:
    """The --motif SEQ OFFSET of a modkit command."""
    at = argv.index("--motif")
    return argv[at + 1], int(argv[at + 2])


def skipped_a(bam: str, reference: str, motif: str, offset: int) -> dict:
    """A: (contig, row start, record strand) -> Counter of 'nocall' / 'diff': per primary
    record, the first aligned base at a motif position of its strand after its last MM-listed
    position (no call when it is the motif's base, else N_diff); the row of combined strands."""
    pattern = re.compile("(?=" + "".join(IUPAC[c] for c in motif) + ")")  # palindromes only
    reverse_offset = len(motif) - 1 - offset
    out: dict = collections.defaultdict(collections.Counter)
    with pysam.AlignmentFile(bam) as handle, pysam.FastaFile(reference) as fasta:
        for contig in handle.references:
            seq = fasta.fetch(contig).upper()
            starts = {m.start() for m in pattern.finditer(seq)}
            for rec in handle.fetch(contig):
                if rec.flag & 0x904 or not rec.modified_bases:
                    continue
                last = max(q for calls in rec.modified_bases.values() for q, _ in calls)
                for q, r in rec.get_aligned_pairs():
                    if r is None:
                        continue
                    start = r - (reverse_offset if rec.is_reverse else offset)
                    if start not in starts:
                        continue
                    if q is not None and q > last:
                        base = rec.query_sequence[q]
                        base = COMPLEMENT.get(base, base) if rec.is_reverse else base
                        kind = "nocall" if base == motif[offset] else "diff"
                        out[(contig, start + offset, "-+"[not rec.is_reverse])][kind] += 1
                        break
    return out


def with_a(rows: dict, skipped: dict, strands: str = "+-") -> dict:
    """modkit's rows with A's skipped bases of records of these strands counted (N_diff,
    N_nocall)."""
    out = {}
    for key, fields in rows.items():
        fields = list(fields)
        for strand in strands:
            got = skipped.get((*key[:2], strand), {})
            fields[16] = str(int(fields[16]) + got.get("diff", 0))
            fields[17] = str(int(fields[17]) + got.get("nocall", 0))
        out[key] = fields
    return out


def intervals_without_mm(bam: str) -> set[tuple[str, int]]:
    """H: the (contig, interval) of modkit's intervals holding a primary record without MM."""
    with pysam.AlignmentFile(bam) as handle:
        return {
            (rec.reference_name, rec.reference_start // INTERVAL)
            for rec in handle.fetch()
            if not rec.flag & 0x904 and not (rec.has_tag("MM") or rec.has_tag("Mm"))
        }


def check_documented(work: Path, case, argv: list[str], ours: str, theirs: str) -> None:
    """modkit 0.6.1's file differs from ours by its bugs `case.differs` (A, C, H) only."""
    bam, reference = argv[2], argv[argv.index("--ref") + 1]
    motif, offset = motif_of(argv)
    differs = set(case.differs.split(","))
    assert differs <= {"A", "C", "H"}, case.differs
    mine, modkit = rows_of(ours), rows_of(theirs)
    if "A" in differs:  # with C, the minus strand's skipped bases are in C's strays
        skipped = skipped_a(str(work / bam), str(work / reference), motif, offset)
        modkit = with_a(modkit, skipped, "+" if "C" in differs else "+-")
    if "H" in differs:
        dropped = intervals_without_mm(str(work / bam))
        assert dropped, "no record without MM: H cannot explain a difference"
        assert not [k for k in modkit if (k[0], k[1] // INTERVAL) in dropped]
        mine = {k: v for k, v in mine.items() if (k[0], k[1] // INTERVAL) not in dropped}
    if "C" in differs:  # our strand-by-strand rows: modkit's + rows, and its strays' sums
        options = [x for x in argv[4:] if x != "--combine-strands"]
        stranded = rows_of(pileup(work, bam, options, work / "stranded.bed"))
        plus = {k: v[:5] + ["."] + v[6:] for k, v in stranded.items() if v[5] == "+"}
        strays = {k: v for k, v in modkit.items() if k not in plus}
        assert strays and all(k[1] % INTERVAL < 100 for k in strays), sorted(strays)
        for (contig, start, _name), fields in strays.items():
            minus = [
                v for k, v in stranded.items()
                if v[5] == "-" and k[0] == contig and k[1] // INTERVAL == start // INTERVAL
            ]  # fmt: skip
            # valid, modified, canonical, other mod: the minus-strand calls of the interval,
            # all of them, or (the row's reads at modkit's --max-depth, 8000) some
            tallies = int(fields[9]) + sum(int(x) for x in fields[14:18])
            for column in (9, 11, 12, 13):
                total = sum(int(v[column]) for v in minus)
                assert int(fields[column]) == total or (
                    tallies == MAX_DEPTH and int(fields[column]) <= total
                ), (column, fields, total)
        assert {k: v for k, v in modkit.items() if k not in strays} == {
            k: v for k, v in plus.items() if k in modkit
        }
        assert plus.keys() <= modkit.keys()
        # ours: each + row and its - partner's calls in one row (partner: the minus strand's
        # position of the motif's other base, here to the left)
        shift = len(motif) - 1 - 2 * offset
        expected: dict = collections.Counter()
        for (contig, start, name), fields in stranded.items():
            at = start if fields[5] == "+" else start - shift
            expected[(contig, at, name)] += int(fields[9])
        assert {k: int(v[9]) for k, v in mine.items()} == dict(expected)
        return
    assert mine == modkit


def check_modkit_golden(work: Path, run: str) -> int:
    """The run's bedMethyl files against modkit's own (golden.tsv): modkit 0.6.1's file
    (the default semantics) equals the run's bedMethyl, or differs by the bugs in `differs`
    only, and the pileup job's log gives its command; modkit 0.4.4's file equals
    `numapore pileup --modkit-compat 0.4` of the run's modBAM with its command. How many
    files were compared."""
    cases = pd.read_csv(MODKIT_GOLDEN / "golden.tsv", sep="\t", dtype=str, keep_default_na=False)
    cases = cases[cases["run"] == run]
    for case in cases.itertuples():
        name = f"{case.sample}.minimap2.{case.motif}"
        golden = gzip.decompress((MODKIT_GOLDEN / case.file).read_bytes()).decode()
        argv = shlex.split(case.modkit_command)
        assert golden, case.file
        if case.modkit == "0.4.4":  # the switch, on the run's modBAM
            out = work / f"{name}.modkit044.bed"
            assert pileup(work, argv[2], ["--modkit-compat", "0.4", *argv[4:]], out) == golden
            continue
        ours = gzip.decompress(
            (work / f"results/{case.sample}/methylation/{name}.bedmethyl.gz").read_bytes()
        ).decode()
        if case.differs:
            check_documented(work, case, argv, ours, golden)
        else:
            assert ours == golden, case.file
        log = (work / f"results/logs/pileup/{name}.log").read_text().splitlines()
        assert f"modkit semantics: modkit {case.modkit}" in log
        line = next(x for x in log if x.startswith("equivalent modkit command: "))
        logged = line.removeprefix("equivalent modkit command: ").split()
        threads = logged.index("--threads")
        logged = logged[:threads] + logged[threads + 2 :]  # the run's cores
        assert logged[:3] == argv[:3] and logged[4:] == argv[4:], (logged, argv)
    return len(cases)
