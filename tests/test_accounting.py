"""Read accounting: every read of a sample is accounted for, from the FAST5 files to the calls."""

from __future__ import annotations

import shutil
from array import array
from pathlib import Path

import h5py
import polars as pl
import pysam
import pytest
from conftest import FEW_READS, host_file, read_names, run_workflow, shortest_reads
from tables import read_table
from test_convert import conformance_table

from numapore.base.errors import AccountingError, EmptySample
from numapore.report.accounting import (
    NA,
    NO_SIGNAL_DATASET,
    blow5_read_ids,
    called_reads,
    primary_alignments,
    primary_alignments_and_calls,
    readdb_with_signal,
    rejected_rows,
)
from numapore.signal.census import fast5_census, read_census, write_census
from numapore.inputs.readids import (
    READ_ID_TABLE,
    alignment_summary,
    read_id_column,
    read_ids,
    unique_read_ids,
    write_read_id_table,
)
from numapore.signal.convert import convert
from project import write_project

ABSENT = "numapore-read-absent-from-the-fast5"
NO_SIGNAL = "no signal: absent from the FAST5 files (or in an unreadable one)"


def drop_signal(path: Path) -> None:
    """Delete the Signal dataset of a single-read FAST5 file (in place)."""
    with h5py.File(path, "r+") as h5:
        for name in h5["Raw/Reads"]:
            del h5["Raw/Reads"][name]["Signal"]


def empty_signal(path: Path) -> None:
    """Replace the Signal dataset of a single-read FAST5 file by an empty one (in place)."""
    with h5py.File(path, "r+") as h5:
        for name in h5["Raw/Reads"]:
            read = h5["Raw/Reads"][name]
            del read["Signal"]
            read.create_dataset("Signal", shape=(0,), dtype="i2")


def broken_inputs(tmp_path: Path, ecoli_dir: Path) -> tuple[Path, Path, dict[str, str]]:
    """The 112 real FAST5 files with: one truncated, one without its signal, one with an empty
    signal, one file that is not HDF5; as basecalls the shortest reads (conftest.FEW_READS), the
    three damaged files' reads and a read absent from the FAST5 files. Returns folder, reads,
    ids."""
    folder = tmp_path / "fast5"
    folder.mkdir()
    files = sorted((ecoli_dir / "fast5").glob("*.fast5"))
    for src in files[3:]:
        (folder / src.name).symlink_to(src)
    ids = {}
    truncated, no_signal = folder / files[0].name, folder / files[1].name
    for src, broken, damage in [(files[1], no_signal, drop_signal), (files[2], None, empty_signal)]:
        broken = broken or folder / src.name
        shutil.copy(src, broken)
        broken.chmod(0o644)
        ids[damage.__name__] = fast5_census([broken]).reads["read_id"][0]
        damage(broken)
    ids["truncated"] = fast5_census([files[0]]).reads["read_id"][0]
    truncated.write_bytes(files[0].read_bytes()[: files[0].stat().st_size // 2])
    (folder / "zz_broken.fast5").write_bytes(b"this is not an HDF5 file\n")
    # Only the reads called are worth their length (the damaged ones have no signal to call).
    short = read_names(shortest_reads(ecoli_dir / "reads.fasta", tmp_path / "s.fa", FEW_READS))
    with pysam.FastxFile(str(ecoli_dir / "reads.fasta")) as fastx:
        kept = [r for r in fastx if r.name in short or r.name in ids.values()]
    reads = tmp_path / "reads.fasta"
    reads.write_text(
        "".join(f">{r.name}\n{r.sequence}\n" for r in kept) + f">{ABSENT}\n{kept[0].sequence}\n"
    )
    return folder, reads, ids


@pytest.mark.parametrize("io_mode", ["slow5", "fast5"])
def test_accounting_with_broken_inputs(tmp_path, ecoli_dir, dh10b, io_mode):
    """Truncated, signal-less, empty-signal and non-HDF5 FAST5 files, FAST5 reads not basecalled
    and a read without FAST5: every read of the table is where it should be and the totals
    reconcile. In slow5 mode (on_bad_fast5: skip) the conversion lists what it skipped and the
    run says so."""
    fast5, reads, ids = broken_inputs(tmp_path, ecoli_dir)
    basecalled = read_names(reads)
    damaged = {ABSENT, ids["truncated"], ids["drop_signal"], ids["empty_signal"]}
    assert len(basecalled) == FEW_READS + 4 and damaged <= basecalled
    row = {"sample": "ecoli", "signal": str(fast5), "reads": str(reads), "reference": str(dh10b)}
    work = write_project(tmp_path / "run", [row], {"on_bad_fast5": "skip"})
    args = (
        ["--config", f"host={host_file(tmp_path / 'slow5.yaml', io_mode='slow5')}"]
        if io_mode == "slow5"
        else []
    )
    accounting = "results/ecoli/ecoli.minimap2.accounting.tsv"
    calls = "results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv"
    run = run_workflow(work, accounting, calls, *args)  # what is checked, not the report
    table = read_table(work / accounting)
    calls = called_reads(work / calls)
    assert table[("fast5", "files", "")] == "113"
    assert table[("fast5", "reads", "in the readable files")] == "111"
    unreadable = [k[2] for k in table if k[1] == "unreadable file"]
    assert len(unreadable) == 2 and any("zz_broken.fast5: " in u for u in unreadable)
    assert table[("basecalled", "reads", str(reads))] == str(FEW_READS + 4)
    assert table[("basecalled", "reads with raw signal", "")] == str(FEW_READS)
    # The readable files' reads but the two damaged ones basecalled: 111 - 2 - FEW_READS.
    not_basecalled = ("fast5", "reads not in the basecalled file", "not basecalled or filtered")
    assert table[not_basecalled] == str(109 - FEW_READS)
    assert table[("alignment", "primary aligned", "minimap2")] == str(FEW_READS + 4)
    assert table[("alignment", "unmapped", "")] == "0"
    assert table[("methylation", "reads with calls", "")] == str(len(calls))
    without = {k[2]: int(v) for k, v in table.items() if k[1] == "reads without calls"}
    # The truncated file's read and the read absent from the FAST5 files have no signal; the
    # signal-less and the empty-signal reads are skipped by the conversion (slow5) and are "no
    # signal" in every I/O mode (nanopolish skips them); every other read is called.
    if io_mode == "slow5":
        assert table[("conversion", "reads converted", "")] == "109"
        for reason in ("the single-read FAST5 lacks signal", "the single-read FAST5: empty signal"):
            assert table[("conversion", "reads skipped", reason)] == "1"
        # The conversion's listing (the two unreadable files, the two reads) and the run's word.
        listing = "results/ecoli/signal/ecoli.blow5.rejected.tsv"
        rejected = (work / listing).read_text().splitlines()[1:]
        assert len(rejected) == 4 and any("zz_broken.fast5" in line for line in rejected)
        assert (
            f"numapore: sample 'ecoli': 4 FAST5 files/reads skipped (on_bad_fast5: skip), listed "
            f"with reasons in {listing}" in run.stdout + run.stderr
        )
    else:
        assert table[("conversion", "reads converted", "I/O mode is not slow5")] == NA
    assert without == {NO_SIGNAL: 2, NO_SIGNAL_DATASET: 2}
    assert calls == basecalled - damaged


def test_truncated_blow5_stops_the_run_naming_it(tmp_path, ecoli_dir, dh10b):
    """A BLOW5 truncated mid-record (after a good run): the run stops naming it and the reason."""
    work = write_project(tmp_path / "run", [{
        "sample": "ecoli", "signal": str(ecoli_dir / "fast5"),
        "reads": str(ecoli_dir / "reads.fasta"), "reference": str(dh10b),
    }])  # fmt: skip
    host = ["--config", f"host={host_file(tmp_path / 'slow5.yaml', io_mode='slow5')}"]
    run_workflow(work, *host, "--until", "fast5_to_blow5")
    blow5 = work / "results/ecoli/signal/ecoli.blow5"
    blow5.write_bytes(blow5.read_bytes()[: blow5.stat().st_size // 2])
    result = run_workflow(work, *host, check=False)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert f"numapore: {blow5.relative_to(work)}: cut short in the middle of record " in out
    assert "Delete it and rerun to convert the FAST5 again." in out and "Traceback" not in out
    assert not (work / "results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv").exists()


# --- the helpers, on real files ----------------------------------------------------------------


def test_fast5_census_counts_single_and_multi_read_files(f2s_dir, tmp_path):
    census = fast5_census([f2s_dir / "raw/single-fast5", f2s_dir / "raw/multi-fast5"])
    single = len(list((f2s_dir / "raw/single-fast5").glob("*.fast5")))
    assert census.files == single + len(list((f2s_dir / "raw/multi-fast5").glob("*.fast5")))
    assert census.total > census.files and not census.unreadable
    assert census.reads["has_signal"].all() and census.reads["read_id"].is_unique().all()
    assert census.repeated == census.total - census.reads.height
    bad = fast5_census([f2s_dir / "raw/err_fast5"])
    assert "not_a_fast5.fast5" in " ".join(bad.unreadable)
    assert bad.total == sum(bad.reads_per_file.values())


def test_census_saved_and_loaded_whole(f2s_dir, tmp_path):
    """A census (readable, unreadable and repeated reads, odd names) loads back the same."""
    odd = tmp_path / "NA"  # a file named like the missing-value marker
    odd.mkdir()
    shutil.copy(f2s_dir / "raw/single-fast5/sss1.fast5", odd / "tab\tname.fast5")
    folders = [f2s_dir / "raw/single-fast5", f2s_dir / "raw/multi-fast5", f2s_dir / "raw/err_fast5"]
    census = fast5_census([*folders, odd])
    assert census.unreadable and census.repeated and census.reads_per_file
    write_census(census, tmp_path / "c.parquet", tmp_path / "c.files.tsv")
    loaded = read_census(tmp_path / "c.parquet", tmp_path / "c.files.tsv")
    assert loaded.reads.equals(census.reads)
    assert list(loaded.reads_per_file.items()) == list(census.reads_per_file.items())
    assert list(loaded.unreadable.items()) == list(census.unreadable.items())
    assert (loaded.files, loaded.repeated) == (census.files, census.repeated)


def test_read_ids_and_duplicates(tmp_path):
    reads = tmp_path / "r.fastq"
    reads.write_text("@a\nAC\n+\nII\n@b\nAC\n+\nII\n@a\nAC\n+\nII\n")
    assert [column.to_list() for column in read_ids(reads)] == [["a", "b", "a"], ["a"]]
    assert read_id_column(reads).to_list() == ["a", "b", "a"]
    with pytest.raises(AccountingError, match=r"r.fastq repeats 1 read id\(s\) \(e.g. a\)"):
        unique_read_ids(reads, "s")
    reads.write_text("@a\nAC\n+\nII\n")
    assert unique_read_ids(reads, "s").to_list() == ["a"]


def test_a_read_id_table_gives_the_ids_it_was_written_with(tmp_path):
    """write_read_id_table then read_id_column: the same ids in order, repeats found as in a
    FASTQ; a table's name must say what it is (read_id_column tells tables by their name)."""
    table = tmp_path / f"r{READ_ID_TABLE}"
    write_read_id_table(pl.Series(["b", "a", "b"]), table)
    assert read_id_column(table).to_list() == ["b", "a", "b"]
    with pytest.raises(AccountingError, match=r"repeats 1 read id\(s\) \(e.g. b\)"):
        unique_read_ids(table, "s")
    with pytest.raises(ValueError, match="a read id table's name ends in .ids.parquet"):
        write_read_id_table(pl.Series(["a"]), tmp_path / "r.parquet")
    assert not (tmp_path / "r.parquet").exists()


def test_one_pass_over_a_modbam_finds_aligned_reads_and_calls(tmp_path):
    """Mapped primary records (as primary_alignments gives them) and, among them, the reads
    whose record has an ML value: not an empty ML, nor a secondary, supplementary or unmapped
    record's; the old tag name Ml counts too."""
    header = {"HD": {"VN": "1.6", "SO": "unsorted"}, "SQ": [{"SN": "c", "LN": 1000}]}
    bam = tmp_path / "m.bam"
    # name, flag, mapq, tags
    records = [
        ("calls", 0, 60, [("MM", "C+m?,0;"), ("ML", [200])]),
        ("old_tags", 16, 50, [("Mm", "C+m?,0;"), ("Ml", [10])]),
        ("empty_ml", 0, 40, [("MM", "C+m?;"), ("ML", [])]),
        ("no_tags", 0, 30, []),
        ("calls", 256, 0, [("MM", "C+m?,0;"), ("ML", [200])]),  # secondary of a called read
        ("only_supplementary", 2048, 20, [("MM", "C+m?,0;"), ("ML", [200])]),
        ("secondary_only", 256, 0, [("MM", "C+m?,0;"), ("ML", [200])]),
        ("unmapped", 4, 0, [("MM", "C+m?,0;"), ("ML", [200])]),
    ]
    with pysam.AlignmentFile(str(bam), "wb", header=header) as out:
        for name, flag, mapq, tags in records:
            rec = pysam.AlignedSegment(out.header)
            rec.query_name, rec.flag, rec.query_sequence = name, flag, "ACGTACGTAC"
            if not flag & 4:
                rec.reference_id, rec.reference_start, rec.cigarstring = 0, 100, "10M"
                rec.mapping_quality = mapq
            for tag, value in tags:
                rec.set_tag(tag, array("B", value) if isinstance(value, list) else value)
            out.write(rec)
    aligned, called = primary_alignments_and_calls(bam)
    assert aligned.sort("read_id").equals(primary_alignments(bam).sort("read_id"))
    assert dict(aligned.iter_rows()) == {"calls": 60, "old_tags": 50, "empty_ml": 40, "no_tags": 30}
    assert called.to_list() == ["calls", "old_tags"]
    broken = tmp_path / "broken.bam"
    broken.write_bytes(b"not a BAM")
    with pytest.raises(AccountingError, match="broken.bam: not a readable BAM"):
        primary_alignments_and_calls(broken)


def test_alignment_summary_counts_and_stops(capsys):
    """The alignment check: reads in (counted by its caller) and primary mapped from flagstat's
    JSON; no table when nothing mapped (the repeated read ids: unique_read_ids, above)."""
    flagstat = {"QC-passed reads": {"primary mapped": 2}}
    summary = alignment_summary(flagstat, 3, "s", "minimap2", "ref.fa", "my/r.fastq")
    assert summary.splitlines() == [
        "sample\taligner\treads_in\tprimary_mapped\tprimary_mapped_fraction",
        "s\tminimap2\t3\t2\t0.6667",
    ]
    nothing = {"QC-passed reads": {"primary mapped": 0}}
    with pytest.raises(EmptySample) as err:
        alignment_summary(nothing, 3, "s", "minimap2", "ref.fa", "my/r.fastq")
    assert str(err.value) == (
        "sample 's': none of its 3 reads mapped to the reference ref.fa with minimap2 (reads "
        "file my/r.fastq): is it the right reference (do its contigs include the sequenced "
        "genome)? (to run it anyway: allow_empty_samples: true)"
    )
    # allow_empty_samples: the table (nothing mapped) and the reason on the job's log
    allowed = alignment_summary(nothing, 3, "s", "minimap2", "ref.fa", "r.fq", allow_empty=True)
    assert allowed.splitlines()[1] == "s\tminimap2\t3\t0\t0.0000"
    assert capsys.readouterr().out.startswith("numapore: sample 's': none of its 3 reads mapped")


def test_blow5_index_readdb_rejected_and_calls(f2s_dir, tmp_path):
    """The BLOW5 index, the rejected listing (its refusals as the suite's table says), readdb
    and calls helpers."""
    out = tmp_path / "x.blow5"
    report = convert(
        [f2s_dir / "raw/single-fast5", f2s_dir / "raw/err_fast5"],
        out,
        on_bad_fast5="skip",
        progress=None,
        allow_duplicate_ids=False,
    )
    ids = blow5_read_ids(Path(str(out) + ".idx"))
    assert len(ids) == report.reads_written == ids.n_unique()
    rows = rejected_rows(report.rejected_tsv)
    assert len(rows) == report.files_skipped + report.reads_skipped
    assert sum(r[1] == "." for r in rows) == report.files_skipped > 0
    # The err_fast5 files the conformance table says are refused, and only they, are listed
    # (read ids repeated between the suite's files are listed too, as duplicates).  A run's
    # header comes from its first read: files of a run already met (here from single-fast5)
    # are not refused for their header attributes, which are not read.
    refused = {
        str(f2s_dir / "raw" / name)
        for name, (outcome, reason, *_) in conformance_table().items()
        if name.startswith("err_fast5/")
        and name.endswith(".fast5")
        and outcome == "refused"
        and "tracking_id/" not in reason
    }
    assert {r[0] for r in rows if "duplicate read id" not in r[2]} == refused
    damaged = tmp_path / "bad.idx"
    damaged.write_bytes(Path(str(out) + ".idx").read_bytes()[:-3])
    with pytest.raises(AccountingError, match="not a complete slow5 index"):
        blow5_read_ids(damaged)
    readdb = tmp_path / "r.readdb"
    readdb.write_text("a\tf5/a.fast5\nb\t\n")
    assert readdb_with_signal(readdb).to_list() == ["a"]
    readdb.write_text("*\tx.blow5\n")
    assert readdb_with_signal(readdb) is None
    calls = tmp_path / "calls.tsv"
    calls.write_text("chromosome\tstrand\tstart\tend\tread_name\nc\t+\t1\t2\tr1\nc\t+\t5\t6\tr1\n")
    assert called_reads(calls) == {"r1"}


def test_closing_lines_name_each_empty_sample_and_why(tmp_path):
    """The run's closing warnings (numapore.report.empty): one per sample whose main output is
    empty, the reason from the first step that left no read; none for samples with results or
    whose outputs are not there."""
    import gzip

    from numapore.report.empty import SampleOutputs, closing_lines

    def check(name: str, mapped: int) -> Path:
        """An alignment check's table with `mapped` of 3 reads mapped."""
        path = tmp_path / f"{name}.summary.tsv"
        path.write_text(f"sample\taligner\treads_in\tprimary_mapped\n{name}\tbwa\t3\t{mapped}\n")
        return path

    empty_bed, full_bed = tmp_path / "e.bedmethyl.gz", tmp_path / "f.bedmethyl.gz"
    empty_bed.write_bytes(gzip.compress(b""))
    full_bed.write_bytes(gzip.compress(b"chr1\t1\t2\tm\n"))
    common = {"source": "r.fq", "reference": "ref.fa", "aligner": "bwa", "fates": Path("f.tsv")}
    runs = [
        SampleOutputs("short", check("short", 0), check("short", 0), **common),
        SampleOutputs("called", full_bed, check("called", 3), **common),
        SampleOutputs("filtered", empty_bed, check("filtered", 3), **common),
        SampleOutputs("absent", tmp_path / "none.bedmethyl.gz", check("absent", 0), **common),
    ]
    assert closing_lines(runs) == [
        "numapore: warning: sample 'short' is empty (allow_empty_samples: true): none of its 3 "
        "reads mapped to the reference ref.fa with bwa (reads file r.fq): is it the right "
        "reference (do its contigs include the sequenced genome)?",
        f"numapore: warning: sample 'filtered' is empty (allow_empty_samples: true): its "
        f"bedMethyl {empty_bed} has no rows (each read's fate: f.tsv)",
    ]
