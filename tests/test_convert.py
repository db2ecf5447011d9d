"""FAST5 -> SLOW5/BLOW5 conversion: slow5tools conformance, round trips, bad input, CLI."""

from __future__ import annotations

import faulthandler
import io
import json
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path
from signal import SIGSEGV

import h5py
import numpy as np
import pyslow5
import pytest

from numapore.signal import convert as convert_mod
from numapore.signal import convert_worker
from numapore.signal import slow5
from numapore.signal.convert import ConversionError, convert
from numapore.signal.fast5 import Fast5Error, list_fast5, read_fast5, read_layout
from numapore.signal.slow5 import (
    END_REASON_LABELS,
    FAST5_AUX_FIELDS,
    AuxField,
    Record,
    check_nanopolish_compatible,
    format_double,
)
from numapore.signal.slow5_files import blow5_problem, write_slow5

REPO = Path(__file__).resolve().parent.parent

# expected file (under expected/) -> inputs (under raw/), as slow5tools f2s produced them
CONFORMANCE = {
    "single-fast5-output/a_single-fast5.slow5": ["single-fast5/sss1.fast5"],
    "single-fast5-output/directory_single-fast5.slow5": ["single-fast5"],
    "multi-fast5-output/file_multi-fast5.slow5": ["multi-fast5/ssm1.fast5"],
    "multi-fast5-output/ssm1.slow5": ["multi-fast5/ssm1.fast5"],
    "multi-fast5-output/ssm2.slow5": ["multi-fast5/ssm2.fast5"],
    "multi-fast5-output/ssm3.slow5": ["multi-fast5/ssm3.fast5"],
    "multi-fast5-output/directory_multi-fast5.slow5": ["multi-fast5"],
    "single-and-multi-fast5-output/1ssm1.slow5": ["single-and-multi-fast5/1ssm1.fast5"],
    "single-and-multi-fast5-output/3ssm2.slow5": ["single-and-multi-fast5/3ssm2.fast5"],
    "single-and-multi-fast5-output/0.slow5": [
        "single-and-multi-fast5/2sss1.fast5",
        "single-and-multi-fast5/4sss2.fast5",
    ],
    "single-and-multi-fast5-output/file_single-and-multi-fast5.slow5": ["single-and-multi-fast5"],
}
# Outcome per input of the whole suite: tests/data/f2s_conformance.tsv (with the reasons).
CONFORMANCE_TABLE = Path(__file__).parent / "data" / "f2s_conformance.tsv"


def conformance_table() -> dict[str, list[str]]:
    """Input (relative to raw/) -> [outcome, expected file or reason, column spec, why]."""
    rows = {}
    for line in CONFORMANCE_TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            name, *rest = line.split("\t")
            rows[name] = (rest + ["", "", "", ""])[:4]
    return rows


def suite_inputs(f2s_dir: Path) -> list[str]:
    """Every file under the suite's raw/ folder, relative to it."""
    raw = f2s_dir / "raw"
    return sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*") if p.is_file())


def without_column(text: str, column: str) -> str:
    """SLOW5 text with one aux column removed from the column lines and every record."""
    lines = text.split("\n")
    names = next(ln for ln in lines if ln.startswith("#read_id\t")).split("\t")
    if column not in names:
        return text
    i = names.index(column)
    out = []
    for ln in lines:
        fields = ln.split("\t")
        if (
            ln
            and not ln.startswith("@")
            and not ln.startswith("#slow5_version")
            and not (ln.startswith("#num_read_groups"))
        ):
            del fields[i]
        out.append("\t".join(fields))
    return "\n".join(out)


def column(text: str, name: str) -> tuple[str, list[str]]:
    """The type and the record values of one column of a SLOW5 text."""
    lines = text.splitlines()
    names = next(ln for ln in lines if ln.startswith("#read_id\t")).split("\t")
    types = next(ln for ln in lines if ln.startswith("#char*\t")).split("\t")
    i = names.index(name)
    records = [ln.split("\t") for ln in lines if not ln.startswith(("#", "@"))]
    return types[i], [r[i] for r in records]


def fast5_attribute_names(path: Path) -> set[str]:
    """Names of every attribute of a FAST5 file outside the groups slow5tools skips."""
    found: set[str] = set()

    def visit(name: str, obj: h5py.HLObject) -> None:
        if not {"Analyses", "PreviousReadInfo"} & set(name.split("/")):
            found.update(obj.attrs)

    with h5py.File(path, "r") as h5:
        found.update(h5.attrs)
        h5.visititems(visit)
    return found


def read_back(*paths: Path) -> list[list]:
    """Every record of SLOW5/BLOW5 files as pyslow5 reads them: (read id, length, fields).
    In a forked child: pyslow5 (slow5lib) may crash on a malformed file, which must fail the
    test, not the worker (a fresh interpreter for it cost a quarter of a CPU second a call)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one JSON line per file, or the traceback; never back into pytest
        os.close(rfd)
        code = 0
        with os.fdopen(wfd, "w") as out:
            try:
                for path in paths:
                    s5 = pyslow5.Open(str(path), "r")
                    reads = [
                        (r["read_id"], int(r["len_raw_signal"]), sorted(r))
                        for r in s5.seq_reads(aux="all")
                    ]
                    out.write(json.dumps(reads) + "\n")
            except BaseException:
                out.write("Traceback " + traceback.format_exc())
                code = 1
        os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd) as pipe:
        text = pipe.read()
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    assert status == 0, f"pyslow5 cannot read {paths} (exit {status}): {text[-2000:]}"
    return [json.loads(line) for line in text.splitlines()]


def test_conformance_table_covers_the_whole_suite(f2s_dir: Path) -> None:
    """The table names every input of raw/ (no more, no less) with a known outcome."""
    table = conformance_table()
    assert sorted(table) == suite_inputs(f2s_dir)
    kinds = {"identical", "deliberate", "refused", "accepted"}
    assert {row[0] for row in table.values()} <= kinds
    assert all(row[3] for row in table.values() if row[0] in ("deliberate", "accepted"))


@pytest.mark.parametrize("name", sorted(conformance_table()))
def test_f2s_suite_input(f2s_dir: Path, tmp_path: Path, name: str) -> None:
    """Each suite input gives its documented outcome; every output is readable by pyslow5."""
    outcome, detail, spec, _ = conformance_table()[name]
    src = f2s_dir / "raw" / name
    out = tmp_path / "out.slow5"
    if outcome == "refused":
        with pytest.raises(ConversionError) as err:
            convert([src], out, progress=None)
        assert str(src) in str(err.value) and detail in str(err.value)
        assert not out.exists() and not leftovers(tmp_path)
        # skip: the input is listed with the reason, the good file is converted
        good = f2s_dir / "raw/single-fast5/sss1.fast5"
        report = convert([src, good], tmp_path / "s.blow5", on_bad_fast5="skip", progress=None)
        rows = [r.split("\t") for r in report.rejected_tsv.read_text().splitlines()[1:]]
        assert rows and all(r[0] == str(src) and detail in r[2] for r in rows)
        rejected = {r[1] for r in rows}
        # the other reads of a file with one bad read are converted, then the good file's
        kept = [] if "." in rejected else [i for i, _ in read_layout(src) if i not in rejected]
        assert [r[0] for r in read_back(tmp_path / "s.blow5")[0]] == kept + [
            read_layout(good)[0][0]
        ]
        return
    report = convert([src], out, allow_duplicate_ids=True, progress=None)
    blow5 = tmp_path / "out.blow5"
    convert([src], blow5, allow_duplicate_ids=True, progress=None)
    text_reads, blow5_reads_ = read_back(out, blow5)
    # record for record: every read of the input, in order, with its signal length
    layout = read_layout(src)
    assert [(r[0], r[1] > 0) for r in text_reads] == [(rid, True) for rid, _ in layout]
    assert blow5_reads_ == text_reads and len(text_reads) == report.reads_written
    names = out.read_text().split("\n#read_id\t")[1].split("\n")[0].split("\t")
    aux = set(names[7:])
    assert all(aux <= set(r[2]) for r in text_reads)  # pyslow5 sees every aux column
    # every attribute of the input (read with plain h5py) is a header attribute or a column
    text = out.read_text()
    written = {ln.split("\t")[0][1:] for ln in text.splitlines() if ln.startswith("@")}
    written |= set(names) | {"read_id", "duration"}  # duration is len_raw_signal
    assert fast5_attribute_names(src) <= written
    if outcome in ("identical", "deliberate"):
        expected = (f2s_dir / "expected" / detail).read_text()
        ours = out.read_text()
        if outcome == "identical":
            assert out.read_bytes() == (f2s_dir / "expected" / detail).read_bytes()
        else:
            col, col_type, values = spec.split(":")
            assert ours != expected
            assert without_column(ours, col) == without_column(expected, col)
            assert column(ours, col) == (col_type, values.split(","))


ERR_FAST5 = {
    "empty_fast5.fast5": "empty FAST5",
    "not_a_fast5.fast5": "not an HDF5 file",
    "single_fast5_no_raw_grp.fast5": "no Raw group",
}


def fast5_signals(files: list[Path]) -> dict[str, np.ndarray]:
    """Read id -> raw signal of single-read FAST5 files, read with plain h5py."""
    out = {}
    for path in files:
        with h5py.File(path, "r") as h5:
            (read,) = h5["Raw/Reads"].values()
            out[read.attrs["read_id"].decode()] = read["Signal"][()]
    return out


def blow5_reads(path: Path) -> list[dict]:
    """All records of a SLOW5/BLOW5 file read back by pyslow5 (slow5lib), with aux fields."""
    s5 = pyslow5.Open(str(path), "r")
    return list(s5.seq_reads(aux="all"))


def leftovers(folder: Path) -> list[str]:
    """Temporary files the writer may have left in a folder."""
    return [p.name for p in folder.iterdir() if ".tmp" in p.name]


@pytest.fixture(scope="session")
def ecoli_blow5(ecoli_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 112 E. coli reads converted with the defaults and K=2 worker processes."""
    out = tmp_path_factory.mktemp("ecoli") / "ecoli.blow5"
    report = convert([ecoli_dir / "fast5"], out, processes=2, progress=None)
    assert report.reads_written == 112 and report.files_converted == 112
    return out


# --- slow5tools conformance ---------------------------------------------------------------


@pytest.mark.parametrize("expected", sorted(CONFORMANCE))
def test_slow5_text_is_byte_identical_to_slow5tools(
    f2s_dir: Path, tmp_path: Path, expected: str
) -> None:
    """SLOW5 text equals slow5tools f2s output for every conformance input."""
    inputs = [f2s_dir / "raw" / name for name in CONFORMANCE[expected]]
    out = tmp_path / "out.slow5"
    # slow5tools does not check read ids; several expected files repeat one read.
    convert(inputs, out, allow_duplicate_ids=True, progress=None)
    assert out.read_bytes() == (f2s_dir / "expected" / expected).read_bytes()


@pytest.mark.parametrize("signal, name", [("none", "ssm1_zlib"), ("svb-zd", "ssm1_zlib_svb")])
def test_blow5_is_byte_identical_to_slow5tools(
    f2s_dir: Path, tmp_path: Path, signal: str, name: str
) -> None:
    """BLOW5 (zlib records, raw or svb-zd signal) and its index equal slow5tools/slow5lib's."""
    out = tmp_path / "ssm1.blow5"
    convert([f2s_dir / "raw/multi-fast5/ssm1.fast5"], out, signal_compression=signal, progress=None)
    expected = f2s_dir / f"expected/multi-fast5-output/{name}.blow5"
    assert out.read_bytes() == expected.read_bytes()
    # slow5lib builds an index for a copy without one: ours must be the same bytes.
    copy = tmp_path / "copy" / "ssm1.blow5"
    copy.parent.mkdir()
    shutil.copy(out, copy)
    s5 = pyslow5.Open(str(copy), "r")
    assert s5.get_read("bc5615d7-dc94-4315-9cf1-5112555c19d2")["len_raw_signal"] == 63922
    del s5
    assert Path(str(copy) + ".idx").read_bytes() == Path(str(out) + ".idx").read_bytes()


def test_compiled_svb_zd_encoder_is_built_and_matches_numpy(ecoli_dir: Path) -> None:
    """./setup.sh builds the compiled svb-zd encoder; it gives the numpy encoder's bytes for
    real reads and int16's extremes (and slow5tools' bytes: the test above)."""
    assert slow5._svbzd_lib is not None, "numapore/signal/_svbzd is not built: run ./setup.sh"
    signals = list(fast5_signals(sorted((ecoli_dir / "fast5").glob("*.fast5"))[:20]).values())
    rng = np.random.default_rng(7)
    signals += [
        np.array([], "<i2"),
        np.array([-32768, 32767, -32768, 0, -1, 1, 255, -256], "<i2"),
        rng.integers(-32768, 32768, 1001, dtype=np.int16),
        rng.integers(-300, 300, 999, dtype=np.int16).astype(">i2"),  # big-endian input
    ]
    for signal in signals:
        assert slow5.svb_zd_encode(signal) == slow5.svb_zd_encode_numpy(signal), len(signal)


def test_blow5_problem_names_where_a_file_was_cut(ecoli_blow5: Path, tmp_path: Path) -> None:
    """A whole BLOW5 passes; cut or padded copies get the place and reason."""
    data = ecoli_blow5.read_bytes()
    assert blow5_problem(ecoli_blow5) is None
    cut = tmp_path / "cut.blow5"
    expected = {
        10: "cut short inside its header (10 bytes)",
        len(data) // 2: "cut short in the middle of record ",
        len(data) - 5: "cut short after record 112 at byte",
        len(data) + 3: "3 byte(s) after its end-of-file marker",
    }
    for size, reason in expected.items():
        cut.write_bytes(data[:size] if size < len(data) else data + b"xyz")
        assert reason in blow5_problem(cut)
    cut.write_bytes(b"not slow5")
    assert blow5_problem(cut).startswith("not a BLOW5 file")


def test_read_layout_lists_the_reads_read_fast5_finds(f2s_dir: Path) -> None:
    """The layout-only listing names the same reads as the full reader, single and multi."""
    files = list_fast5([f2s_dir / "raw/single-fast5", f2s_dir / "raw/multi-fast5"])
    for path in files:
        ids = [read.record.read_id for read in read_fast5(path).reads]
        assert read_layout(path) == [(read_id, True) for read_id in ids], path
    with pytest.raises(Fast5Error, match="not_a_fast5.fast5: not an HDF5 file"):
        read_layout(f2s_dir / "raw/err_fast5/not_a_fast5.fast5")


def test_format_double_matches_slow5lib() -> None:
    """Doubles are printed with %f minus trailing zeros, like slow5lib."""
    assert format_double(8192.0) == "8192"
    assert format_double(1444.86) == "1444.86"
    assert format_double(216.2298864563899) == "216.229886"
    assert format_double(-1e-7) == "0"
    assert format_double(0.0078125) == "0.007812"


def test_list_fast5_is_recursive_and_sorted(f2s_dir: Path, tmp_path: Path) -> None:
    """Folders expand recursively in sorted path order; files keep the given order."""
    (tmp_path / "b").mkdir()
    for name in ("b/2.fast5", "a.fast5", "c.txt", "b/1.fast5"):
        (tmp_path / name).write_bytes(b"")
    assert [p.relative_to(tmp_path).as_posix() for p in list_fast5([tmp_path])] == [
        "a.fast5",
        "b/1.fast5",
        "b/2.fast5",
    ]
    files = [tmp_path / "b/2.fast5", tmp_path / "a.fast5"]
    assert list_fast5(files) == files


# --- round trips ----------------------------------------------------------------------------


def test_ecoli_blow5_round_trip(ecoli_dir: Path, ecoli_blow5: Path) -> None:
    """pyslow5 reads back all 112 reads with every signal value equal to the FAST5 input."""
    signals = fast5_signals(sorted((ecoli_dir / "fast5").glob("*.fast5")))
    reads = blow5_reads(ecoli_blow5)
    assert len(reads) == len(signals) == 112
    for read in reads:
        np.testing.assert_array_equal(read["signal"], signals[read["read_id"]])
        assert read["len_raw_signal"] == len(signals[read["read_id"]])
        assert read["digitisation"] == 8192 and read["sampling_rate"] == 4000
        assert read["channel_number"].isdigit() and read["start_time"] > 0
    assert Path(str(ecoli_blow5) + ".idx").is_file()
    s5 = pyslow5.Open(str(ecoli_blow5), "r")
    assert s5.get_header_value("run_id") == "0cc960b63c07619b4bf2917507d447479a21da66"
    assert s5.get_num_read_groups() == 1


def test_one_and_two_processes_give_identical_files(ecoli_dir: Path, tmp_path: Path) -> None:
    """K=1 writes the same bytes as K=2 (results are written in input order)."""
    files = sorted((ecoli_dir / "fast5").glob("*.fast5"))[:24]
    k2 = tmp_path / "k2.blow5"
    convert(files, k2, processes=2, progress=None)
    out = tmp_path / "k1.blow5"
    report = convert(files, out, processes=1, progress=None)
    assert out.read_bytes() == k2.read_bytes()
    assert Path(str(out) + ".idx").read_bytes() == Path(str(k2) + ".idx").read_bytes()
    assert report.samples > 0 and report.signal_bytes == 2 * report.samples
    assert report.reads_per_second > 0 and report.output_bytes == out.stat().st_size


@pytest.mark.parametrize(
    "record, signal", [("zstd", "none"), ("none", "svb-zd"), ("zlib", "svb-zd")]
)
def test_compression_variants_round_trip(
    ecoli_dir: Path, tmp_path: Path, record: str, signal: str
) -> None:
    """Every record/signal compression pair is read back exactly by slow5lib."""
    files = sorted((ecoli_dir / "fast5").glob("*.fast5"))[:8]
    out = tmp_path / "x.blow5"
    convert(files, out, record_compression=record, signal_compression=signal, progress=None)
    signals = fast5_signals(files)
    reads = blow5_reads(out)
    assert [r["read_id"] for r in reads] == list(signals)
    for read in reads:
        np.testing.assert_array_equal(read["signal"], signals[read["read_id"]])


def test_vbz_compressed_signal_is_read(f2s_dir: Path, tmp_path: Path) -> None:
    """A multi-read FAST5 whose signal is VBZ-compressed converts to the same SLOW5 text."""
    src = f2s_dir / "raw/multi-fast5/ssm1.fast5"
    vbz = tmp_path / "vbz.fast5"
    shutil.copy(src, vbz)
    with h5py.File(vbz, "r+") as h5:
        for name in h5:
            raw = h5[name]["Raw"]
            signal = raw["Signal"][()]
            del raw["Signal"]
            raw.create_dataset(
                "Signal", data=signal, compression=32020, compression_opts=(0, 2, 1, 1)
            )
    with h5py.File(vbz, "r") as h5:
        plist = h5[next(iter(h5))]["Raw/Signal"].id.get_create_plist()
        assert plist.get_filter(0)[0] == 32020
    out = tmp_path / "vbz.slow5"
    convert([vbz], out, progress=None)
    assert out.read_bytes() == (f2s_dir / "expected/multi-fast5-output/ssm1.slow5").read_bytes()


@pytest.mark.parametrize("processes", [1, 2])
def test_multi_read_files_split_into_slices(
    f2s_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: int
) -> None:
    """Big multi-read files are shared out in read-group slices; the output is unchanged."""
    monkeypatch.setattr(convert_mod, "SLICE_READS", 1)
    out = tmp_path / "dir.slow5"
    convert([f2s_dir / "raw/multi-fast5"], out, processes=processes, allow_duplicate_ids=True)
    expected = f2s_dir / "expected/multi-fast5-output/directory_multi-fast5.slow5"
    assert out.read_bytes() == expected.read_bytes()


def test_batches_with_sliced_multi_read_files_keep_input_order(
    f2s_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With K=2, single- and multi-read files share worker batches; a multi-read file's slices
    are written before the rest of its batch: the output is slow5tools' (and K=1's)."""
    monkeypatch.setattr(convert_mod, "SLICE_READS", 1)
    out = tmp_path / "mixed.slow5"
    convert([f2s_dir / "raw/single-and-multi-fast5"], out, processes=2, allow_duplicate_ids=True)
    expected = "single-and-multi-fast5-output/file_single-and-multi-fast5.slow5"
    assert out.read_bytes() == (f2s_dir / "expected" / expected).read_bytes()


def test_two_runs_give_two_read_groups(f2s_dir: Path, tmp_path: Path) -> None:
    """A second run_id becomes read group 1 with its own header values."""
    inputs = []
    for i, run in enumerate(["run_a", "run_b", "run_a"]):
        path = tmp_path / f"{i}.fast5"
        shutil.copy(f2s_dir / "raw/single-fast5/sss1.fast5", path)
        with h5py.File(path, "r+") as h5:
            h5["UniqueGlobalKey/tracking_id"].attrs["run_id"] = run
            h5["UniqueGlobalKey/tracking_id"].attrs["hostname"] = f"host_{run}"
            h5["Raw/Reads/Read_2760"].attrs["read_id"] = f"read-{i}"
        inputs.append(path)
    for fmt in ("blow5", "slow5"):
        out = tmp_path / f"runs.{fmt}"
        convert(inputs, out, progress=None)
        s5 = pyslow5.Open(str(out), "r")
        assert s5.get_num_read_groups() == 2
        assert s5.get_all_headers(read_group=1)["hostname"] == "host_run_b"
        assert [r["read_group"] for r in s5.seq_reads()] == [0, 1, 0]
        if fmt == "blow5":  # the index was shifted along with the rewritten header
            s5 = pyslow5.Open(str(out), "r")
            assert s5.get_read("read-2")["read_group"] == 0
    text = (tmp_path / "runs.slow5").read_text()
    assert "@run_id\trun_a\trun_b\n" in text and "#num_read_groups\t2\n" in text


def test_end_reason_enum_and_extra_attributes(f2s_dir: Path, tmp_path: Path) -> None:
    """An end_reason enum becomes an enum aux column; other Raw attributes keep their type."""
    path = tmp_path / "er.fast5"
    shutil.copy(f2s_dir / "raw/multi-fast5/ssm1.fast5", path)
    labels = {label: i for i, label in enumerate(END_REASON_LABELS)}
    with h5py.File(path, "r+") as h5:
        for i, name in enumerate(h5):
            raw = h5[name]["Raw"]
            raw.attrs.create("end_reason", i + 1, dtype=h5py.enum_dtype(labels, basetype="u1"))
            raw.attrs.create("num_minknow_events", 10 * i, dtype="u8")
    out = tmp_path / "er.slow5"
    convert([path], out, progress=None)
    lines = out.read_text().splitlines()
    enum = "enum{" + ",".join(END_REASON_LABELS) + "}"
    assert lines[-4].split("\t")[8:] == [
        "start_time",
        "read_number",
        "start_mux",
        "median_before",
        "end_reason",
        "num_minknow_events",
        "channel_number",
    ]
    assert lines[-5].split("\t")[12:14] == [enum, "uint64_t"]
    assert [ln.split("\t")[12:14] for ln in lines[-3:]] == [["1", "0"], ["2", "10"], ["3", "20"]]
    s5 = pyslow5.Open(str(out), "r")
    assert s5.get_aux_enum_labels("end_reason") == list(END_REASON_LABELS)
    assert [r["end_reason"] for r in s5.seq_reads(aux="all")] == [1, 2, 3]


# --- nanopolish ------------------------------------------------------------------------------


def test_nanopolish_refuses_svb_zd() -> None:
    """The workflow can refuse svb-zd signal when nanopolish will read the BLOW5."""
    check_nanopolish_compatible("none")
    with pytest.raises(ValueError, match="segfaults"):
        check_nanopolish_compatible("svb-zd")


@pytest.mark.skipif(
    not all(shutil.which(t) for t in ("nanopolish", "minimap2", "samtools")),
    reason="needs nanopolish, minimap2 and samtools",
)
def test_nanopolish_reads_our_blow5(ecoli_dir: Path, ecoli_blow5: Path, tmp_path: Path) -> None:
    """Smoke test: nanopolish index --slow5 and call-methylation work on our BLOW5."""
    blow5 = tmp_path / "reads.blow5"
    shutil.copy(ecoli_blow5, blow5)
    shutil.copy(str(ecoli_blow5) + ".idx", str(blow5) + ".idx")
    fasta = tmp_path / "reads.fasta"
    shutil.copy(ecoli_dir / "reads.fasta", fasta)
    region = ecoli_dir / "region.fa"
    sam = subprocess.run(
        ["minimap2", "-ax", "map-ont", "-t", "1", str(region), str(fasta)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    lines = sam.splitlines()
    header = [ln for ln in lines if ln.startswith("@")]
    mapped = [ln for ln in lines if not ln.startswith("@") and ln.split("\t")[2] != "*"]
    bam = tmp_path / "few.bam"  # three reads keep the smoke test fast
    subprocess.run(
        ["samtools", "sort", "-o", str(bam), "-"],
        input="\n".join(header + mapped[:3]) + "\n",
        check=True,
        text=True,
    )
    subprocess.run(["samtools", "index", str(bam)], check=True)
    subprocess.run(
        ["nanopolish", "index", "--slow5", str(blow5), str(fasta)], check=True, capture_output=True
    )
    calls = subprocess.run(
        ["nanopolish", "call-methylation", "-t", "1", "-r", str(fasta), "-b", str(bam)]
        + ["-g", str(region)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert calls[0].startswith("chromosome\tstrand\tstart")
    assert len(calls) > 10 and {c.split("\t")[4] for c in calls[1:]} <= {
        m.split("\t")[0] for m in mapped[:3]
    }


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ERR_FAST5))
def test_bad_fast5_fails_naming_file_and_reason(f2s_dir: Path, tmp_path: Path, name: str) -> None:
    """on_bad_fast5='fail': the error names the file and the reason; no output is left."""
    bad = f2s_dir / "raw/err_fast5" / name
    good = f2s_dir / "raw/single-fast5/sss1.fast5"
    out = tmp_path / "out.blow5"
    with pytest.raises(ConversionError) as err:
        convert([good, bad], out, progress=None)
    assert str(bad) in str(err.value) and ERR_FAST5[name] in str(err.value)
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize("name", sorted(ERR_FAST5))
def test_bad_fast5_skipped_and_listed(f2s_dir: Path, tmp_path: Path, name: str) -> None:
    """on_bad_fast5='skip': conversion completes and the TSV lists the file and reason."""
    bad = f2s_dir / "raw/err_fast5" / name
    good = f2s_dir / "raw/single-fast5/sss1.fast5"
    out = tmp_path / "out.blow5"
    report = convert([bad, good], out, on_bad_fast5="skip", progress=None)
    assert (report.files, report.files_skipped, report.reads_written) == (2, 1, 1)
    rows = report.rejected_tsv.read_text().splitlines()
    assert rows[0] == "path\tread_id\treason"
    assert len(rows) == 2 and rows[1].startswith(f"{bad}\t.\t") and ERR_FAST5[name] in rows[1]
    assert report.rejected_tsv == Path(str(out) + ".rejected.tsv")
    assert len(blow5_reads(out)) == 1


def test_duplicate_read_ids(f2s_dir: Path, tmp_path: Path) -> None:
    """A read id seen twice fails the conversion, or is skipped and listed."""
    first = f2s_dir / "raw/single-fast5/sss1.fast5"
    multi = f2s_dir / "raw/single-and-multi-fast5/1ssm1.fast5"  # holds ...19d5 again
    out = tmp_path / "dup.blow5"
    with pytest.raises(ConversionError, match="duplicate read id.*sss1.fast5"):
        convert([first, multi], out, progress=None)
    assert not out.exists() and not leftovers(tmp_path)
    report = convert([first, multi], out, on_bad_fast5="skip", progress=None)
    assert (report.reads_written, report.reads_skipped, report.files_skipped) == (3, 1, 0)
    rows = report.rejected_tsv.read_text().splitlines()[1:]
    reason = f"duplicate read id (already converted from {first})"
    assert rows == [f"{multi}\tbc5615d7-dc94-4315-9cf1-5112555c19d5\t{reason}"]
    assert [r["read_id"][-2:] for r in blow5_reads(out)] == ["d5", "d1", "d2"]


REAL_PROCESS = convert_worker.process_task


def crash_on_sss2(task: convert_worker.Task) -> convert_worker.Result:
    """Worker stand-in that dies of a segfault, as Debian's HDF5 does, on one file."""
    if "sss2" in task.path:
        faulthandler.disable()  # pytest's handler would print the worker's stack in the log
        os.kill(os.getpid(), SIGSEGV)
    return REAL_PROCESS(task)


@pytest.mark.parametrize("processes", [1, 2])
def test_file_that_crashes_its_reader_is_a_bad_file(
    f2s_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: int
) -> None:
    """A file that kills every reader process is refused by name (fail) or listed (skip); the
    other files, in the dead worker's batch or beside it, still give the same output."""
    monkeypatch.setattr(convert_worker, "process_task", crash_on_sss2)
    if convert_mod._pool_context().get_start_method() != "fork":
        pytest.fail("the patched worker only reaches forked processes")
    folder = f2s_dir / "raw/single-fast5"
    out = tmp_path / "crash.blow5"
    kw = dict(processes=processes, allow_duplicate_ids=True, progress=None)
    with pytest.raises(ConversionError, match=r"sss2\.fast5: unreadable FAST5 \(reading it crash"):
        convert([folder], out, **kw)
    assert not out.exists() and not leftovers(tmp_path)
    report = convert([folder], out, on_bad_fast5="skip", **kw)
    rows = report.rejected_tsv.read_text().splitlines()[1:]
    assert rows == [
        f"{folder / 'sss2.fast5'}\t.\tunreadable FAST5 (reading it crashed the reader process)"
    ]
    others = [f for f in list_fast5([folder]) if f.name != "sss2.fast5"]
    monkeypatch.setattr(convert_worker, "process_task", REAL_PROCESS)
    convert(others, tmp_path / "others.blow5", **kw)
    assert out.read_bytes() == (tmp_path / "others.blow5").read_bytes()


def test_failed_conversion_keeps_previous_output(f2s_dir: Path, tmp_path: Path) -> None:
    """A failing run leaves an existing output and its index untouched."""
    out = tmp_path / "keep.blow5"
    convert([f2s_dir / "raw/single-fast5/sss1.fast5"], out, progress=None)
    before = out.read_bytes(), Path(str(out) + ".idx").read_bytes()
    with pytest.raises(ConversionError):
        convert([f2s_dir / "raw/err_fast5"], out, progress=None)
    assert (out.read_bytes(), Path(str(out) + ".idx").read_bytes()) == before
    assert not leftovers(tmp_path)


def test_read_without_raw_group_in_multi_read_file(f2s_dir: Path, tmp_path: Path) -> None:
    """One read group without Raw is rejected by read id; the other reads convert."""
    path = tmp_path / "m.fast5"
    shutil.copy(f2s_dir / "raw/multi-fast5/ssm1.fast5", path)
    with h5py.File(path, "r+") as h5:
        del h5["read_bc5615d7-dc94-4315-9cf1-5112555c19d2/Raw"]
    contents = read_fast5(path)
    assert [r.record.read_id[-2:] for r in contents.reads] == ["d1", "d5"]
    assert "no Raw group" in contents.rejected[0][1]
    with pytest.raises(ConversionError, match="read_bc5615d7.*no Raw group"):
        convert([path], tmp_path / "m.blow5", progress=None)
    report = convert([path], tmp_path / "m.blow5", on_bad_fast5="skip", progress=None)
    assert (report.reads_written, report.reads_skipped) == (2, 1)


# --- API details -----------------------------------------------------------------------------


def test_progress_lines_on_stderr(f2s_dir: Path, tmp_path: Path) -> None:
    """Progress reports reads converted, files done (and as a percentage) and reads/s."""
    stream = io.StringIO()
    convert(
        [f2s_dir / "raw/multi-fast5"],
        tmp_path / "p.blow5",
        allow_duplicate_ids=True,
        progress=stream,
        progress_interval=0.0,
    )
    lines = stream.getvalue().splitlines()
    assert any("reads converted" in ln and "reads/s" in ln for ln in lines)
    assert any("3/3 files (100%)" in ln for ln in lines)  # how far, as a percentage
    assert "9 reads from 3/3 files" in lines[-1]


def test_write_slow5_from_memory(tmp_path: Path) -> None:
    """In-memory records (e.g. simulated) are written as BLOW5/SLOW5 slow5lib can read."""
    rng = np.random.default_rng(1)
    aux_fields = FAST5_AUX_FIELDS + (AuxField("end_reason", "enum", ("unknown", "partial")),)
    records = [
        Record(
            f"sim-{i}",
            0,
            8192.0,
            6.0,
            1444.86,
            4000.0,
            rng.integers(300, 700, 100 + i).astype(np.int16),
            {
                "start_time": i,
                "read_number": i,
                "start_mux": 1,
                "median_before": 200.5,
                "channel_number": str(i + 1),
                "end_reason": 1,
            },
        )
        for i in range(3)
    ]
    records[2].aux = {"read_number": 9}  # other aux values missing
    for name in ("sim.blow5", "sim.slow5"):
        n = write_slow5(tmp_path / name, records, [{"run_id": "sim", "exp": ""}], aux_fields)
        assert n == 3
        reads = blow5_reads(tmp_path / name)
        assert [r["read_id"] for r in reads] == ["sim-0", "sim-1", "sim-2"]
        np.testing.assert_array_equal(reads[1]["signal"], records[1].signal)
        assert reads[1]["channel_number"] == "2" and reads[1]["end_reason"] == 1
        assert reads[2]["read_number"] == 9
    text = (tmp_path / "sim.slow5").read_text()
    assert "\tenum{unknown,partial}\n" in text and "@exp\t.\n" in text
    assert text.splitlines()[-1].endswith("\t.\t9\t.\t.\t.\t.")
    assert Path(str(tmp_path / "sim.blow5") + ".idx").is_file()


def test_cli_exit_codes(f2s_dir: Path, tmp_path: Path) -> None:
    """python -m numapore.convert: 0 on success, 1 naming the file on bad input."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "scripts"))
    cmd = [sys.executable, "-m", "numapore.signal.convert", "-q"]
    bad = f2s_dir / "raw/err_fast5/not_a_fast5.fast5"
    good = f2s_dir / "raw/multi-fast5/ssm1.fast5"
    fail = subprocess.run(
        cmd + [str(good), str(bad), "-o", str(tmp_path / "a.blow5")],
        env=env,
        capture_output=True,
        check=False,
        text=True,
    )
    assert fail.returncode == 1 and f"{bad}: not an HDF5 file" in fail.stderr
    assert not (tmp_path / "a.blow5").exists()
    ok = subprocess.run(
        cmd
        + [
            str(good),
            str(bad),
            "-o",
            str(tmp_path / "a.slow5"),
            "--on-bad-fast5",
            "skip",
            "-p",
            "2",
        ],
        env=env,
        capture_output=True,
        check=False,
        text=True,
    )
    assert ok.returncode == 0 and "skipped 1 files" in ok.stderr
    expected = f2s_dir / "expected/multi-fast5-output/ssm1.slow5"
    assert (tmp_path / "a.slow5").read_bytes() == expected.read_bytes()
    assert (tmp_path / "a.slow5.rejected.tsv").is_file()


def test_empty_signal_follows_on_bad_fast5(ecoli_dir: Path, tmp_path: Path) -> None:
    """A real read whose Signal dataset is emptied: fail names the file and read, skip rejects
    it as "empty signal"; the census counts it as a read without signal."""
    src = sorted((ecoli_dir / "fast5").glob("*.fast5"))[0]
    good = sorted((ecoli_dir / "fast5").glob("*.fast5"))[1]
    empty = tmp_path / "empty.fast5"
    shutil.copy(src, empty)
    empty.chmod(0o644)
    with h5py.File(empty, "r+") as h5:
        (read,) = h5["Raw/Reads"].values()
        read_id = read.attrs["read_id"].decode()
        del read["Signal"]
        read.create_dataset("Signal", shape=(0,), dtype="i2")
    assert read_layout(empty) == [(read_id, False)]
    out = tmp_path / "e.blow5"
    with pytest.raises(ConversionError) as err:
        convert([good, empty], out, progress=None)
    assert f"{empty} (read {read_id}): " in str(err.value) and "empty signal" in str(err.value)
    assert not out.exists() and not leftovers(tmp_path)
    report = convert([good, empty], out, on_bad_fast5="skip", progress=None)
    assert (report.reads_written, report.reads_skipped) == (1, 1)
    rows = report.rejected_tsv.read_text().splitlines()[1:]
    assert rows == [f"{empty}\t{read_id}\tthe single-read FAST5: empty signal"]
    assert [r["read_id"] for r in blow5_reads(out)] == [read_layout(good)[0][0]]


def test_nothing_is_dropped_silently(f2s_dir: Path, tmp_path: Path) -> None:
    """A later file's read with an aux field the columns lack, or an enum label the column
    lacks, stops the run (fail) or is rejected with the reason (skip); never dropped."""
    first = f2s_dir / "raw/single-fast5/sss1.fast5"
    extra = tmp_path / "extra.fast5"
    shutil.copy(f2s_dir / "raw/single-fast5/sss2.fast5", extra)
    with h5py.File(extra, "r+") as h5:
        (read,) = h5["Raw/Reads"].values()
        read.attrs["read_id"] = "other-read"
        read.attrs.create("num_minknow_events", 7, dtype="u8")
    with pytest.raises(ConversionError, match=r"extra.fast5 \(read other-read\): aux field.*"):
        convert([first, extra], tmp_path / "x.slow5", progress=None)
    report = convert([first, extra], tmp_path / "x.slow5", on_bad_fast5="skip", progress=None)
    assert report.reads_skipped == 1 and "num_minknow_events" in report.rejected_tsv.read_text()
    # an end_reason label the output's enum does not have
    labels = {label: i for i, label in enumerate(END_REASON_LABELS)}
    odd = {**labels, "a_new_reason": 9}
    files = []
    for i, enum in enumerate([labels, odd]):
        path = tmp_path / f"er{i}.fast5"
        shutil.copy(f2s_dir / "raw/single-fast5/sss1.fast5", path)
        with h5py.File(path, "r+") as h5:
            (read,) = h5["Raw/Reads"].values()
            read.attrs["read_id"] = f"er-{i}"
            read.attrs.create("end_reason", i * 9, dtype=h5py.enum_dtype(enum, basetype="u1"))
        files.append(path)
    with pytest.raises(ConversionError, match="end_reason label 'a_new_reason' is not in the"):
        convert(files, tmp_path / "er.blow5", progress=None)


@pytest.mark.parametrize(
    "header, aux, read_id, problem",
    [
        ({"run_id": "r", "a\tb": "x"}, (), "r1", "holds a tab or newline"),
        ({"run_id": "r"}, (AuxField("a\nb", "uint8_t"),), "r1", "holds a tab or newline"),
        ({"run_id": "r"}, (AuxField("e", "enum", ("x,y",)),), "r1", "enum label 'x,y'"),
        ({"run_id": "r"}, (), "#r1", "begins with '#'"),
        ({"run_id": "r"}, (), "@r1", "begins with '@'"),
    ],
)
def test_writer_refuses_what_slow5_cannot_hold(
    tmp_path: Path, header: dict, aux: tuple, read_id: str, problem: str
) -> None:
    """The writer itself never writes a header or record line slow5lib would misread."""
    rec = Record(read_id, 0, 8192.0, 6.0, 1444.86, 4000.0, np.arange(5, dtype=np.int16))
    with pytest.raises(ValueError, match=problem):
        write_slow5(tmp_path / "w.slow5", [rec], [header], aux)
    assert not list(tmp_path.iterdir())


def test_bad_attribute_rejects_only_its_read(f2s_dir: Path, tmp_path: Path) -> None:
    """In a multi-read file, an attribute SLOW5 cannot hold rejects that read, not the file;
    an end_reason stored as a plain integer becomes an enum."""
    path = tmp_path / "m.fast5"
    shutil.copy(f2s_dir / "raw/multi-fast5/ssm1.fast5", path)
    with h5py.File(path, "r+") as h5:
        groups = sorted(h5)
        for i, name in enumerate(groups):
            h5[name]["Raw"].attrs.create("end_reason", [4, 9, 1][i], dtype="i4")
    bad_id = groups[1].removeprefix("read_")
    with pytest.raises(ConversionError, match=f"read {bad_id}.*integer end_reason 9 has no"):
        convert([path], tmp_path / "m.slow5", progress=None)
    report = convert([path], tmp_path / "m.slow5", on_bad_fast5="skip", progress=None)
    assert (report.reads_written, report.reads_skipped, report.files_skipped) == (2, 1, 0)
    reads = blow5_reads(tmp_path / "m.slow5")
    assert [r["end_reason"] for r in reads] == [4, 1]
    s5 = pyslow5.Open(str(tmp_path / "m.slow5"), "r")
    assert s5.get_aux_enum_labels("end_reason")[4] == "signal_positive"
