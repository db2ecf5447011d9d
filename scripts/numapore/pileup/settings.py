"""The workflow's `pileup:` settings as `numapore pileup` options, and the modkit command line
they equal (the options have modkit's names, so a user can run modkit on the same modBAM and
compare)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from shlex import join
from typing import Any

from numapore.methylation.motifs import MOTIFS
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


def pileup_arguments(settings: Mapping[str, Any], reference: str, threads: int) -> list[str]:
    """`numapore pileup` options (after IN.bam OUT.bed) for the config's pileup: settings,
    with the semantics pileup.modkit names. SettingsError for a 0.4-only setting under 0.6."""
    check_settings(settings)
    version = modkit_version(settings)
    args = ["--modkit-compat", version, "--ref", reference]
    motif = settings["motif"]
    if motif == "cpg" and version == "0.6":  # --cpg needs --modified-bases in 0.6
        args += ["--motif", "CG", "0"]
    elif motif == "cpg":
        args.append("--cpg")
    elif motif != "any":
        sequence, offset = modkit_motif(motif)
        args += ["--motif", sequence, str(offset)]
    if settings["combine_strands"] and motif != "any":
        args.append("--combine-strands")
    if settings["filter_threshold"] == "auto":  # modkit takes one of the two
        args += ["--filter-percentile", str(settings["filter_percentile"])]
    else:
        args += ["--filter-threshold", str(settings["filter_threshold"])]
    if settings["ignore"]:
        args += ["--ignore", settings["ignore"]]
    if settings["edge_filter"]:
        args += ["--edge-filter", settings["edge_filter"]]
    return args + ["--threads", str(threads)]


# The pileup: settings that remove calls, each with its numapore pileup option
FILTERS = {
    "edge_filter": ("--edge-filter",),
    "ignore": ("--ignore",),
    "filter_threshold": ("--filter-threshold", "--filter-percentile"),
}


def emptying_filter(bam: str, arguments: Sequence[str]) -> str | None:
    """Which pileup: setting (a FILTERS key) removed every call of a pileup that wrote no row
    with these arguments (pileup_arguments'): the first whose option, left out, gives rows;
    None if none does. Runs the pileup again, once per filter given (an empty pileup's cost)."""
    import os

    from numapore.pileup import engine
    from numapore.pileup import cli

    for key, options in FILTERS.items():
        kept, given = [], False
        words = iter(arguments)
        for word in words:
            if word in options:
                given = True
                next(words)
            else:
                kept.append(word)
        if not given:
            continue
        if key == "filter_threshold":  # left out, modkit estimates one: pass every call
            kept.append("--no-filtering")
        relaxed = cli.options_from_args(cli.parse([bam, os.devnull, *kept]))
        with open(os.devnull, "w") as out:
            if engine.pileup(bam, out, relaxed).stats.rows:
                return key
    return None


def filter_setting(key: str, settings: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """The config's setting behind a FILTERS key, with its value, for a job's settings
    (common.smk's pileup_settings: filter_threshold auto became nanopolish's call threshold)."""
    if key != "filter_threshold":
        return f"pileup.{key}: {settings[key]}"
    if config["pileup"]["filter_threshold"] != "auto":
        return f"pileup.filter_threshold: {settings['filter_threshold']}"
    if settings["filter_threshold"] == "auto":
        return f"pileup.filter_percentile: {settings['filter_percentile']}"
    return (
        f"methylation.call_threshold: {config['methylation']['call_threshold']} (as "
        f"pileup.filter_threshold: auto, the probability {settings['filter_threshold']})"
    )


def modkit_command(bam: str, bed: str, arguments: Sequence[str]) -> str:
    """The modkit command line (of the version --modkit-compat names) that writes the same
    bedMethyl (uncompressed) as `numapore pileup bam bed *arguments`."""
    modkit_arguments = list(arguments)
    if "--modkit-compat" in modkit_arguments:  # numapore's own: which modkit to follow
        at = modkit_arguments.index("--modkit-compat")
        del modkit_arguments[at : at + 2]
    return join(["modkit", "pileup", bam, bed, *modkit_arguments])
