"""Kind hifi: a real PacBio HiFi modBAM (tests/data/pacbio_hifi, a Revio read with its 5mC
calls) realigned with minimap2's map-hifi preset, its calls kept, and piled up."""

from __future__ import annotations

import gzip
from pathlib import Path

import pysam
import pytest
from runs_modbam_short import HIFI_BAM, HIFI_OLD_OUTPUTS, HIFI_OUTPUTS

# The modbam route's checks, kept with the pileup's semantics there (test_modbam_kind.py).
from test_modbam_kind import calls_by_read, logged_pileup, pileup_again

from numapore.base.errors import InputError
from numapore.inputs.kinds import KINDS

BAM, BEDMETHYL, ACCOUNTING = HIFI_OUTPUTS


@pytest.fixture(scope="module")
def hifi_run(modbam_test_run) -> Path:
    """The HiFi modBAM through the workflow (minimap2, strategy none), up to its bedMethyl and
    read accounting: sample 'hifi' of the modBAM route's shared run (modbam_test_run)."""
    return modbam_test_run


def test_the_hifi_row() -> None:
    """minimap2's HiFi preset (its index too), the tags copied; the aligners without a HiFi
    preset refused with the one that has one."""
    hifi = KINDS["hifi"]
    assert hifi.aligner_preset("minimap2") == "-ax map-hifi -y -Y"
    assert hifi.minimap2_preset({}) == "map-hifi" and hifi.stages_tagged_reads
    with pytest.raises(InputError, match="aligner bwa cannot align hifi samples.*use minimap2"):
        hifi.aligner_preset("bwa")


def test_every_primary_read_keeps_its_calls(hifi_run: Path) -> None:
    """Each primary read of the input is aligned (map-hifi) with the same calls: read
    position, modification code and probability."""
    source, out = calls_by_read(HIFI_BAM), calls_by_read(hifi_run / BAM)
    assert set(out) == set(source)
    for read, calls in out.items():
        assert calls == source[read] and calls[("C", 0, "m")], read
    with pysam.AlignmentFile(str(hifi_run / BAM)) as handle:
        assert all(not r.is_unmapped for r in handle)
    log = (hifi_run / "results/logs/align/hifi.minimap2.1-of-1.log").read_text()
    assert "minimap2 -ax map-hifi -y -Y" in log


def test_bedmethyl_is_the_pileup_of_the_output_bam(hifi_run: Path, tmp_path: Path) -> None:
    """The bedMethyl equals `numapore pileup` of the realigned BAM with the options the pileup
    job's log gives as its modkit command; the read accounting reconciles (its job checks)."""
    again = pileup_again(
        hifi_run / BAM, logged_pileup(hifi_run, "hifi", "minimap2"), tmp_path / "again.bed",
        cwd=hifi_run,
    )  # fmt: skip
    assert again and gzip.decompress((hifi_run / BEDMETHYL).read_bytes()) == again
    assert "staging\treads with MM/ML tags\t1" in (hifi_run / ACCOUNTING).read_text()


def test_old_style_tags_go_through_to_bedmethyl(hifi_run: Path, tmp_path: Path) -> None:
    """The read with the tags older PacBio software wrote (sample 'hifi_old': Mm/Ml, no mode
    character, which the SAM specification and modkit 0.6.1 read as implicit) is staged,
    realigned with the same calls under its tags and piled up to its bedMethyl, the pileup
    job's own (its unlisted Cs are canonical calls now, so its estimated threshold is not
    hifi's)."""
    bam, bedmethyl, accounting = HIFI_OLD_OUTPUTS
    with pysam.AlignmentFile(str(hifi_run / bam)) as handle:
        tags = [(r.has_tag("MM"), r.get_tag("Mm")[:4]) for r in handle if not r.is_secondary]
    assert tags and all(t == (False, "C+m,") for t in tags), tags
    assert calls_by_read(hifi_run / bam) == calls_by_read(HIFI_BAM)
    ours = gzip.decompress((hifi_run / bedmethyl).read_bytes())
    again = pileup_again(
        hifi_run / bam, logged_pileup(hifi_run, "hifi_old", "minimap2"), tmp_path / "again.bed",
        cwd=hifi_run,
    )  # fmt: skip
    assert ours and again == ours
    assert "staging\treads with MM/ML tags\t1" in (hifi_run / accounting).read_text()
