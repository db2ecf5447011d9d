"""The compiled FAST5 reader gives the Python reader's bytes, refusals and messages.

numapore.signal.fast5_core reads a FAST5 file in C (HDF5's C library through cffi) and encodes
its BLOW5 records; anything unusual is left to the Python reader (numapore.signal.fast5). These
tests convert every input of slow5tools' f2s suite, the 112 real E. coli reads and the VBZ set
both ways and compare the outputs byte for byte, so the two readers cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from numapore.signal import fast5_core
from numapore.signal.convert import ConversionError, convert
from numapore.signal.fast5 import list_fast5

VBZ_DIR = Path(__file__).parent / "data" / "vbz"
CONFORMANCE_TABLE = Path(__file__).parent / "data" / "f2s_conformance.tsv"
COMPRESSIONS = [("zlib", "svb-zd"), ("none", "none")]


def suite_inputs() -> list[str]:
    """Inputs of the f2s suite (relative to raw/), from the conformance table."""
    lines = CONFORMANCE_TABLE.read_text().splitlines()
    return sorted(ln.split("\t")[0] for ln in lines if ln and not ln.startswith("#"))


def identical_inputs() -> list[str]:
    """Suite inputs slow5tools converts and numapore matches byte for byte (the usual files)."""
    lines = CONFORMANCE_TABLE.read_text().splitlines()
    rows = [ln.split("\t") for ln in lines if ln and not ln.startswith("#")]
    return sorted(row[0] for row in rows if row[1] == "identical")


def convert_with(compiled: bool, monkeypatch: pytest.MonkeyPatch, *args, **kwargs):
    """Convert in this process with the compiled reader on or off: the report, or the error."""
    monkeypatch.setattr(fast5_core, "ENABLED", compiled)
    monkeypatch.setattr(fast5_core, "_READER", None)
    try:
        return convert(*args, progress=None, **kwargs)
    except ConversionError as err:
        return err


def outputs(folder: Path) -> dict[str, bytes]:
    """Every file a conversion left in folder, by name."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_compiled_reader_is_built() -> None:
    """./setup.sh builds numapore.signal._fast5_core on this machine."""
    assert fast5_core.lib is not None and fast5_core.ENABLED


@pytest.mark.parametrize("compressions", COMPRESSIONS, ids="+".join)
@pytest.mark.parametrize("name", suite_inputs())
def test_suite_input_same_bytes_both_readers(
    f2s_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    compressions: tuple[str, str],
) -> None:
    """Each suite input: same BLOW5 (or the same error) and the same rejected list either way."""
    src = f2s_dir / "raw" / name
    record, signal = compressions
    results = {}
    for compiled in (True, False):
        out = tmp_path / str(compiled)
        out.mkdir()
        got = {}
        for mode in ("fail", "skip"):
            done = convert_with(
                compiled,
                monkeypatch,
                [src],
                out / f"{mode}.blow5",
                record_compression=record,
                signal_compression=signal,
                on_bad_fast5=mode,
                allow_duplicate_ids=True,
            )
            got[mode] = str(done) if isinstance(done, ConversionError) else done.reads_written
        results[compiled] = (got, outputs(out))
    assert results[True] == results[False]


@pytest.mark.parametrize(
    "folder",
    ["single-and-multi-fast5", "run_id_conflicts", "end_reason_fast5", "unusual_fast5"],
)
def test_folders_same_bytes_both_readers(
    f2s_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    """Files of several runs and layouts in one output: same read groups, columns and bytes."""
    results = {}
    for compiled in (True, False):
        out = tmp_path / str(compiled)
        out.mkdir()
        done = convert_with(
            compiled,
            monkeypatch,
            [f2s_dir / "raw" / folder],
            out / "all.blow5",
            signal_compression="svb-zd",
            on_bad_fast5="skip",
            allow_duplicate_ids=True,
        )
        results[compiled] = (str(done) if isinstance(done, ConversionError) else "", outputs(out))
    assert results[True] == results[False]


@pytest.mark.parametrize("source", ["ecoli", "vbz"])
def test_real_reads_same_bytes_both_readers(
    ecoli_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """The 112 real reads (gzip) and the VBZ-compressed multi-read file: identical BLOW5."""
    src = ecoli_dir / "fast5" if source == "ecoli" else VBZ_DIR
    results = {}
    for compiled in (True, False):
        out = tmp_path / str(compiled)
        out.mkdir()
        convert_with(compiled, monkeypatch, [src], out / "reads.blow5", signal_compression="svb-zd")
        results[compiled] = outputs(out)
    assert results[True] == results[False]


def test_usual_files_take_the_compiled_path(ecoli_dir: Path, f2s_dir: Path) -> None:
    """The compiled reader reads the usual files itself: real reads, VBZ, every version."""
    paths = list_fast5([ecoli_dir / "fast5", VBZ_DIR])
    paths += [f2s_dir / "raw" / name for name in identical_inputs()]
    reader = fast5_core.CoreReader("zlib", "svb-zd", None, {})
    left = {}
    for path in paths:
        if reader.read(str(path)) is None:
            left[str(path)] = reader.reason
    assert not left


def test_unusual_file_is_left_to_the_python_reader(f2s_dir: Path) -> None:
    """A file it cannot read like the Python reader is left to it, with the reason."""
    reader = fast5_core.CoreReader("zlib", "svb-zd", None, {})
    assert reader.read(str(f2s_dir / "raw/err_fast5/not_a_fast5.fast5")) is None
    assert reader.reason == "cannot open as HDF5"
    assert reader.read(str(f2s_dir / "raw/err_fast5/dupli_attrib.fast5")) is None
    assert reader.reason == "header attribute given twice: version"


def test_shared_declarations_come_from_the_c_sources() -> None:
    """Both compiled modules' shared C types are read from their sources' cffi markers."""
    from numapore.methylation import calls_core_build
    from numapore.signal import fast5_core_build
    from numapore.signal.svbzd_build import shared_declarations

    assert "} np5_read;" in shared_declarations(fast5_core_build.SOURCE.read_text())
    assert "} cc_table;" in shared_declarations(calls_core_build.SOURCE.read_text())
    with pytest.raises(ValueError, match="cffi: begin/end"):
        shared_declarations("int f(void);")
