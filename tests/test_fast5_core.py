"""The compiled FAST5 reader gives the Python reader's bytes, refusals and messages.

numapore.signal.fast5_core reads a FAST5 file in C (HDF5's C library through cffi) and encodes
its BLOW5 records; anything unusual is left to the Python reader (numapore.signal.fast5). These
tests convert every input of slow5tools' f2s suite, the 112 real E. coli reads and the VBZ set
both ways and compare the outputs byte for byte, so the two readers cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from numapore.signal import convert as convert_mod
from numapore.signal import fast5_core
from numapore.signal.convert import ConversionError, convert
from numapore.signal.fast5 import list_fast5, read_layout

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
    """The 112 real reads (gzip) and the VBZ-compressed multi-read file: identical BLOW5, also
    with the compiled reader reading files object by object (files above CORE_MAX_BYTES) and
    with the multi-read file in slices of one read (a file read whole is kept between them)."""
    src = ecoli_dir / "fast5" if source == "ecoli" else VBZ_DIR
    monkeypatch.setattr(convert_mod, "SLICE_READS", 1)
    results, whole = {}, fast5_core.CORE_MAX_BYTES
    for compiled, core_max in ((True, whole), (True, 0), (False, 0)):
        monkeypatch.setattr(fast5_core, "CORE_MAX_BYTES", core_max)
        out = tmp_path / f"{compiled}-{core_max}"
        out.mkdir()
        convert_with(compiled, monkeypatch, [src], out / "reads.blow5", signal_compression="svb-zd")
        results[compiled, core_max] = outputs(out)
    assert results[True, whole] == results[True, 0] == results[False, 0]


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
    from numapore.nanopolish import calls_core_build
    from numapore.signal import fast5_core_build
    from numapore.base.compiled import shared_declarations

    assert "} np5_read;" in shared_declarations(fast5_core_build.SOURCE.read_text())
    assert "} cc_table;" in shared_declarations(calls_core_build.SOURCE.read_text())
    with pytest.raises(ValueError, match="cffi: begin/end"):
        shared_declarations("int f(void);")


# ---------- the compiled layout (read_layout, the census) ----------


def layout_with(compiled: bool, monkeypatch: pytest.MonkeyPatch, path: Path):
    """read_layout with the compiled layout on or off: the reads, or the error's type and text."""
    monkeypatch.setattr(fast5_core, "ENABLED", compiled)
    try:
        return read_layout(path)
    except Exception as err:  # noqa: BLE001 - the census records any error the same way
        return type(err).__name__, str(err)


# The inputs of slow5tools' suite the compiled layout leaves to Python, with its reasons.
LAYOUT_FALLBACKS = {
    "err_fast5/empty_fast5.fast5": "layout told by file_type/file_version",
    "err_fast5/no_fast5_dir/text_file.fast5": "cannot open as HDF5",
    "err_fast5/not_a_fast5.fast5": "cannot open as HDF5",
}


def test_layout_same_both_ways_on_real_and_suite_files(
    f2s_dir: Path, ecoli_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file of the f2s suite (every version, unusual, broken, SLOW5 text), the real reads
    and the VBZ multi-read file: the same reads or error either way; the compiled layout reads
    all FAST5 files itself but the three it cannot (not HDF5, a layout told by attributes)."""
    paths = sorted(p for p in f2s_dir.rglob("*") if p.is_file())
    paths += list_fast5([ecoli_dir / "fast5", VBZ_DIR])
    layout = fast5_core.CoreLayout()
    left = {}
    for path in paths:
        assert layout_with(True, monkeypatch, path) == layout_with(False, monkeypatch, path), path
        if path.suffix == ".fast5" and layout.read(str(path)) is None:
            suite = path.is_relative_to(f2s_dir / "raw")
            left[str(path.relative_to(f2s_dir / "raw") if suite else path)] = layout.reason
    assert left == LAYOUT_FALLBACKS
    (vbz,) = VBZ_DIR.glob("*.fast5")
    assert len(layout.read(str(vbz))) == 3  # VBZ multi-read: read in C (no filter needed)


def single_read(h5: h5py.File, name: str = "Read_7", **attrs) -> h5py.Group:
    """A single-read file's Raw/Reads/<name> with a 5-sample Signal and these attributes."""
    read = h5.create_group(f"Raw/Reads/{name}")
    read.create_dataset("Signal", data=np.arange(5, dtype="i2"))
    read.attrs.update(attrs)
    return read


def multi_read(h5: h5py.File, name: str = "read_ab", **attrs) -> h5py.Group:
    """A multi-read file's <name>/Raw with a 5-sample Signal and these attributes."""
    raw = h5.create_group(f"{name}/Raw")
    raw.create_dataset("Signal", data=np.arange(5, dtype="i2"))
    raw.attrs.update(attrs)
    return raw


def fixed(text: bytes) -> np.bytes_:
    """A fixed-length (numpy 'S') string attribute value."""
    return np.bytes_(text)


def empty_signal(h5: h5py.File) -> None:
    """A multi-read Raw whose Signal dataset has no samples."""
    raw = multi_read(h5, read_id="r1")
    del raw["Signal"]
    raw.create_dataset("Signal", shape=(0,), dtype="i2")


def signal_group(h5: h5py.File) -> None:
    """A single read whose Signal is a group."""
    read = single_read(h5, read_id="r1")
    del read["Signal"]
    read.create_group("Signal")


def soft_single_read(h5: h5py.File) -> None:
    """A single-read file whose second read is a soft link to its first."""
    single_read(h5, read_id="r1")
    h5["Raw/Reads/Read_8"] = h5py.SoftLink("/Raw/Reads/Read_7")


def soft_raw(h5: h5py.File) -> None:
    """A read group whose Raw is a soft link to a group beside it."""
    multi_read(h5, "read_real", read_id="r1")
    h5.create_group("read_ab")["Raw"] = h5py.SoftLink("/read_real/Raw")


def dangling_signal(h5: h5py.File) -> None:
    """A read whose Signal is a soft link to nothing."""
    raw = multi_read(h5, read_id="r1")
    del raw["Signal"]
    raw["Signal"] = h5py.SoftLink("/nowhere")


def multi_and(extra):
    """A multi-read file with read_ab plus whatever extra(h5) adds."""
    return lambda h5: (multi_read(h5, read_id="r1"), extra(h5))


NOT_TEXT = "string attribute with a NUL, tab, line break or non-UTF-8 bytes"  # fixed length
NOT_VLEN_TEXT = "string attribute with a tab, line break or non-UTF-8 bytes"  # variable length
NOT_SCALAR = "read_id that is not a scalar string"
# (the file's contents, None when the compiled layout reads it, else the reason it falls back)
LAYOUT_CASES = {
    "single empty read_id": (lambda h5: single_read(h5, read_id=""), None),
    "multi empty read_id": (lambda h5: multi_read(h5, read_id=""), None),
    "single fixed empty read_id": (lambda h5: single_read(h5, read_id=fixed(b"")), None),
    "multi fixed empty read_id": (lambda h5: multi_read(h5, read_id=fixed(b"")), None),
    "single no read_id": (lambda h5: single_read(h5), None),
    "single null read_id": (lambda h5: single_read(h5, read_id=h5py.Empty("S5")), None),
    "multi null read_id": (lambda h5: multi_read(h5, read_id=h5py.Empty("S5")), None),
    "fixed read_id": (lambda h5: multi_read(h5, read_id=fixed(b"abc")), None),
    "multi no Raw": (multi_and(lambda h5: h5.create_group("read_cd")), None),
    "multi group without read_": (multi_and(lambda h5: h5.create_group("other")), None),
    "multi name with a tab": (lambda h5: multi_read(h5, "read_a\tb"), None),
    "Analyses skipped": (multi_and(lambda h5: h5.create_group("Analyses/Basecall")), None),
    "no Raw/Reads": (lambda h5: h5.create_group("UniqueGlobalKey/tracking_id"), None),
    "empty Signal": (empty_signal, None),
    "Signal a group": (signal_group, None),
    "file_type": (
        lambda h5: h5.attrs.update(file_type="multi-read"),
        "layout told by file_type/file_version",
    ),
    "file_version": (
        lambda h5: (h5.attrs.update(file_version="2.0"), h5.create_group("abc")),
        "layout told by file_type/file_version",
    ),
    "soft-linked read group": (
        multi_and(lambda h5: h5.__setitem__("read_cd", h5py.SoftLink("/read_ab"))),
        "soft or external link: read_cd",
    ),
    "external read group": (
        multi_and(lambda h5: h5.__setitem__("read_cd", h5py.ExternalLink("x.fast5", "/r"))),
        "soft or external link: read_cd",
    ),
    "soft-linked Raw": (soft_raw, "soft or external link: Raw"),
    "dangling Signal": (dangling_signal, "soft or external link: Signal"),
    "soft-linked single read": (soft_single_read, "soft or external link: Read_8"),
    "read group a dataset": (
        multi_and(lambda h5: h5.create_dataset("read_cd", data=[1])),
        "read member not a group: read_cd",
    ),
    "multi Raw a dataset": (
        lambda h5: h5.create_dataset("read_ab/Raw", data=[1]).attrs.update(read_id="r1"),
        "member that is not a group: Raw",
    ),
    "single Raw a dataset": (
        lambda h5: (h5.create_dataset("Raw", data=[1]), h5.create_group("UniqueGlobalKey")),
        "member that is not a group: Raw",
    ),
    "single read a dataset": (
        lambda h5: h5.create_dataset("Raw/Reads/Read_7", data=[1]),
        "read member not a group: Read_7",
    ),
    "non-UTF-8 read_id": (lambda h5: multi_read(h5, read_id=fixed(b"r\xff1")), NOT_TEXT),
    "single tab read_id": (lambda h5: single_read(h5, read_id="r\t1"), NOT_VLEN_TEXT),
    "multi newline read_id": (lambda h5: multi_read(h5, read_id="r\n1"), NOT_VLEN_TEXT),
    "NUL in read_id": (lambda h5: single_read(h5, read_id=fixed(b"r\x001")), NOT_TEXT),
    "single name with a tab": (
        lambda h5: single_read(h5, "Read\t7"),
        "read name with a tab or line break: Read\t7",
    ),
    "read_id array": (lambda h5: multi_read(h5, read_id=["r1", "r2"]), NOT_SCALAR),
    "read_id one-value array": (lambda h5: single_read(h5, read_id=["r1"]), NOT_SCALAR),
    "single number read_id": (lambda h5: single_read(h5, read_id=5), NOT_SCALAR),
    "multi zero read_id": (lambda h5: multi_read(h5, read_id=0), NOT_SCALAR),
    "float read_id": (lambda h5: multi_read(h5, read_id=1.5), NOT_SCALAR),
}


@pytest.mark.parametrize("case", LAYOUT_CASES)
def test_layout_same_both_ways_on_unusual_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Each unusual layout or read_id: the compiled layout reads it (the same reads as Python)
    or leaves it to Python with the reason; read_layout gives the same either way."""
    make, reason = LAYOUT_CASES[case]
    path = tmp_path / "case.fast5"
    with h5py.File(path, "w") as h5:
        make(h5)
    expected = layout_with(False, monkeypatch, path)
    assert layout_with(True, monkeypatch, path) == expected
    layout = fast5_core.CoreLayout()
    got = layout.read(str(path))
    if reason is None:
        assert got == expected
    else:
        assert (got, layout.reason) == (None, reason)
