"""Accelerator drivers: parsers of vendor tool output (NVIDIA, MN-Core) and what runs them."""

from __future__ import annotations

from fleetctl.errors import DriverError


class AccelParseError(DriverError):
    """A host tool's output (nvidia-smi, dcgmi, gpu-burn, lspci, sysfs, gpfn3-smi) could not be read.

    ``source`` names the tool output (``nvidia-smi --query-gpu``), ``location``
    where (``line 3``, ``gpu 00000000:01:00.0``) and ``field`` what
    (``power.draw``), each when known. One class for every accelerator parser,
    so a caller catches one thing.
    """

    def __init__(self, message: str, *, source: str | None = None, location: str | None = None, field: str | None = None) -> None:
        self.source = source
        self.location = location
        self.field = field
        where = ", ".join(p for p in (location, f"field {field!r}" if field else None) if p)
        head = ": ".join(p for p in (source, where) if p)
        super().__init__(f"{head}: {message}" if head else message)


__all__ = ["AccelParseError"]
