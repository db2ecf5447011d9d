"""Each decision in one place: the kinds table answers every per-kind question, so no code
outside it compares a kind name as a string (a new kind is then a new row, not a hunt through
the workflow)."""

import re

import pytest
import yaml
from conftest import REPO

from numapore.base.errors import InputError
from numapore.compare.cells import compared_sample
from numapore.execution import aligners, hosts, io_modes, strategies
from numapore.execution.topology import Node, Topology
from numapore.inputs.kinds import KINDS
from numapore.inputs.sheet import Sample

TABLE = REPO / "scripts" / "numapore" / "inputs" / "kinds.py"
SOURCES = [
    *(REPO / "scripts").rglob("*.py"),
    *(REPO / "workflow").rglob("*.smk"),
    REPO / "workflow" / "Snakefile",
]


def kind_comparisons(text: str) -> list[str]:
    """The lines of text that compare a kind name as a string: `== "modbam"`, `"short" !=`,
    `in ("signal", ...)`."""
    names = "|".join(map(re.escape, KINDS))
    literal = rf""""(?:{names})"|'(?:{names})'"""
    compared = re.compile(
        rf"(?:==|!=)\s*(?:{literal})|(?:{literal})\s*(?:==|!=)"
        rf"|\bin\s*[\(\[\{{][^\)\]\}}]*(?:{literal})"
    )
    return [line.strip() for line in text.splitlines() if compared.search(line)]


def test_the_check_finds_a_comparison():
    """The check itself sees each form (a check that sees nothing would always pass)."""
    name = next(iter(KINDS))
    lines = [
        f'if sample.kind == "{name}":',
        f"if '{name}' != kind:",
        f'if kind in ("x", "{name}"):',
        f'a = "{name}"',  # an assignment: no comparison
        f'"{name}" in formats',  # a name of something else in a collection
    ]
    assert kind_comparisons("\n".join(lines)) == lines[:3]


def test_no_kind_name_compared_outside_the_table():
    found = [
        f"{path.relative_to(REPO)}: {line}"
        for path in SOURCES
        if path != TABLE
        for line in kind_comparisons(path.read_text())
    ]
    assert not found, "ask the kinds table (numapore.inputs.kinds) instead:\n" + "\n".join(found)


def schema(name: str) -> dict:
    return yaml.safe_load((REPO / "workflow" / "schemas" / name).read_text())


def test_schema_strategy_and_io_mode_enums_are_the_registries():
    """Every enum of strategies or I/O modes in the schemas lists the registry's names
    (numapore.execution.strategies, numapore.execution.io_modes): a strategy added there and
    missing here (or the other way round) fails."""
    config, host = schema("config.schema.yaml")["properties"], schema("host.schema.yaml")
    host = host["properties"]
    for key in ("strategy", "strategy_alignment", "strategy_methylation"):
        assert config[key]["enum"] == ["", *strategies.NAMES], key
    for step in hosts.STEPS:
        assert host["strategy"]["properties"][step]["enum"] == list(strategies.NAMES), step
    compared = config["compare"]["properties"]["strategies"]
    assert compared["items"]["enum"] == list(strategies.CONCRETE)
    assert compared["default"] == list(strategies.CONCRETE)
    assert config["io_mode"]["enum"] == ["", *io_modes.NAMES]
    assert host["io_mode"]["enum"] == list(io_modes.NAMES)
    assert config["compare"]["properties"]["io_modes"]["items"]["enum"] == list(io_modes.NAMES)


def test_numactl_forms_of_the_strategies():
    """Each concrete strategy's numactl prefix on a two-node layout, from the registry."""
    topology = Topology((Node(0, (0, 1), 1024, (10, 20)), Node(1, (2, 3), 1024, (20, 10))))
    assert strategies.numactl_prefix("none", topology) == []
    assert strategies.numactl_prefix("interleave", topology) == ["numactl", "--interleave=0-1"]
    assert strategies.numactl_prefix("localalloc", topology) == ["numactl", "--localalloc"]
    assert strategies.numactl_prefix("instances", topology, 1) == [
        "numactl", "--cpunodebind=1", "--membind=1",
    ]  # fmt: skip
    for name in ("auto", "spread"):
        with pytest.raises(ValueError, match="auto' must be resolved|unknown strategy 'spread'"):
            strategies.numactl_prefix(name, topology)


def test_pod5_sample_needs_a_mode_reading_blow5(tmp_path):
    """I/O mode slow5 converts the signal to BLOW5 first; a FAST5 mode cannot read POD5."""
    pod5 = Sample("p", (tmp_path / "x.pod5",), tmp_path / "r.fastq", tmp_path / "ref.fa", "pod5")
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    io_modes.check_run("slow5", [pod5], config, "h.yaml")
    for mode in ("fast5", "fast5-pool"):
        with pytest.raises(InputError, match="sample 'p': its raw signal is POD5, which needs"):
            io_modes.check_run(mode, [pod5], config, "h.yaml")
    assert io_modes.io_mode("fast5-pool").nanopolish_processes(4) == 4
    assert io_modes.io_mode("slow5").nanopolish_processes(4) == 1


def test_aligner_registry_names_its_index_and_the_schema_agrees():
    """Each aligner's index files and what it is given as its index, from the registry; the
    config's aligner enum lists the registry's aligners, the comparison's a subset of them."""
    config = schema("config.schema.yaml")["properties"]
    assert config["aligner"]["enum"] == list(aligners.NAMES)
    assert set(config["compare"]["properties"]["aligners"]["items"]["enum"]) <= set(aligners.NAMES)
    given = {}
    for name, aligner in aligners.ALIGNERS.items():
        files = aligner.index_files("refs/r", "map-hifi")
        given[name] = aligner.index_argument(files)
    assert given == {
        "minimap2": "refs/r.map-hifi.mmi",
        "bwa": "refs/r",
        "bowtie2": "refs/r",
        "snap": "refs/r.snap",
    }


def test_the_compared_sample_is_checked_in_the_package(tmp_path):
    """Which sample a comparison benchmarks, and why it cannot (the plan's compare_sample)."""
    fast5 = Sample("f", (tmp_path / "f5",), tmp_path / "r.fastq", tmp_path / "ref.fa")
    pod5 = Sample("p", (tmp_path / "x.pod5",), tmp_path / "r.fastq", tmp_path / "ref.fa", "pod5")
    short = Sample("s", (), tmp_path / "r.fastq", tmp_path / "ref.fa", "", kind="short")
    settings = {"sample": "", "steps": ["methylation"], "io_modes": ["fast5", "slow5"]}
    assert compared_sample(settings, {"f": fast5, "p": pod5}) is fast5
    with pytest.raises(InputError, match=r"^compare.sample: 'x' is not a sample \(samples: f\)$"):
        compared_sample({**settings, "sample": "x"}, {"f": fast5})
    with pytest.raises(InputError, match="^compare.steps: sample 's' .short reads. runs none of"):
        compared_sample(settings, {"s": short})
    with pytest.raises(
        InputError, match="has POD5 raw signal, read in I/O mode slow5 only; remove"
    ):
        compared_sample({**settings, "sample": "p"}, {"f": fast5, "p": pod5})
    assert compared_sample({**settings, "io_modes": ["slow5"]}, {"p": pod5}) is pod5
