"""The workflow's `pileup:` settings checked against the modkit semantics they ask for, the
engine's options as `numapore pileup` arguments and the modkit command line they equal (the
options have modkit's names, so a user can run modkit on the same modBAM and compare), and the
setting that emptied a pileup. The settings become the engine's options in the run's plan
(numapore.workflow.jobs.pileup_options)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from shlex import join
from typing import Any

from numapore.methylation.motifs import MOTIFS
from numapore.pileup.common import Options
from numapore.pileup.modkit_versions import DEFAULT_VERSION, MODKIT_VERSIONS, ONLY_04

# A character class of a motif pattern as its IUPAC code (modkit's --motif takes IUPAC).
IUPAC = {"AG": "R", "CT": "Y", "CG": "S", "AT": "W", "GT": "K", "AC": "M"}


def modkit_motif(name: str) -> tuple[str, int]:
    """A motif of methylation.motifs as modkit's --motif SEQ OFFSET: the forward strand's
    sequence (IUPAC codes for classes) and the offset of its modified base."""
    motif = MOTIFS[name]
    sequence = ""
    rest = motif.pattern
    while rest:
        if rest[0] == "[":
            end = rest.index("]")
            sequence += IUPAC["".join(sorted(rest[1:end]))]
            rest = rest[end + 1 :]
        else:
            sequence, rest = sequence + rest[0], rest[1:]
    return sequence, motif.forward_offset


# pileup: settings modkit 0.6 has no option for (they need pileup.modkit: "0.4"): 0.4's own
# --ignore, and --edge-filter, which 0.6 takes only with --modified-bases (no setting gives it)
SETTINGS_ONLY_04 = {
    "ignore": ONLY_04["ignore"][0],
    "edge_filter": "--edge-filter (0.6: with --modified-bases)",
}


def modkit_version(settings: Mapping[str, Any]) -> str:
    """The config's pileup.modkit (numapore pileup's --modkit-compat): whose semantics."""
    return str(settings.get("modkit", DEFAULT_VERSION))


class SettingsError(ValueError):
    """pileup: settings that the chosen modkit semantics cannot run."""


def check_settings(settings: Mapping[str, Any]) -> None:
    """SettingsError for a pileup: setting that pileup.modkit's semantics cannot run."""
    version = modkit_version(settings)
    if version not in MODKIT_VERSIONS:
        raise SettingsError(
            f"pileup.modkit: {version!r} is not one of {', '.join(MODKIT_VERSIONS)}"
        )
    if settings.get("phased") and version != "0.6":
        raise SettingsError(
            f'pileup.phased: true is modkit 0.6.1\'s pileup --phased; set pileup.modkit: "0.6" '
            f"(it is {version!r})"
        )
    if version == "0.6":
        for key, option in SETTINGS_ONLY_04.items():
            if settings.get(key):
                raise SettingsError(
                    f"pileup.{key}: {settings[key]!r} is modkit 0.4's {option}; "
                    'set pileup.modkit: "0.4" or leave it empty'
                )
    ignore = str(settings.get("ignore") or "")
    if len(ignore) > 1 and not ignore.isdigit():
        raise SettingsError(
            f"pileup.ignore: {ignore!r} is not a code: one letter or a ChEBI number (5hmC is h)"
        )


def numapore_arguments(options: Options) -> list[str]:
    """The `numapore pileup` options (after IN.bam OUT.bed) that give these options: with
    --modkit-compat, modkit's names (modkit_command drops numapore's own)."""
    args = ["--modkit-compat", options.compat, "--ref", str(options.reference)]
    if options.cpg:
        args.append("--cpg")
    for sequence, offset in options.motifs:
        args += ["--motif", sequence, str(offset)]
    if options.combine_strands:
        args.append("--combine-strands")
    for threshold in options.filter_threshold or []:
        args += ["--filter-threshold", threshold]
    if not options.filter_threshold:  # modkit takes one of the two
        args += ["--filter-percentile", str(options.filter_percentile)]
    if options.ignore:
        args += ["--ignore", options.ignore]
    if options.edge_filter:
        args += ["--edge-filter", options.edge_filter]
    return args + ["--threads", str(options.threads)]


# The pileup: settings that remove calls, each with the options that leave it out
FILTERS = {
    "edge_filter": {"edge_filter": None},
    "ignore": {"ignore": None},
    # left out, modkit would estimate a threshold: pass every call
    "filter_threshold": {"filter_threshold": None, "no_filtering": True},
}


def emptying_filter(bam: str, options: Options) -> str | None:
    """Which pileup: setting (a FILTERS key) removed every call of a pileup that wrote no row
    with these options: the first whose option, left out, gives rows; None if none does. Runs
    the pileup again, once per filter set (an empty pileup's cost)."""
    import os

    from numapore.pileup import engine

    for key, relaxed in FILTERS.items():
        if key != "filter_threshold" and not getattr(options, key):
            continue
        with open(os.devnull, "w") as out:
            if engine.pileup(bam, out, replace(options, **relaxed)).stats.rows:
                return key
    return None


def filter_setting(key: str, options: Options, config: Mapping[str, Any]) -> str:
    """The config's setting behind a FILTERS key, with its value, for a job's options (with
    filter_threshold auto, a nanopolish sample's threshold is its calls' own)."""
    settings = config["pileup"]
    if key != "filter_threshold":
        return f"pileup.{key}: {settings[key]}"
    if settings["filter_threshold"] != "auto":
        return f"pileup.filter_threshold: {settings['filter_threshold']}"
    if not options.filter_threshold:
        return f"pileup.filter_percentile: {settings['filter_percentile']}"
    return (
        f"methylation.call_threshold: {config['methylation']['call_threshold']} (as "
        f"pileup.filter_threshold: auto, the probability {options.filter_threshold[0]})"
    )


def modkit_command(bam: str, bed: str, arguments: Sequence[str]) -> str:
    """The modkit command line (of the version --modkit-compat names) that writes the same
    bedMethyl (uncompressed) as `numapore pileup bam bed *arguments`."""
    modkit_arguments = list(arguments)
    if "--modkit-compat" in modkit_arguments:  # numapore's own: which modkit to follow
        at = modkit_arguments.index("--modkit-compat")
        del modkit_arguments[at : at + 2]
    return join(["modkit", "pileup", bam, bed, *modkit_arguments])
