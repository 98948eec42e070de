"""Reading a file the operator names: a regular file, never more than a cap.

A path may name a device (`/dev/zero`, `/dev/full` read zeros forever), a
FIFO that never ends, or a file far larger than any input of its kind; each
is refused before it can fill the memory. Callers turn :class:`FileRefused`
and :class:`OSError` into their one-line input errors.
"""

from __future__ import annotations

from pathlib import Path


class FileRefused(ValueError):
    """Not a regular file, or larger than the cap: the message says which (without the path: the caller names it)."""


def read_capped(path: Path, cap: int) -> bytes:
    """The file's bytes, at most ``cap``.

    Raises:
        FileRefused: not a regular file (a folder, a device, a FIFO), or more than ``cap`` bytes.
        OSError: it cannot be opened or read.
    """
    if not path.is_file():
        raise FileRefused("not a regular file" if path.exists() else "no such file")
    with path.open("rb") as fh:
        raw = fh.read(cap + 1)
    if len(raw) > cap:
        raise FileRefused(f"more than {cap // (1024 * 1024) or 1} MiB: larger than any file of its kind")
    return raw
