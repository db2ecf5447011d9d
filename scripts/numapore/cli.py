"""The `numapore` console command: one entry to the package's command lines.

    numapore SUBCOMMAND [OPTIONS]      (numapore SUBCOMMAND --help for each)

Each subcommand is a module's own main(argv); this table is the only list of them, so a new
command line is one entry here. Modules are imported only when their subcommand runs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from numapore import __version__

# name: (module with main(argv, prog), one line of help)
SUBCOMMANDS = {
    "pileup": ("numapore.pileup.cli", "modBAM to bedMethyl, as modkit pileup does"),
    "tobigwig": ("numapore.modbam.tobigwig", "bedMethyl to a bigWig track (modkit's)"),
    "summary": ("numapore.modbam.summary", "a modBAM's calls counted (modkit modbam's)"),
    "sample-probs": ("numapore.modbam.sample_probs", "call probability percentiles (modkit's)"),
    "stats": ("numapore.modbam.stats", "bedMethyl counts over BED regions (modkit's)"),
    "convert": ("numapore.signal.convert", "convert FAST5 raw signal to SLOW5/BLOW5"),
    "simulate": ("numapore.simulate.reads", "simulate reads with signal and methylation truth"),
    "accuracy": ("numapore.methylation.accuracy", "score methylation calls against a truth"),
    "dmr-score": ("numapore.methylation.dmr", "score called DMRs against a simulated truth"),
    "probe": ("numapore.execution.probe", "this machine's NUMA layout, policy, host-file check"),
    "slowfs": ("numapore.compare.slowfs", "mount folders behind emulated slow storage (FUSE)"),
    "entropy": ("numapore.modbam.entropy", "methylation entropy over windows, as modkit entropy"),
    "pileup-hemi": ("numapore.modbam.hemi", "duplex CpG pattern counts, as modkit pileup-hemi"),
    "extract-calls": ("numapore.modbam.extract", "per-read calls table, as modkit extract calls"),
    "localize": (
        "numapore.modbam.localize",
        "%-modification around BED features (modkit localize)",
    ),
    "compiled": ("numapore.cli", "which compiled modules load, and from where"),
}


def usage() -> str:
    """The top-level help: the subcommands and what each does."""
    width = max(map(len, SUBCOMMANDS))
    lines = [
        f"usage: numapore SUBCOMMAND [OPTIONS]   (numapore {__version__})",
        "",
        "Nanopore and short reads to alignments and methylation, with per-host NUMA and I/O",
        "strategies. The workflow itself runs with snakemake (see README.md).",
        "",
        "subcommands (numapore SUBCOMMAND --help for each):",
    ]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def compiled_main(argv: Sequence[str] | None = None, prog: str = "numapore compiled") -> int:
    """Print each compiled module and the file it loads from (or why the Python path runs)."""
    import argparse

    from numapore.base import compiled

    argparse.ArgumentParser(prog=prog, description=main_doc("compiled")).parse_args(argv)
    for what, where in compiled.status().items():
        print(f"{what}: {where}")
    return 0


def main_doc(name: str) -> str:
    """A subcommand's one line of help."""
    return SUBCOMMANDS[name][1]


def main(argv: Sequence[str] | None = None) -> int:
    """Run `numapore SUBCOMMAND ...`; its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    if args[0] == "--version":
        print(f"numapore {__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"numapore: unknown subcommand {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    if name == "compiled":
        return compiled_main(rest)
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return module.main(rest, prog=f"numapore {name}")


if __name__ == "__main__":
    sys.exit(main())
