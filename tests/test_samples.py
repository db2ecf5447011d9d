"""Sample sheet loading and input checks."""

import gzip
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from snakemake.utils import validate

from numapore.inputs.schema import check_sheet
from numapore.signal.fast5 import list_fast5
from numapore.workflow.layout import SIMULATED
from numapore.inputs.sheet import (
    InputError,
    check_signal,
    combine_samples,
    distinct_paths,
    fast5_links,
    load_samples,
    read_sheet,
    reads_format,
    reference_name,
    sample_groups,
    signal_column,
    signal_files,
    simulated_samples,
)


def sheet(tmp_path: Path, *rows: str) -> Path:
    """Write a sample sheet with the standard header and the given tab-separated rows."""
    path = tmp_path / "samples.tsv"
    path.write_text("sample\tsignal\treads\treference\n" + "".join(r + "\n" for r in rows))
    return path


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A FAST5 folder with one file, a reads FASTQ and a reference FASTA."""
    (tmp_path / "f5").mkdir()
    (tmp_path / "f5" / "a.fast5").write_bytes(b"x")
    (tmp_path / "reads.fastq").write_text("@r1\nACGT\n+\n!!!!\n")
    (tmp_path / "ref.fa").write_text(">c1\nACGT\n")
    return tmp_path


def test_reads_format_and_reference_name():
    assert reads_format(Path("x/reads.fq.gz")) == "fastq.gz"
    assert reads_format(Path("reads.FASTA")) == "fasta"
    with pytest.raises(InputError, match="cannot tell FASTA from FASTQ"):
        reads_format(Path("reads.txt"))
    assert reference_name(Path("g/hg38 v2.fa.gz")) == "hg38_v2"


def test_valid_sheet_resolves_paths(inputs):
    path = sheet(inputs, "s1\tf5\treads.fastq\tref.fa")
    samples = load_samples(read_sheet(path), path, inputs)
    s1 = samples["s1"]
    assert s1.signal == (inputs / "f5",) and s1.reads_format == "fastq"
    assert s1.reference_name == "ref"


@pytest.mark.parametrize(
    "row, message",
    [
        ("s1\tnope\treads.fastq\tref.fa", "raw signal path .*nope does not exist"),
        ("s1\tf5\tmissing.fastq\tref.fa", "reads file .*missing.fastq does not exist"),
        ("s1\tf5\treads.fastq\tnope.fa", "reference .*nope.fa does not exist"),
        ("s1\tf5\tref.fa\tref.fa", "does not start with '>'|is empty|start with"),
    ],
)
def test_bad_rows_name_the_file(inputs, row, message):
    path = sheet(inputs, row)
    if "ref.fa\tref.fa" in row:  # a FASTA named as reads is fine; make it a bad FASTQ instead
        (inputs / "bad.fastq").write_text(">not fastq\n")
        path = sheet(inputs, "s1\tf5\tbad.fastq\tref.fa")
        message = "does not start with '@'"
    with pytest.raises(InputError, match=message):
        load_samples(read_sheet(path), path, inputs)


def test_empty_gzip_reads_and_empty_fast5_folder(inputs):
    with gzip.open(inputs / "empty.fq.gz", "wt"):
        pass
    path = sheet(inputs, "s1\tf5\tempty.fq.gz\tref.fa")
    with pytest.raises(InputError, match="is empty"):
        load_samples(read_sheet(path), path, inputs)
    (inputs / "nothing").mkdir()
    path = sheet(inputs, "s1\tnothing\treads.fastq\tref.fa")
    with pytest.raises(InputError, match="no raw signal files .* found"):
        load_samples(read_sheet(path), path, inputs)


def test_duplicate_samples_and_clashing_reference_names(inputs):
    path = sheet(inputs, "s1\tf5\treads.fastq\tref.fa", "s1\tf5\treads.fastq\tref.fa")
    with pytest.raises(InputError, match="duplicate sample name"):
        load_samples(read_sheet(path), path, inputs)
    (inputs / "other").mkdir()
    (inputs / "other" / "ref.fa").write_text(">c2\nACGT\n")
    path = sheet(inputs, "s1\tf5\treads.fastq\tref.fa", "s2\tf5\treads.fastq\tother/ref.fa")
    with pytest.raises(InputError, match="would both be named 'ref'"):
        combine_samples(load_samples(read_sheet(path), path, inputs), {}, path)


def test_simulated_samples_join_the_sheets(inputs):
    path = sheet(inputs, "s1\tf5\treads.fastq\tref.fa")
    simulated = simulated_samples({"sim": {"reference": "ref.fa"}}, inputs, Path(SIMULATED))
    assert simulated["sim"].reads == Path("results/simulated/sim/reads.fastq")
    assert simulated["sim"].signal == (Path("results/simulated/sim/fast5_multi"),)
    both = combine_samples(load_samples(read_sheet(path), path, inputs), simulated, path)
    assert list(both) == ["s1", "sim"]
    with pytest.raises(InputError, match="both in .* and in config simulate"):
        combine_samples(both, {"s1": simulated["sim"]}, path)
    empty = sheet(inputs)
    with pytest.raises(InputError, match="no samples"):
        combine_samples(load_samples(read_sheet(empty), empty, inputs), {}, empty)
    with pytest.raises(InputError, match="simulate.bad: reference .* does not exist"):
        simulated_samples({"bad": {"reference": "nope.fa"}}, inputs, Path(SIMULATED))
    modbam = simulated_samples(
        {"m": {"reference": "ref.fa", "kind": "modbam"}}, inputs, Path(SIMULATED)
    )["m"]
    assert (modbam.kind, modbam.signal) == ("modbam", ())
    assert modbam.reads == Path("results/simulated/m/reads.modbam.bam")


def test_simulated_sample_settings_default():
    """A simulated sample needs only its reference: the schema gives every other setting,
    the whole reference (region empty) and the modBAM noise model included."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["simulate"] = {"x": {"reference": "r.fa", "kind": "modbam"}}
    validate(config, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    settings = config["simulate"]["x"]
    assert (settings["region"], settings["reads"], settings["mod_mode"]) == ("", 300, "?")
    assert (settings["mod_sharpness"], settings["mod_codes"]) == (3.5, "m")


def test_missing_sheet_and_missing_column(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_sheet(tmp_path / "none.tsv")
    path = tmp_path / "s.tsv"
    path.write_text("sample\treads\n")
    with pytest.raises(InputError, match="missing column"):
        load_samples(read_sheet(path), path, tmp_path)


def test_hash_in_a_value_is_kept_and_comment_lines_skipped(inputs):
    (inputs / "run#2").mkdir()
    (inputs / "run#2" / "reads.fastq").write_text("@r1\nACGT\n+\n!!!!\n")
    path = sheet(inputs, "# a comment line", "s1\tf5\trun#2/reads.fastq\tref.fa")
    table = read_sheet(path)
    assert table.attrs["lines"] == [3]
    samples = load_samples(table, path, inputs)
    assert samples["s1"].reads == inputs / "run#2" / "reads.fastq"


@pytest.mark.parametrize(
    "line, message",
    [
        ("s1\tf5\treads.fastq \tref.fa", "line 2, column 'reads': 'reads.fastq ' starts or ends"),
        ("s1\tf5\treads.fastq\tref.fa\t", "line 2: ends in a tab after its last column"),
        ("s1\tf5\t\treads.fastq\tref.fa", "line 2: 5 tab-separated fields but the header has 4"),
    ],
)
def test_stray_blanks_and_tabs_are_named(inputs, line, message):
    with pytest.raises(InputError, match=message):
        read_sheet(sheet(inputs, line))


def test_folder_given_for_a_file(inputs):
    (inputs / "dir.fastq").mkdir()
    path = sheet(inputs, "s1\tf5\tdir.fastq\tref.fa")
    with pytest.raises(InputError, match=r"reads file .*dir.fastq is a folder, not a file"):
        load_samples(read_sheet(path), path, inputs)


def test_results_being_a_file_is_named(tmp_path):
    from numapore.base.workdir import results_folder_problem

    assert results_folder_problem(tmp_path / "results") is None
    (tmp_path / "results").write_text("x")
    assert results_folder_problem(tmp_path / "results") == (
        f"{tmp_path / 'results'} is a file, not a folder: numapore writes its results there; "
        "move it away"
    )


def test_signal_column_and_its_older_name(inputs):
    path = inputs / "new.tsv"
    path.write_text("sample\tsignal\treads\treference\ns1\tf5\treads.fastq\tref.fa\n")
    assert signal_column(read_sheet(path), path) == "signal"
    assert load_samples(read_sheet(path), path, inputs)["s1"].signal == (inputs / "f5",)
    path.write_text("sample\tfast5\treads\treference\ns1\tf5\treads.fastq\tref.fa\n")
    assert signal_column(read_sheet(path), path) == "fast5"
    assert load_samples(read_sheet(path), path, inputs)["s1"].signal == (inputs / "f5",)
    path.write_text("sample\tsignal\tfast5\treads\treference\n")
    with pytest.raises(InputError, match="has both a 'signal' and a 'fast5' column; keep one"):
        signal_column(read_sheet(path), path)
    path.write_text("sample\treads\treference\ns1\treads.fastq\tref.fa\n")
    assert signal_column(read_sheet(path), path) is None
    with pytest.raises(InputError, match="no raw signal and the reads are not a BAM/CRAM"):
        load_samples(read_sheet(path), path, inputs)


def test_paths_listed_twice_or_nested_are_read_once(inputs):
    f5, file = inputs / "f5", inputs / "f5" / "a.fast5"
    kept, notes = distinct_paths((file, f5, inputs / "./f5"), "k")
    assert kept == (f5,)
    assert notes == [
        f"k: {file} is inside {f5}, also listed; it is read once",
        f"k: {inputs / './f5'} is listed twice; it is read once",
    ]
    assert list_fast5([f5, f5, file]) == [file]  # the accounting's and converter's list too


def test_signal_kinds_any_case_and_mixing_refused(inputs):
    (inputs / "f5" / "b.FAST5").write_bytes(b"x")
    assert sorted(p.name for p in signal_files(inputs / "f5")["fast5"]) == ["a.fast5", "b.FAST5"]
    assert check_signal((inputs / "f5",), "k") == "fast5"
    (inputs / "run.POD5").write_bytes(b"x")
    assert check_signal((inputs / "run.POD5",), "k") == "pod5"
    with pytest.raises(InputError, match=r"^k: the raw signal mixes kinds \(2 FAST5, 1 POD5"):
        check_signal((inputs / "f5", inputs / "run.POD5"), "k")
    (inputs / "a.blow5").write_bytes(b"x")
    (inputs / "b.blow5").write_bytes(b"x")
    with pytest.raises(InputError, match="2 BLOW5 files; a sample reads one BLOW5 file"):
        check_signal((inputs / "a.blow5", inputs / "b.blow5"), "k")
    with pytest.raises(InputError, match="is not a raw signal file: raw signal is FAST5"):
        check_signal((inputs / "reads.fastq",), "k")


def test_equal_fast5_names_get_distinct_links(tmp_path):
    files = [tmp_path / "b" / "batch_0.fast5", tmp_path / "c" / "batch_0.fast5"]
    files += [tmp_path / "c" / "batch_1.FAST5", tmp_path / "c" / "batch_1.fast5"]
    assert [link for _, link in fast5_links(files)] == [
        "1/batch_0.fast5",
        "2/batch_0.fast5",
        "2/batch_1.fast5",
        "2/batch_1.fast5.fast5",
    ]


def test_group_column_parsed_and_a_malformed_group_named(inputs):
    """The optional group column (issue 43): each sample's group, the run's groups in sample
    order; a malformed value is one line naming the sheet, line and column (the schema's check,
    as the run's plan runs it before any job)."""
    path = inputs / "samples.tsv"
    rows = ["t1\tf5\treads.fastq\tref.fa\ttumour", "n1\tf5\treads.fastq\tref.fa\tnormal"]
    rows += ["t2\tf5\treads.fastq\tref.fa\ttumour", "x\tf5\treads.fastq\tref.fa\t"]
    path.write_text("sample\tsignal\treads\treference\tgroup\n" + "\n".join(rows) + "\n")
    samples = load_samples(read_sheet(path), path, inputs)
    assert [s.group for s in samples.values()] == ["tumour", "normal", "tumour", ""]
    simulated = simulated_samples(
        {"sim": {"reference": "ref.fa", "group": "normal"}}, inputs, Path(SIMULATED)
    )
    both = combine_samples(samples, simulated, path)
    assert sample_groups(both) == {"tumour": ["t1", "t2"], "normal": ["n1", "sim"]}
    schema = yaml.safe_load((REPO / "workflow/schemas/samples.schema.yaml").read_text())
    for bad in ("tumour A", "case.1", "_x"):
        path.write_text(
            f"sample\tsignal\treads\treference\tgroup\nt1\tf5\treads.fastq\tref.fa\t{bad}\n"
        )
        table = read_sheet(path)
        rows = table.to_dict("records")
        with pytest.raises(InputError) as err:
            check_sheet(list(table.columns), rows, [2], 1, path, schema)
        assert str(err.value) == (
            f"sample sheet {path}, line 2, column 'group': '{bad}' does not match "
            "'^$|^[A-Za-z0-9][A-Za-z0-9_-]*$' ("
            + schema["properties"]["group"]["description"]
            + ")"
        )
