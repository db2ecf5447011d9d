"""VBZ-compressed multi-read FAST5, as MinKNOW writes it: nanopolish finds the VBZ HDF5 plugin
(numapore.signal.hdf5plugin) and the calls equal those of the same reads' gzip FAST5 in every I/O
mode. The VBZ set is made from the real E. coli reads by ONT's own converter (ont-fast5-api)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import h5py
import pytest
from conftest import FEW_READS, REPO, call_set, read_names

from numapore.signal.fast5 import VBZ_FILTER_ID
from numapore.signal.hdf5plugin import (
    PLUGIN_NAME,
    hdf5_plugin_path,
    holds_vbz,
    vbz_plugin_env,
    vbz_plugin_file,
)

SMALL_VBZ = REPO / "tests" / "data" / "vbz"
DEBIAN_PLUGIN = Path("/usr/lib/x86_64-linux-gnu/libvbz_hdf_plugin.so.0")


def signal_filters(fast5: Path) -> set[int]:
    """The HDF5 filter ids of every read's raw signal in a multi-read FAST5."""
    with h5py.File(fast5, "r") as h5:
        return {
            h5[f"{read}/Raw/Signal"].id.get_create_plist().get_filter(0)[0]
            for read in h5
            if read.startswith("read_")
        }


def test_debian_plugin_is_linked_into_a_private_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("HDF5_PLUGIN_PATH", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    value = hdf5_plugin_path(tmp_path / "plugins")
    assert value.split(os.pathsep)[0] == str(tmp_path / "plugins")
    assert (tmp_path / "plugins" / PLUGIN_NAME).resolve() == DEBIAN_PLUGIN.resolve()


def test_user_path_is_kept_first(tmp_path, monkeypatch):
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.setenv("HDF5_PLUGIN_PATH", "/opt/my/filters")
    value = hdf5_plugin_path(tmp_path / "plugins").split(os.pathsep)
    assert value[:2] == ["/opt/my/filters", str(tmp_path / "plugins")]
    # a user's folder that already holds the plugin is used as it is
    own = tmp_path / "own"
    own.mkdir()
    (own / PLUGIN_NAME).symlink_to(DEBIAN_PLUGIN)
    monkeypatch.setenv("HDF5_PLUGIN_PATH", str(own))
    assert hdf5_plugin_path(tmp_path / "unused") == str(own)
    assert not (tmp_path / "unused").exists()


def test_plugin_file_prefers_the_users_path(tmp_path, monkeypatch):
    """The compiled FAST5 reader registers the user's plugin first, else the installed one."""
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.setenv("HDF5_PLUGIN_PATH", str(tmp_path / "none"))
    assert vbz_plugin_file().resolve() == DEBIAN_PLUGIN.resolve()
    own = tmp_path / "own"
    own.mkdir()
    (own / PLUGIN_NAME).symlink_to(DEBIAN_PLUGIN)
    monkeypatch.setenv("HDF5_PLUGIN_PATH", f"{tmp_path / 'none'}{os.pathsep}{own}")
    assert vbz_plugin_file() == own / PLUGIN_NAME


def test_bioconda_plugin_folder_is_used(tmp_path, monkeypatch):
    """ont_vbz_hdf_plugin's layout: $CONDA_PREFIX/hdf5/lib/plugin/libvbz_hdf_plugin.so."""
    plugin = tmp_path / "env" / "hdf5" / "lib" / "plugin"
    plugin.mkdir(parents=True)
    shutil.copy(DEBIAN_PLUGIN, plugin / PLUGIN_NAME)
    monkeypatch.delenv("HDF5_PLUGIN_PATH", raising=False)
    monkeypatch.setenv("CONDA_PREFIX", str(tmp_path / "env"))
    value = hdf5_plugin_path(tmp_path / "plugins")
    assert value.split(os.pathsep)[0] == str(plugin)
    assert holds_vbz(plugin) and not (tmp_path / "plugins").exists()


def nanopolish_calls(tmp_path: Path, fast5_dir: Path, reads: Path, reference: Path) -> Path:
    """Index, align (minimap2) and call CpG methylation with nanopolish; the calls table."""
    local = tmp_path / reads.name
    shutil.copy(reads, local)
    commands = (
        f"nanopolish index -d {fast5_dir} {local}",
        f"minimap2 -ax map-ont -t 1 {reference} {local} | samtools sort -o {tmp_path}/r.bam -",
        f"samtools index {tmp_path}/r.bam",
        f"nanopolish call-methylation -q cpg -t 1 -r {local} -b {tmp_path}/r.bam "
        f"-g {reference} > {tmp_path}/calls.tsv",
    )
    for command in commands:
        subprocess.run(command, shell=True, check=True, capture_output=True, text=True)
    return tmp_path / "calls.tsv"


def test_small_vbz_copy_gives_the_gzip_calls(tmp_path, ecoli_dir, monkeypatch):
    """The repository's 3-read VBZ file: nanopolish fails without the plugin, and with it
    gives the calls of the same reads' original gzip FAST5."""
    monkeypatch.delenv("HDF5_PLUGIN_PATH", raising=False)
    (fast5,) = SMALL_VBZ.glob("*.fast5")
    assert signal_filters(fast5) == {VBZ_FILTER_ID}
    with h5py.File(fast5, "r") as h5:
        names = {h5[read]["Raw"].attrs["read_id"].decode() for read in h5}
    records = (ecoli_dir / "reads.fasta").read_text().split(">")[1:]
    reads = tmp_path / "reads.fasta"
    reads.write_text("".join(">" + r for r in records if r.split()[0] in names))
    region = ecoli_dir / "region.fa"
    (tmp_path / "gzip").mkdir()
    gzip_calls = call_set(nanopolish_calls(tmp_path / "gzip", ecoli_dir / "fast5", reads, region))
    assert {c[2] for c in gzip_calls} == names
    (tmp_path / "bare").mkdir()
    with pytest.raises(subprocess.CalledProcessError) as failed:
        nanopolish_calls(tmp_path / "bare", SMALL_VBZ, reads, region)
    assert "VBZ but the required plugin is not loaded" in failed.value.stderr
    (tmp_path / "vbz").mkdir()
    with vbz_plugin_env():
        assert call_set(nanopolish_calls(tmp_path / "vbz", SMALL_VBZ, reads, region)) == gzip_calls
    assert "HDF5_PLUGIN_PATH" not in os.environ  # restored


def sample_calls(work: Path, name: str, reads: set[str] | None = None) -> set[tuple]:
    """The per-read calls of a sample's (single) methylation table (of these reads only)."""
    (path,) = (work / "results" / name / "methylation").glob(f"{name}.minimap2*calls.tsv")
    return call_set(path, reads)


# The VBZ copy (runs_signal.vbz_dir) is a sample of the signal route's runs in each I/O mode;
# "clean" is the same reads' gzip FAST5 in I/O mode fast5. In the other modes the VBZ sample
# has the shortest reads' sequences (the run's short.fasta; nanopolish calls each read on its
# own): their calls are clean's of those reads.


def test_vbz_calls_equal_gzip_calls_in_fast5_mode(signal_fast5_run):
    gzip_calls = sample_calls(signal_fast5_run, "clean")
    assert len({c[2] for c in gzip_calls}) > 80  # most of the 112 reads are called
    assert sample_calls(signal_fast5_run, "vbz") == gzip_calls


@pytest.mark.parametrize(
    "run", ["signal_pool_run", "signal_slow5_run"], ids=["fast5-pool", "slow5"]
)
def test_vbz_calls_equal_gzip_calls_in_other_modes(request, signal_fast5_run, run):
    work = request.getfixturevalue(run)
    short = read_names(work / "short.fasta")
    gzip_calls = sample_calls(signal_fast5_run, "clean", short)
    assert len(short) == FEW_READS and len({c[2] for c in gzip_calls}) >= 10
    assert sample_calls(work, "vbz") == gzip_calls
