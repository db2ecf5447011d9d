"""config calls_qc (the QC of the calls, issue 56 item 2): which runs get it and what the run
makes for it, through the plan's build as the workflow reads the config, and the mistakes users
make with the key. The QC's tables: test_report.py (the demo's signal samples),
test_modbam_kind.py (modbam and hifi samples; a scattered pileup's thresholds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from project import REPO
from test_cohort_filters import groups_clone  # noqa: F401 (a fixture)

from numapore.base.errors import InputError
from numapore.modbam.qc import PASS_COLUMNS, calls_qc
from numapore.pileup.common import Options
from numapore.pileup.thresholds import Caller, threshold_line, threshold_record
from numapore.report.calls_qc import calls_qc_report, multiqc_calls_qc
from numapore.workflow import build, jobs, layout, outputs


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
    # where each threshold comes from, as the QC names it: modkit's estimate, or a given one
    assert jobs.threshold_setting(plan, "case1") == "pileup.filter_percentile 0.1"
    given = plan_with(pileup={"filter_threshold": 0.7})
    assert jobs.threshold_setting(given, "case1") == "pileup.filter_threshold 0.7"
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


def test_an_empty_sample_gets_tables_that_say_so(tmp_path):
    """A sample without calls that allow_empty_samples let through: its pileup recorded no
    threshold ('no calls'); each QC table says so, the pass table is its header, and the
    report's figure and MultiQC's row are still made."""
    record = tmp_path / "thresholds.json"
    record.write_text(json.dumps(threshold_record(None, Options())))
    files = {k: str(tmp_path / f"{k}.txt") for k in ("summary", "tsv", "thresholds", "histogram")}
    files["passing"] = str(tmp_path / "pass.tsv")
    assert calls_qc(str(tmp_path / "never-read.bam"), str(record), files) == []
    for kind in ("summary", "tsv", "thresholds", "histogram"):
        text = Path(files[kind]).read_text()
        assert text.startswith("# no base modification calls: the pileup had none "), text
        assert "allow_empty_samples" in text
    assert Path(files["passing"]).read_text() == "\t".join(PASS_COLUMNS) + "\n"
    png, table, data = (tmp_path / f"qc.{s}" for s in ("png", "html", "json"))
    assert calls_qc_report(files, "empty", png, table, data)["pass"] == []
    assert png.stat().st_size > 0 and "no base modification calls" in table.read_text()
    mqc = tmp_path / "calls_qc_mqc.tsv"
    multiqc_calls_qc({"empty.minimap2": [files["passing"], files["histogram"]]}, mqc,
                     tmp_path / "calls_qc_mqc.json")  # fmt: skip
    assert mqc.read_text().splitlines()[-2:] == ["Sample\treads sampled", "empty.minimap2\t0"]


@pytest.mark.parametrize(
    "options, source, arguments",
    [
        (Options(), "estimated", ["C:0.75"]),
        (Options(filter_threshold=["0.8"]), "given", ["0.8"]),
        (Options(no_filtering=True), "none", None),
    ],
)
def test_the_threshold_record_says_where_the_threshold_came_from(options, source, arguments):
    """The pileup's record: its source, and --filter-threshold values making the same caller."""
    caller = Caller({1: 0.75}) if source == "estimated" else Caller(default=0.8)
    record = threshold_record(caller, options)
    assert (record["source"], record["filter_threshold"]) == (source, arguments)
    assert threshold_line(record).endswith(
        {"estimated": "probabilities)", "given": "(given)", "none": "(no filtering)"}[source]
    )
