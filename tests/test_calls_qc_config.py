"""config calls_qc (the QC of the calls, issue 56 item 2): which runs get it and what the run
makes for it, through the plan's build as the workflow reads the config, and the mistakes users
make with the key. The QC's tables: test_report.py (the demo's signal samples),
test_modbam_kind.py (modbam and hifi samples; a scattered pileup's thresholds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from project import REPO
from test_cohort_filters import groups_clone  # noqa: F401 (a fixture)

from numapore.base.errors import InputError
from numapore.workflow import build, layout, outputs


def plan_with(**given):
    """The groups config's plan with these settings on the command line."""
    files = [Path("config/config.yaml"), Path(".test/config-groups.yaml")]
    config = build.load_config(files, given)
    schemas = REPO / "workflow" / "schemas"
    return build.build(config, schemas=schemas, configfiles=files, given=given, cores=2)


def test_every_pileup_of_a_modbam_gets_its_qc_by_default(groups_clone):  # noqa: F811
    """On by default: each modbam sample's pileup motif, its tables, the report's figure and
    table, and MultiQC's section; off: none of them."""
    plan = plan_with()
    runs = plan.calls_qc_runs()
    assert runs == [(name, "cpg") for name in plan.samples]
    made = outputs.final_outputs(plan)
    for sample, motif in runs:
        for name in layout.CALLS_QC_FILES + [f"{motif}.calls_qc.png"]:
            path = layout.calls_qc(sample, plan.aligner, motif, name)
            if name.endswith(".png"):
                path = layout.report_file(sample, plan.aligner, name)
            assert path in made, path
    custom = outputs.multiqc_inputs(plan)["custom"]
    assert layout.multiqc_custom("calls_qc") in custom
    assert layout.multiqc_custom_plot("calls_qc") in custom
    off = plan_with(calls_qc=False)
    assert off.calls_qc_runs() == []
    assert not [p for p in outputs.final_outputs(off) if "/qc/" in p or "calls_qc" in p]
    assert not [p for p in outputs.multiqc_inputs(off)["custom"] if "calls_qc" in p]


@pytest.mark.parametrize(
    "given, message",
    [
        ({"calls_qc": "no"}, "--config calls_qc=no: 'no' is not of type 'boolean'"),
        ({"calls_qc": 1}, "--config calls_qc=1: 1 is not of type 'boolean'"),
        (
            {"calls_qc": {"enabled": True}},
            "--config calls_qc=...: {'enabled': True} is not of type 'boolean'",
        ),
        (
            {"call_qc": False},
            "--config call_qc=False: unknown config key 'call_qc'; did you mean `calls_qc`?",
        ),
    ],
)
def test_mistakes_are_one_line(groups_clone, given, message):  # noqa: F811
    with pytest.raises(InputError) as err:
        plan_with(**given)
    assert str(err.value) == message


def test_a_mistake_in_the_config_file_names_its_line(groups_clone):  # noqa: F811
    config = groups_clone / "config" / "config.yaml"
    lines = config.read_text().splitlines()
    number = lines.index("calls_qc: true") + 1
    lines[number - 1] = "calls_qc: maybe"
    config.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        plan_with()
    assert str(err.value) == (
        f"config/config.yaml, line {number}: calls_qc: 'maybe' is not of type 'boolean'"
    )
