"""What the modbam commands' command lines share: a parser whose mistakes are one `numapore:`
line (not argparse's usage block), the refusal of modkit options numapore does not support,
and main's frame (a CommandError, an OSError or a bad input is one `numapore:` line, exit 1)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence


class CommandError(Exception):
    """Bad input or options: the message of the one `numapore:` line."""


def command_errors() -> tuple[type[Exception], ...]:
    """The errors reported as one `numapore:` line: CommandError, and the pileup engine's
    PileupError where the engine was imported (not importing it keeps the compiled core out
    of a command that does not use it, such as localize)."""
    common = sys.modules.get("numapore.pileup.common")
    return (CommandError,) if common is None else (CommandError, common.PileupError)


class Parser(argparse.ArgumentParser):
    """argparse with its errors as one `numapore: PROG: ...` line and exit code 2, and no
    abbreviated options (modkit's clap takes none: a shortened option is a typo)."""

    def __init__(self, *args, **kwargs):
        """argparse's, abbreviations off."""
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message: str):
        """Report a command-line mistake on one line."""
        print(f"numapore: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def add_ignored(parser: argparse.ArgumentParser, *flags: str, value: bool = True) -> None:
    """Options of modkit's that only tune its own work (threads, logs, progress bars):
    accepted and ignored."""
    group = parser.add_argument_group("accepted, ignored (modkit's own tuning)")
    for flag in flags:
        if value:
            group.add_argument(flag, metavar="X", help=argparse.SUPPRESS)
        else:
            group.add_argument(flag, action="store_true", help=argparse.SUPPRESS)


def add_unsupported(parser: argparse.ArgumentParser, *flags: str, nargs=None) -> None:
    """modkit options numapore does not support: parsed so that giving one is refused by name
    (refuse_unsupported) instead of silently ignored."""
    for flag in flags:
        dest = "unsupported_" + flag.lstrip("-").replace("-", "_")
        parser.add_argument(flag, dest=dest, nargs=nargs, help=argparse.SUPPRESS)


def refuse_unsupported(args: argparse.Namespace) -> None:
    """A CommandError naming the unsupported modkit options given."""
    given = sorted(
        "--" + dest[len("unsupported_") :].replace("_", "-")
        for dest, value in vars(args).items()
        if dest.startswith("unsupported_") and value is not None
    )
    if given:
        raise CommandError(f"{', '.join(given)}: modkit's, not supported by numapore")


def run_main(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    run: Callable[[argparse.Namespace], None],
) -> int:
    """Parse argv and run: 0, 2 for a command-line mistake, 1 after one `numapore:` line for
    bad input."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    try:
        refuse_unsupported(args)
        run(args)
    except command_errors() as err:
        print(f"numapore: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        where = err.filename or ""
        print(f"numapore: {where}{': ' if where else ''}{err.strerror or err}", file=sys.stderr)
        return 1
    return 0
