"""The mistakes a user makes with the features of issues 41-45 (tuning, the pileup's settings
and command line, groups and DMRs, phasing, the modBAM/groups simulator, the sheet's group,
phased_vcf, kind and reads2 columns, a host file's pileup section): a typo in a key, a wrong
type or case, modkit's vocabulary where numapore's is wanted, a file of the wrong kind, empty or
cut short. Each ends in one `numapore:` line naming the setting, never in exit 0 with an empty
result nor in a traceback. The mistakes other tests already hold (test_plan.MISTAKES,
test_plan_inputs, test_cohort_filters, test_tracks_config, test_pileup_modbam_forms) are not
repeated. Pure: plans built in-process, `numapore pileup` run in-process on small files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import host_file
from runs_modbam_short import LADDER, MODKIT_SUITE
from test_pileup_modbam_forms import write_bam, write_reference
from test_plan import clone, run_plan  # noqa: F401 (clone: the fixture the tests use)

from numapore.base.errors import InputError
from numapore.execution.hosts import HostConfigError, load_host_config
from numapore.pileup import cli as pileup_cli

ONT_BAM = MODKIT_SUITE["unmapped"]
MODBAM = {"kind": "modbam"}


def plan_line(*files: str, **given) -> str:
    """The one line the plan of these config files and --config stops with."""
    with pytest.raises(InputError) as err:
        run_plan(*files, **given)
    return f"numapore: {err.value}"


# ----------------------------------------------------------------------------------------------
# Config keys (--config, as a YAML file gives them after its line)

CONFIG = {
    "tune-wrong-case": (
        {"tune": "On"},
        "--config tune=On: 'On' is not one of ['off', 'on', 'again']",
    ),
    "tuning-typo": (
        {"tuning": {"sampel": "x"}},
        "--config tuning=...: unknown config key 'tuning.sampel'; did you mean `sample`?",
    ),
    "tuning-reads-word": (
        {"tuning": {"reads": "ten"}},
        "--config tuning=...: tuning.reads: 'ten' is not of type 'integer'",
    ),
    "tuning-share-percent": (
        {"tuning": {"share": 5}},
        "--config tuning=...: tuning.share: 5 is greater than the maximum of 1",
    ),
    "pileup-typo": (
        {"pileup": {"filter_treshold": 0.7}},
        "--config pileup=...: unknown config key 'pileup.filter_treshold'; did you mean "
        "`filter_threshold`?",
    ),
    "pileup-motif-modkit-vocabulary": (
        {"pileup": {"motif": "CG"}},
        "--config pileup=...: pileup.motif: 'CG' is not one of ['cpg', 'gpc', 'dam', 'dcm', "
        "'any']",
    ),
    "pileup-modkit-unquoted": (
        {"pileup": {"modkit": 0.6}},
        "--config pileup=...: pileup.modkit: 0.6 is not of type 'string'",
    ),
    "pileup-modkit-patch-version": (
        {"pileup": {"modkit": "0.6.1"}},
        "--config pileup=...: pileup.modkit: '0.6.1' is not one of ['0.6', '0.4']; did you mean "
        "`0.6`?",
    ),
    "pileup-filter-threshold-wrong-case": (
        {"pileup": {"filter_threshold": "Auto"}},
        "--config pileup=...: pileup.filter_threshold: 'Auto' is not one of ['auto']; did you "
        "mean `auto`?",
    ),
    "pileup-filter-percentile-percent": (
        {"pileup": {"filter_percentile": 10}},
        "--config pileup=...: pileup.filter_percentile: 10 is greater than the maximum of 1",
    ),
    "pileup-combine-strands-word": (
        {"pileup": {"combine_strands": "yes"}},
        "--config pileup=...: pileup.combine_strands: 'yes' is not of type 'boolean'",
    ),
    "pileup-phased-string": (
        {"pileup": {"phased": "true"}},
        "--config pileup=...: pileup.phased: 'true' is not of type 'boolean'",
    ),
    # was: exit 0, modkit 0.4's --ignore 5hmC leaving out nothing
    "pileup-ignore-long-name": (
        {"pileup": {"modkit": "0.4", "ignore": "5hmC"}},
        "pileup.ignore: '5hmC' is not a code: one letter or a ChEBI number (5hmC is h)",
    ),
    "pileup-edge-filter-number": (
        {"pileup": {"modkit": "0.4", "edge_filter": 50}},
        "--config pileup=...: pileup.edge_filter: 50 is not of type 'string'",
    ),
    "dmr-typo": (
        {"dmr": {"contrast": [{"groups": ["a", "b"]}]}},
        "--config dmr=...: unknown config key 'dmr.contrast'; did you mean `contrasts`?",
    ),
    "dmr-contrasts-sentence": (
        {"dmr": {"contrasts": "tumour vs normal"}},
        "--config dmr=...: dmr.contrasts: 'tumour vs normal' is not of type 'array'",
    ),
    "dmr-one-group": (
        {"dmr": {"contrasts": [{"groups": ["a"]}]}},
        "config/config.yaml: dmr.contrasts.0.groups: ['a'] is too short",
    ),
    "dmr-delta-string": (
        {"dmr": {"delta": "0.1"}},
        "--config dmr=...: dmr.delta: '0.1' is not of type 'number'",
    ),
    "dmr-no-such-sample": (
        {"dmr": {"contrasts": [{"sample": "nope"}]}},
        "config dmr.contrasts[0] (nope_hp1_vs_hp2): no sample 'nope'",
    ),
    "dmr-sample-and-groups": (
        {"dmr": {"contrasts": [{"sample": "demo", "groups": ["a", "b"]}]}},
        "--config dmr=...: dmr.contrasts.0: {'sample': 'demo', 'groups': ['a', 'b']} is valid "
        "under each of {'required': ['sample']}, {'required': ['groups']}",
    ),
    "simulate-mod-codes-modkit-vocabulary": (
        {"simulate": {"demo": {**MODBAM, "mod_codes": "5mC"}}},
        "--config simulate=...: simulate.demo.mod_codes: '5mC' is not one of ['m', 'hm']",
    ),
    "simulate-mod-mode-word": (
        {"simulate": {"demo": {**MODBAM, "mod_mode": "implicit"}}},
        "--config simulate=...: simulate.demo.mod_mode: 'implicit' is not one of ['?', '.']",
    ),
    "simulate-typo": (
        {"simulate": {"demo": {"mod_code": "m"}}},
        "--config simulate=...: unknown config key 'simulate.demo.mod_code'; did you mean "
        "`mod_codes`?",
    ),
    "simulate-kind-hifi": (
        {"simulate": {"demo": {"kind": "hifi"}}},
        "--config simulate=...: simulate.demo.kind: 'hifi' is not one of ['signal', 'modbam']",
    ),
    "simulate-group-with-space": (
        {"simulate": {"demo": {"group": "case 1"}}},
        "--config simulate=...: simulate.demo.group: 'case 1' does not match "
        "'^$|^[A-Za-z0-9][A-Za-z0-9_-]*$' (The simulated sample's group, as the sample sheet's "
        "group column (letters, digits, '_' and '-'); empty: none.)",
    ),
    "simulate-truth-difference-percent": (
        {"simulate": {"demo": {**MODBAM, "truth_difference": 20}}},
        "--config simulate=...: simulate.demo.truth_difference: 20 is greater than the maximum "
        "of 1",
    ),
    "simulate-haplotagged-percent": (
        {"simulate": {"demo": {**MODBAM, "haplotagged": 50}}},
        "--config simulate=...: simulate.demo.haplotagged: 50 is greater than the maximum of 1",
    ),
    # was: exit 0, a signal sample's reads with no HP tag
    "simulate-haplotagged-on-signal": (
        {"simulate": {"demo": {"haplotagged": 0.5}}},
        "config simulate.demo.haplotagged: 0.5 is for kind modbam (its reads carry HP tags); "
        "demo is a signal sample, whose calls carry none: set config simulate.demo.kind: modbam",
    ),
    # was: exit 0, a sample of the differing group that differs nowhere
    "simulate-group-differs-without-regions": (
        {"simulate": {"demo": {**MODBAM, "group": "case", "group_differs": True}}},
        "config simulate.demo.group_differs: true, but config simulate.demo.group_regions is 0: "
        "no region would differ (give the number of DMRs, the same in every sample of the "
        "cohort)",
    ),
}


@pytest.mark.usefixtures("clone")
@pytest.mark.parametrize("given, message", CONFIG.values(), ids=CONFIG.keys())
def test_config_mistake(given, message):
    assert plan_line(**given) == f"numapore: {message}"


@pytest.mark.usefixtures("clone")
def test_dmr_code_in_the_wrong_case():
    """dmr.code M (modkit's codes are lower case) against the groups' samples' m."""
    assert plan_line(".test/config-groups.yaml", dmr={"code": "M"}).startswith(
        "numapore: config dmr.code: contrast 'case_vs_control': no call of code 'M' in group "
        "'case' (case1, case2 carry m"
    )


# ----------------------------------------------------------------------------------------------
# The sheet's columns

VCF_HEADER = "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tx\n"
SHEET = {
    # was: no hint, though the kind is there in another case or under its platform's name
    "kind-wrong-case": ("kind", "HiFi", "kind 'HiFi' is not an input kind; kinds are signal, "
                        "modbam, hifi, short; did you mean `hifi`?"),  # fmt: skip
    "kind-platform-name": ("kind", "pacbio", "kind 'pacbio' is not an input kind; kinds are "
                           "signal, modbam, hifi, short; did you mean `hifi`?"),  # fmt: skip
    "kind-nanopore": ("kind", "ont", "kind 'ont' is not an input kind; kinds are signal, "
                      "modbam, hifi, short; did you mean `modbam`?"),  # fmt: skip
    # was: "is gzip-compressed but its name does not end in .gz; rename it to ....bam.gz"
    "reference-a-bam": ("reference", ONT_BAM, f"reference {ONT_BAM}: is a BAM file "
                        "(alignments), not FASTA/FASTQ text"),  # fmt: skip
    "phased-vcf-missing": ("phased_vcf", "nope.vcf", "phased VCF {tmp}/nope.vcf does not exist"),
    "phased-vcf-empty": ("phased_vcf", "empty.vcf", "phased VCF {tmp}/empty.vcf has no #CHROM "
                         "header line"),  # fmt: skip
    "phased-vcf-cut-short": ("phased_vcf", "cut.vcf.gz", "phased VCF {tmp}/cut.vcf.gz cannot be "
                             "read: Compressed file ended before the end-of-stream marker was "
                             "reached"),  # fmt: skip
    "reads-empty": ("reads", "empty.bam", "reads file {tmp}/empty.bam is not a BAM file"),
}
SCHEMA_SHEET = {
    "reads2-on-a-modbam": ("reads2", ONT_BAM, "reads2"),
    "phased-vcf-a-bam": ("phased_vcf", ONT_BAM, "phased_vcf"),
    "phased-vcf-a-fasta": ("phased_vcf", LADDER, "phased_vcf"),
    "group-with-space": ("group", "case 1", "group"),
}


def sheet_line(column: str, value: str) -> str:
    """The plan's line for a sheet of one modbam row with this column's value."""
    Path("empty.vcf").write_text("")
    Path("empty.bam").write_bytes(b"")
    Path("cut.vcf.gz").write_bytes(gzip.compress(VCF_HEADER.encode() * 4)[:60])
    row = {"sample": "x", "reads": str(ONT_BAM), "reference": str(LADDER), "kind": "modbam",
           column: str(value)}  # fmt: skip
    Path("config/mine.tsv").write_text("\t".join(row) + "\n" + "\t".join(row.values()) + "\n")
    return plan_line(samples="config/mine.tsv", simulate="none")


@pytest.mark.usefixtures("clone")
@pytest.mark.parametrize("column, value, reason", SHEET.values(), ids=SHEET.keys())
def test_sheet_mistake(tmp_path, column, value, reason):
    assert sheet_line(column, value) == (
        "numapore: sample sheet config/mine.tsv, line 2, sample 'x': " + reason.format(tmp=tmp_path)
    )


@pytest.mark.usefixtures("clone")
@pytest.mark.parametrize("column, value, name", SCHEMA_SHEET.values(), ids=SCHEMA_SHEET.keys())
def test_sheet_value_of_the_wrong_form(column, value, name):
    """The schema's pattern, its description after it (one line)."""
    line = sheet_line(column, value)
    assert line.startswith(
        f"numapore: sample sheet config/mine.tsv, line 2, column '{name}': '{value}' does not "
        "match "
    )
    assert "\n" not in line


# ----------------------------------------------------------------------------------------------
# A host file's pileup section (what tune on writes; a user may write it by hand)

HOST = {
    "regions-zero": (
        {"regions": 0, "threads": 2},
        "pileup.regions: 0 is less than the minimum of 1",
    ),
    "regions-typo": (
        {"region": 2, "threads": 2},
        "pileup: Additional properties are not allowed ('region' was unexpected); pileup: "
        "'regions' is a required property",
    ),
    "regions-string": (
        {"regions": "4", "threads": 2},
        "pileup.regions: '4' is not of type 'integer'",
    ),
    "threads-missing": ({"regions": 4}, "pileup: 'threads' is a required property"),
}


@pytest.mark.parametrize("section, message", HOST.values(), ids=HOST.keys())
def test_host_file_pileup_section(tmp_path, section, message):
    path = host_file(tmp_path / "host.yaml", pileup=section)
    with pytest.raises(HostConfigError) as err:
        load_host_config(path)
    assert str(err.value) == f"{path}: invalid host file: {message}"


# ----------------------------------------------------------------------------------------------
# numapore pileup's command line

SEQUENCE = "ACGTTACGGA" * 20
CPGS = [i for i in range(len(SEQUENCE)) if SEQUENCE[i : i + 2] == "CG"]


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """A folder with ref.fa, in.bam (6 reads, 5mC calls at every CpG, no HP tag) and its index,
    the same BAM without an index, cut in half and without its end-of-file block (both with
    its index), an empty file, a BED of another contig, a folder."""
    folder = tmp_path_factory.mktemp("pileup")
    write_reference(folder / "ref.fa", {"ctg": SEQUENCE})
    tag = "C+m?," + ",".join(["0"] * len(CPGS)) + ";"
    reads = [(f"r{i}", "ctg", 0, SEQUENCE, tag, [200 if i % 2 else 20] * len(CPGS))
             for i in range(6)]  # fmt: skip
    write_bam(folder / "in.bam", {"ctg": SEQUENCE}, reads)
    whole = (folder / "in.bam").read_bytes()
    (folder / "unindexed.bam").write_bytes(whole)
    for name, cut in (("cut.bam", whole[: len(whole) // 2]), ("unended.bam", whole[:-28])):
        (folder / name).write_bytes(cut)
        (folder / f"{name}.bai").write_bytes((folder / "in.bam.bai").read_bytes())
    (folder / "empty").write_text("")
    (folder / "other.bed").write_text("chr9\t0\t100\n")
    (folder / "folder").mkdir()
    return folder


REF = ["--ref", "ref.fa"]
TRUNCATED = (
    "truncated (it lacks the end-of-file block a complete BAM ends with): copy or download it "
    "again in full"
)
PILEUP = {
    # was: exit 0, no row (every call below a threshold of 70)
    "filter-threshold-percent": (
        ["--filter-threshold", "70"],
        "threshold '70' is not a probability from 0 to 1 (70 % is 0.7)",
    ),
    "filter-threshold-word": (["--filter-threshold", "auto"], "failed to parse threshold 'auto'"),
    # was: a traceback (ValueError: invalid literal for int())
    "mod-thresholds-modkit-long-name": (
        ["--mod-thresholds", "5mC:0.8"],
        "illegal per-mod threshold '5mC:0.8': its code is one letter or a ChEBI number (5mC is "
        "m, 5hmC is h, 6mA is a), e.g. m:0.8",
    ),
    "mod-thresholds-no-value": (
        ["--mod-thresholds", "m"],
        "illegal per-mod threshold 'm', should be e.g. h:0.8",
    ),
    "mod-thresholds-percent": (
        ["--mod-thresholds", "m:80"],
        "per-mod threshold '80' is not a probability from 0 to 1 (70 % is 0.7)",
    ),
    "modified-bases-code": (
        ["--modified-bases", "m", *REF],
        "unknown --modified-bases 'm' (e.g. 5mC 5hmC 6mA, or C:m)",
    ),
    "modified-bases-wrong-case": (
        ["--modified-bases", "5MC", *REF],
        "unknown --modified-bases '5MC' (e.g. 5mC 5hmC 6mA, or C:m)",
    ),
    "modified-bases-without-ref": (["--modified-bases", "5mC"], "--modified-bases needs --ref"),
    "modified-bases-under-0.4": (
        ["--modkit-compat", "0.4", "--modified-bases", "5mC", *REF],
        "--modified-bases is modkit 0.6's; drop --modkit-compat 0.4",
    ),
    "region-other-contig": (
        ["--region", "chr1"],
        "region 'chr1': contig chr1 is not in the BAM header",
    ),
    "region-reversed": (["--region", "ctg:100-50"], "invalid region 'ctg:100-50'"),
    # was: exit 0, no row
    "region-past-the-end": (
        ["--region", "ctg:5,000-6,000"],
        "region 'ctg:5,000-6,000' starts past the end of contig ctg (200 bp)",
    ),
    "include-bed-empty": (
        ["--motif", "CG", "0", *REF, "--include-bed", "empty"],
        "empty: zero valid positions parsed from the BED file",
    ),
    "include-bed-other-contigs": (
        ["--motif", "CG", "0", *REF, "--include-bed", "other.bed"],
        "other.bed: zero valid positions parsed from the BED file",
    ),
    # was: a traceback (UnicodeDecodeError)
    "include-bed-a-bam": (
        ["--motif", "CG", "0", *REF, "--include-bed", "in.bam"],
        "in.bam: not a BED text file (binary or compressed?)",
    ),
    "include-bed-without-motif": (
        ["--include-bed", "other.bed"],
        "--include-bed needs --motif or --modified-bases in modkit 0.6",
    ),
    # was: "numapore: ./.folder.<pid>.0.part: Is a directory", after writing out.bed
    "read-listing-a-folder": (
        ["--read-listing", "folder"],
        "folder: is a folder (--read-listing names a file)",
    ),
    "prefix-without-phased": (["--prefix", "s1"], "--prefix needs --phased"),
    "bgzf-to-stdout": (["--bgzf"], "--phased and --bgzf write files (not - and no --read-listing)"),
    "phased-under-0.4": (
        ["--modkit-compat", "0.4", "--phased"],
        "--phased is modkit 0.6's; drop --modkit-compat 0.4",
    ),
    # was: exit 0, with the hp1 and hp2 files empty
    "phased-without-hp-tags": (
        ["--phased", "--prefix", "s1"],
        "in.bam: --phased, but none of its 6 read(s) carries an HP tag: hp1 and hp2 would be "
        "empty (tag them first: whatshap haplotag)",
    ),
    # was: exit 0, --max-depth 0 taken as the default 8000
    "max-depth-zero": (["--high-depth", "--max-depth", "0"], "--max-depth 0: must be 1 or more"),
    "max-depth-without-high-depth": (
        ["--max-depth", "100"],
        "--max-depth needs --high-depth in modkit 0.6",
    ),
    "high-depth-under-0.4": (
        ["--modkit-compat", "0.4", "--high-depth"],
        "--high-depth is modkit 0.6's; drop --modkit-compat 0.4",
    ),
    # was: exit 0, nothing left out
    "ignore-long-name": (
        ["--modkit-compat", "0.4", "--ignore", "5hmC"],
        "--ignore '5hmC': a code is one letter or a ChEBI number (5hmC is h)",
    ),
    "motif-lower-case": (["--motif", "cg", "0", *REF], "invalid IUPAC code in motif 'cg': c"),
    "motif-offset-past-it": (["--motif", "CG", "2", *REF], "motif CG not long enough for offset 2"),
    "motif-without-ref": (
        ["--motif", "CG", "0"],
        "--cpg, --motif and --preset need the reference (--ref)",
    ),
    "ref-a-bam": (["--motif", "CG", "0", "--ref", "in.bam"], "in.bam: cannot read as indexed "
                  "FASTA (error when opening file `in.bam`)"),  # fmt: skip
    "ref-empty": (["--motif", "CG", "0", "--ref", "empty"], "empty: cannot read as indexed FASTA "
                  "(error when opening file `empty`)"),  # fmt: skip
    "edge-filter-word": (
        ["--modified-bases", "5mC", *REF, "--edge-filter", "traditional"],
        "illegal --edge-filter 'traditional', should be N or N,M",
    ),
    "filter-percentile-percent": (["-p", "10"], "filter percentile must be <= 1.0"),
    "in-bam-empty": (["IN", "empty"], "empty: cannot read as BAM (file does not contain "
                     "alignment data)"),  # fmt: skip
    "in-bam-a-fasta": (["IN", "ref.fa"], "ref.fa: no reference sequences in the header (align "
                       "the reads first)"),  # fmt: skip
    # was: "numapore: out.bed: no BGZF EOF marker; file may be truncated" (the output named)
    "in-bam-cut-short": (["IN", "cut.bam"], f"cut.bam: {TRUNCATED}"),
    "in-bam-without-end-block": (
        ["IN", "unended.bam", "--no-filtering"],
        f"unended.bam: {TRUNCATED}",
    ),
    "in-bam-without-index": (["IN", "unindexed.bam"], "unindexed.bam: no BAM index (.bai/.csi); "
                             "sort and index it (samtools index)"),  # fmt: skip
}


def pileup_line(folder: Path, argv: list[str], capsys, monkeypatch) -> tuple[int, str]:
    """Exit status and stderr of `numapore pileup IN OUT -q argv` in folder (IN: in.bam, or
    the file after 'IN'; OUT: a folder with --phased, - with --bgzf, else out.bed)."""
    monkeypatch.chdir(folder)
    in_bam = "in.bam"
    if argv[:1] == ["IN"]:
        in_bam, argv = argv[1], argv[2:]
    out = "phased" if "--phased" in argv else "-" if "--bgzf" in argv else "out.bed"
    status = pileup_cli.main([in_bam, out, "-q", *argv])
    return status, capsys.readouterr().err


@pytest.mark.parametrize("argv, message", PILEUP.values(), ids=PILEUP.keys())
def test_pileup_mistake(small, argv, message, capsys, monkeypatch):
    assert pileup_line(small, argv, capsys, monkeypatch) == (1, f"numapore: {message}\n")
    if "--phased" in argv:
        assert not list(small.glob("phased/*")), "a refused --phased run left its files"


def test_pileup_choice_outside_the_list(small, capsys, monkeypatch):
    """An option with a fixed list (argparse's): its usage, then one line naming it."""
    with pytest.raises(SystemExit) as err:
        pileup_line(small, ["--modkit-compat", "0.6.1"], capsys, monkeypatch)
    assert err.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "numapore pileup: error: argument --modkit-compat: invalid choice: '0.6.1' (choose from "
        "'0.6', '0.4')"
    )
