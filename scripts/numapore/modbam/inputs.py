"""The modbam commands' plain-text inputs, without numpy (tobigwig starts on them): a file
that must exist, a text file's lines, a sizes file."""

from __future__ import annotations

import os

from numapore.modbam.command import CommandError


def need_file(path: str, what: str) -> str:
    """path, refused unless it is a readable file."""
    if os.path.isdir(path):
        raise CommandError(f"{path}: a folder, not {what}")
    if not os.path.isfile(path):
        raise CommandError(f"{path}: no such file ({what})")
    return path


def text_lines(path: str, what: str) -> list[str]:
    """The lines of a text file (refused: missing, a folder, binary)."""
    need_file(path, what)
    try:
        with open(path) as handle:
            return handle.readlines()
    except UnicodeDecodeError:
        raise CommandError(f"{path}: not text ({what} expected)") from None


def read_sizes(path: str) -> dict[str, int]:
    """A sizes file (name and length first on each line: a .fai works): lengths by name."""
    sizes = {}
    for number, line in enumerate(text_lines(path, "a sizes file"), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 2 or not parts[1].isdigit():
            raise CommandError(
                f"{path}: line {number} is not 'name length' (not `chrom<TAB>length`): "
                f"{line.rstrip()!r}"
            )
        sizes[parts[0]] = int(parts[1])
    if not sizes:
        raise CommandError(f"{path}: empty sizes file")
    return sizes
