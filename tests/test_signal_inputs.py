"""Raw signal inputs on the real E. coli reads: FAST5 as a set of distinct files (listed twice,
*.FAST5, equal names in different folders), POD5 made by the pod5 package's own converter, a
BLOW5 numapore wrote and a BLOW5 of slow5tools' test data; each error with its exact message."""

from pathlib import Path

import pyslow5
import pytest
from conftest import FEW_READS, call_set, host_file, read_names, run_workflow
from runs_signal import SSM1
from shared_runs import kept_output
from tables import read_table
from numapore.signal.census import pod5_census
from numapore.signal.convert import convert
from project import write_project
from numapore.signal.inputs import (
    SignalError,
    blow5_signal_compression,
    float32_decimal,
    list_pod5,
    pod5_to_blow5,
    use_blow5,
)


def row(name: str, signal: str, ecoli_dir: Path, reads: Path | None = None) -> dict[str, str]:
    """A sample-sheet row on region.fa (written in the sheet's older 'fast5' column)."""
    reads = reads or ecoli_dir / "reads.fasta"
    return {
        "sample": name,
        "signal": signal,
        "reads": str(reads),
        "reference": str(ecoli_dir / "region.fa"),
    }


def calls(work: Path, name: str) -> set[tuple]:
    """The sample's per-read CpG calls."""
    return call_set(work / f"results/{name}/methylation/{name}.minimap2.cpg.calls.tsv")


def accounting(work: Path, name: str) -> dict:
    """The sample's read accounting table as {(stage, what, detail): reads}."""
    return read_table(work / f"results/{name}/{name}.minimap2.accounting.tsv")


def test_fast5_listed_twice_upper_case_and_equal_names(signal_fast5_run, messy_fast5):
    work, result = signal_fast5_run, kept_output(signal_fast5_run)
    folder, _ = messy_fast5
    key = "sample sheet config/samples.tsv, line 3, sample 'messy'"
    assert f"numapore: {key}: {folder}/A is listed twice; it is read once" in result.stderr
    listed = sorted((folder / "A").glob("*.fast5"))[8]  # files[20] of the fixture
    assert f"numapore: {key}: {listed} is inside {folder}/A, also listed; it is read once" in (
        result.stderr
    )
    clean = calls(work, "clean")
    assert len({c[2] for c in clean}) > 80
    assert calls(work, "messy") == clean
    table = accounting(work, "messy")
    assert table[("fast5", "files", "")] == "112"  # folder A once, the listed file once
    assert table[("fast5", "reads", "in the readable files")] == "112"
    assert accounting(work, "clean")[("basecalled", "reads with raw signal", "")] == "112"
    assert table[("basecalled", "reads with raw signal", "")] == "112"


def test_pod5_and_blow5_give_the_fast5_calls(signal_slow5_run, signal_fast5_run):
    """POD5 and BLOW5 give I/O mode fast5's calls of the shortest reads (the sequences these
    samples have; their signal files hold all 112 reads). FAST5 converted in I/O mode slow5:
    test_execution_modes.py's test_io_mode_gives_same_calls_as_fast5[slow5]."""
    work = signal_slow5_run
    short = read_names(work / "short.fasta")
    clean = signal_fast5_run / "results/clean/methylation/clean.minimap2.cpg.calls.tsv"
    fast5_calls = call_set(clean, short)
    assert len(short) == FEW_READS and len({c[2] for c in fast5_calls}) >= 10
    assert calls(work, "pod5") == fast5_calls
    assert calls(work, "blow5") == fast5_calls
    pod5 = accounting(work, "pod5")
    assert pod5[("pod5", "files", "")] == "1"
    assert pod5[("pod5", "reads", "in the readable files")] == "112"
    assert pod5[("conversion", "reads converted", "")] == "112"
    blow5 = accounting(work, "blow5")
    assert blow5[("blow5", "reads", "in the readable files")] == "112"
    assert blow5[("basecalled", "reads with raw signal", "")] == str(FEW_READS)


def test_slow5tools_blow5_is_indexed_and_read(signal_slow5_run, f2s_dir):
    work = signal_slow5_run
    assert not Path(f"{f2s_dir / SSM1}.idx").exists()  # indexed beside the link, not the input
    signal = work / "results/ssm1/signal/ssm1.blow5"
    assert signal.resolve() == (f2s_dir / SSM1).resolve()
    assert Path(f"{signal}.idx").is_file()
    table = accounting(work, "ssm1")
    assert table[("blow5", "reads", "in the readable files")] == "3"
    assert table[("basecalled", "reads with raw signal", "")] == "3"
    # No calls (stand-in sequences; allow_empty_samples): the sample's report is still drawn.
    assert table[("methylation", "reads with calls", "")] == "0"
    assert (work / "results/ssm1/report/ssm1.minimap2.methylation.png").is_file()
    readdb = (work / "results/ssm1/reads/blow5/ssm1.fasta.index.readdb").read_text()
    assert str(signal) in readdb or "ssm1.blow5" in readdb


def dry_run_error(tmp_path: Path, rows: list[dict], io_mode: str = "slow5") -> str:
    """The error of a dry run on these rows (it must fail)."""
    write_project(tmp_path, rows)
    host = host_file(tmp_path / "host.yaml", "none", io_mode)
    result = run_workflow(tmp_path, "-n", "--config", f"host={host}", check=False)
    assert result.returncode != 0
    return result.stdout + result.stderr


def test_pod5_in_a_fast5_io_mode_is_refused_before_any_job(tmp_path, ecoli_dir, pod5_file):
    out = dry_run_error(tmp_path, [row("p", str(pod5_file), ecoli_dir)], "fast5-pool")
    assert (
        f"numapore: sample 'p': its raw signal is POD5, which needs I/O mode slow5, but host file "
        f"{tmp_path}/host.yaml has io_mode: fast5-pool (a FAST5 mode); set io_mode: slow5 in "
        "the host file"
    ) in out


def test_mixed_kinds_and_slow5_text_are_refused(tmp_path, ecoli_dir, pod5_file, f2s_dir):
    mixed = f"{ecoli_dir / 'fast5'},{pod5_file}"
    out = dry_run_error(tmp_path, [row("m", mixed, ecoli_dir)])
    key = "sample sheet config/samples.tsv, line 2, sample 'm'"
    assert (
        f"numapore: {key}: the raw signal mixes kinds (112 FAST5, 1 POD5 files); give one kind "
        "per sample (convert the others, or make them separate samples)"
    ) in out
    text = f2s_dir / "expected/multi-fast5-output/ssm1.slow5"
    out = dry_run_error(tmp_path, [row("m", str(text), ecoli_dir)])
    assert (
        f"numapore: {key}: {text} is SLOW5 text; nanopolish reads BLOW5: convert it with "
        "`slow5tools view --to blow5 -c zlib -s none`"
    ) in out


def test_svb_zd_blow5_is_refused_naming_it(tmp_path, ecoli_dir, f2s_dir):
    svb = f2s_dir / "expected/multi-fast5-output/ssm1_zlib_svb.blow5"
    write_project(tmp_path, [row("svb", str(svb), ecoli_dir)])
    host = host_file(tmp_path / "host.yaml", "none", "slow5")
    result = run_workflow(
        tmp_path, "--config", f"host={host}", "--until", "link_blow5", check=False
    )
    assert result.returncode != 0
    assert (
        f"numapore: sample 'svb': BLOW5 {svb}: signal compression svb-zd, which Debian's "
        "nanopolish 0.14 cannot read; rewrite it with `slow5tools view -c zlib -s none`"
    ) in result.stdout + result.stderr + (tmp_path / "results/logs/link_blow5/svb.log").read_text()


def test_pod5_with_two_runs_gives_two_read_groups(tmp_path, pod5_file):
    import dataclasses

    import pod5

    two = tmp_path / "two.pod5"
    with pod5.Reader(pod5_file / "ecoli.pod5") as reader, pod5.Writer(two) as writer:
        for i, record in enumerate(reader.reads()):
            read = record.to_read()
            if i % 2:  # every other read from a second run
                read.run_info = dataclasses.replace(read.run_info, acquisition_id="second_run")
            writer.add_read(read)
    assert pod5_to_blow5([two], tmp_path / "two.blow5", processes=2) == 112
    out = pyslow5.Open(str(tmp_path / "two.blow5"), "r")
    assert out.get_num_read_groups() == 2
    runs = {out.get_header_value("run_id", rg) for rg in (0, 1)}
    assert runs == {"0cc960b63c07619b4bf2917507d447479a21da66", "second_run"}
    with pod5.Reader(two) as reader:
        expected = {str(r.read_id): r.run_info.acquisition_id for r in reader.reads()}
    got = {r["read_id"]: out.get_header_value("run_id", r["read_group"]) for r in out.seq_reads()}
    assert got == expected
    census = pod5_census([two])
    assert (census.files, census.total) == (1, 112)


def test_pod5_calibration_is_the_fast5_decimal(tmp_path, pod5_file, ecoli_dir):
    pod5_to_blow5([pod5_file], tmp_path / "p.blow5")
    convert([ecoli_dir / "fast5"], tmp_path / "f.blow5")
    fast5 = pyslow5.Open(str(tmp_path / "f.blow5"), "r")
    fields = ("digitisation", "offset", "range", "sampling_rate", "len_raw_signal")
    for read in pyslow5.Open(str(tmp_path / "p.blow5"), "r").seq_reads():
        same = fast5.get_read(read["read_id"])
        assert [read[f] for f in fields] == [same[f] for f in fields]
        assert (read["signal"] == same["signal"]).all()
    assert float32_decimal(1444.8599853515625) == 1444.86


def test_blow5_input_checks(tmp_path, f2s_dir):
    svb = f2s_dir / "expected/multi-fast5-output/ssm1_zlib_svb.blow5"
    assert blow5_signal_compression(svb) == "svb-zd"
    assert blow5_signal_compression(f2s_dir / SSM1) == "none"
    cut = tmp_path / "cut.blow5"
    cut.write_bytes((f2s_dir / SSM1).read_bytes()[:-100])
    with pytest.raises(SignalError, match=f"^BLOW5 {cut}: cut short in the middle of record 3"):
        use_blow5(cut, tmp_path / "out" / "s.blow5")
    assert use_blow5(f2s_dir / SSM1, tmp_path / "out" / "s.blow5") == 3
    assert list_pod5([tmp_path]) == []


def test_comparison_of_a_pod5_sample_takes_io_mode_slow5_only(tmp_path, ecoli_dir, pod5_file):
    write_project(tmp_path, [row("p", str(pod5_file), ecoli_dir)])
    host = host_file(tmp_path / "host.yaml", "none", "slow5")
    result = run_workflow(tmp_path, "-n", "compare", "--config", f"host={host}", check=False)
    assert result.returncode != 0
    assert (
        "numapore: compare.io_modes: sample 'p' has POD5 raw signal, read in I/O mode slow5 "
        "only; remove fast5, fast5-pool"
    ) in result.stdout + result.stderr
