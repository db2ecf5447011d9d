"""Files that may be gzip-compressed (gzip, BGZF) or plain, told apart by their first two bytes
rather than by their name: a `.gz` suffix on a plain file, or a gzipped file without one, is
read as what it is.

    with open_maybe_gzip(path, "rt") as handle: ...
"""

from __future__ import annotations

import gzip
import os
from typing import IO, Any

GZIP_MAGIC = b"\x1f\x8b"  # gzip's (and so BGZF's) first two bytes


def is_gzip(path: str | os.PathLike) -> bool:
    """Whether the file starts with gzip's magic bytes (an empty file does not)."""
    with open(path, "rb") as raw:
        return raw.read(2) == GZIP_MAGIC


def open_maybe_gzip(path: str | os.PathLike, mode: str = "rt", **kwargs: Any) -> IO[Any]:
    """Open a file for reading, decompressing it when it is gzip (mode and kwargs as open's:
    "rb", or "rt" with encoding, errors...)."""
    return (gzip.open if is_gzip(path) else open)(path, mode, **kwargs)
