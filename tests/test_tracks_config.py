"""config tracks: (bigWig tracks of the bedMethyl, issue 56 item 1): the tracks a plan makes and
the mistakes users make with the keys, through the plan's build as the workflow reads them. The
tracks' values: test_dmr.py (the groups run's), test_modkit_commands_a.py (modkit 0.6.1's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from project import REPO
from test_cohort_filters import groups_clone  # noqa: F401 (a fixture)

from numapore.base.errors import InputError
from numapore.workflow import build, jobs, outputs


def plan_with(**tracks):
    """The groups config's plan with these tracks: settings on the command line."""
    files = [Path("config/config.yaml"), Path(".test/config-groups.yaml")]
    given = {"tracks": tracks} if tracks else {}
    config = build.load_config(files, given)
    schemas = REPO / "workflow" / "schemas"
    return build.build(config, schemas=schemas, configfiles=files, given=given, cores=2)


def test_tracks_per_sample_haplotype_and_codes(groups_clone):  # noqa: F811
    """Every sample's track per code set; case1..control2 carry HP tags (pileup.phased): their
    haplotypes' tracks too. Codes summed are named with '_' and given to tobigwig with ','."""
    plan = plan_with(mod_codes=["m", "h,m"], negative_strand_values=True)
    tracks = plan.tracks()
    assert len(tracks) == 5 * 3 * 2  # five samples, all + hp1 + hp2, two code sets
    assert "results/case1/tracks/case1.minimap2.cpg.hp2.h_m.bw" in tracks
    assert jobs.track_arguments(plan, "h_m") == [
        "--mod-codes",
        "h,m",
        "--negative-strand-values",
    ]
    assert jobs.track_inputs(plan, "case1", "minimap2", "cpg", "hp1") == {
        "bedmethyl": "results/case1/methylation/case1.minimap2.cpg.hp1.bedmethyl.gz",
        "sizes": "results/references/ecoli_window/ecoli_window.fa.fai",
    }
    assert plan_with(mod_codes=[]).tracks() == []


def test_tracks_get_an_igv_session_and_a_report_page(groups_clone):  # noqa: F811
    """With tracks: one IGV session per reference (every sample's tracks of it), a tracks page
    in each sample's report; without: neither."""
    plan = plan_with(mod_codes=["m"])
    final = outputs.final_outputs(plan)
    assert plan.igv_sessions() == ["results/tracks/ecoli_window.igv_session.xml"]
    assert plan.reference_tracks("ecoli_window") == plan.tracks()
    assert "results/tracks/ecoli_window.igv_session.xml" in final
    assert "results/case1/report/case1.minimap2.tracks.html" in final
    untracked = plan_with(mod_codes=[])
    assert untracked.igv_sessions() == []
    assert not any("tracks" in path for path in outputs.final_outputs(untracked))


@pytest.mark.parametrize(
    "tracks, message",
    [
        (
            {"mod_codes": ["5mC"]},
            "config tracks.mod_codes[0]: '5mC': '5mC' is modkit's --modified-bases name; its "
            "code is m",
        ),
        (
            {"mod_codes": ["m", "h, m"]},
            "config tracks.mod_codes[1]: 'h, m' is not modification codes (a letter such as m, "
            "h, a, or a ChEBI number; several separated by commas, no spaces: h,m)",
        ),
        (
            {"mod_codes": ["m", "mh"]},
            "config tracks.mod_codes[1]: 'mh' is not modification codes (a letter such as m, h, "
            "a, or a ChEBI number; several separated by commas, no spaces: h,m)",
        ),
        ({"mod_codes": ["h,m", "m,h"]}, "config tracks.mod_codes[1]: 'm,h' is given twice "
         "(the same track)"),  # fmt: skip
        (
            {"mod_codes": "m"},
            "--config tracks=...: tracks.mod_codes: 'm' is not of type 'array'",
        ),
        (
            {"negative_strand_values": "yes please"},
            "--config tracks=...: tracks.negative_strand_values: 'yes please' is not of type "
            "'boolean'",
        ),
        (
            {"mod_code": ["m"]},
            "--config tracks=...: unknown config key 'tracks.mod_code'; did you mean "
            "`mod_codes`?",
        ),
    ],
)
def test_mistakes_are_one_line(groups_clone, tracks, message):  # noqa: F811
    with pytest.raises(InputError) as err:
        plan_with(**tracks)
    assert str(err.value) == message
