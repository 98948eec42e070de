"""MN-Core boards as the host sees them: ``gpfn3-smi list`` and the facts kept as data.

What is public (MN-Core SDK documentation, "advanced features"):
``gpfn3-smi list`` prints one ``<index>: <device name>`` line per board, e.g.
``0: mnc2p27s0`` to ``7: mnc2p188s0`` on an eight-board MN-Core 2 node; the
device name is ``mnc2p<bus>s<n>`` and its node ``/dev/mnc2p<bus>s<n>``.

The index is NOT a board's identity: the platform can change which devices
are available, and with them which index names which board. fleetctl keys a
board by its device name (and by its serial where a tool reports one), never
by index; the index is kept only to pass back to ``gpfn3-smi`` in the same
breath as the listing it came from.

What is not public (PCI ids, firmware component names, a burn-in program and
its output) is in ``mncore.yaml`` beside this module, loaded by
:func:`mncore_config`; every value there is marked as an assumption.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field

from fleetctl_drivers.accel.pcie import ParseError, PcieLink, parse_sysfs_link

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "MnCoreConfig",
    "MnCoreDevice",
    "ParseError",
    "PcieLink",
    "mncore_config",
    "parse_device_name",
    "parse_gpfn3_list",
    "parse_sysfs_link",
]

DEFAULT_CONFIG_FILE = Path(__file__).with_name("mncore.yaml")
CONFIG_ENV = "FLEETCTL_MNCORE_CONFIG"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MnCoreDevice(_Model):
    """One board in a ``gpfn3-smi list`` listing.

    ``index`` is valid only together with the listing it came from (see the
    module docstring); ``name`` is the board's identity on the host.
    """

    index: int
    name: str  # mnc2p27s0
    pci_bus: int  # 27: the bus number, decimal as the name writes it
    slot: int  # the n of ...s<n>
    device_node: str  # /dev/mnc2p27s0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pci_bus_hex(self) -> str:
        """The bus as lspci and sysfs write it (27 -> ``1b``), to find the board in ``lspci`` output."""
        return f"{self.pci_bus:02x}"


# mnc2 = MN-Core 2. The public documentation shows only MN-Core 2 names.
_NAME = re.compile(r"mnc2p(?P<bus>\d+)s(?P<slot>\d+)")
_LIST_LINE = re.compile(r"(?P<index>\d+):\s*(?P<name>\S+)")


def parse_device_name(name: str, *, device_dir: str = "/dev") -> tuple[int, int, str]:
    """``mnc2p27s0`` -> (bus 27, slot 0, ``/dev/mnc2p27s0``).

    Raises:
        ParseError: not an MN-Core 2 device name.
    """
    m = _NAME.fullmatch(name.strip())
    if not m:
        raise ParseError(f"not an MN-Core 2 device name: {name!r} (expected mnc2p<bus>s<n>, e.g. mnc2p27s0)")
    bus = int(m.group("bus"))
    if bus > 255:
        raise ParseError(f"MN-Core device name {name!r}: bus {bus} is beyond 255")
    return bus, int(m.group("slot")), f"{device_dir.rstrip('/')}/{m.group(0)}"


def parse_gpfn3_list(text: str, *, device_dir: str = "/dev") -> list[MnCoreDevice]:
    """The boards in ``gpfn3-smi list`` output (``<index>: <device name>`` per line).

    Blank lines are skipped; no lines at all is an empty list (a node with no
    board visible), not an error: whether that is a problem is the caller's
    call (it knows how many boards the server should hold).

    Args:
        text: the whole output.
        device_dir: where the device nodes are (``/dev``).

    Returns:
        The boards in the order listed.

    Raises:
        ParseError: a line in any other format, a name that is not an MN-Core
            2 device name, or an index or name listed twice; the message names
            the line.
    """
    devices: list[MnCoreDevice] = []
    seen_index: dict[int, int] = {}
    seen_name: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        m = _LIST_LINE.fullmatch(line)
        if not m:
            raise ParseError(f"gpfn3-smi list line {n}: expected '<index>: <device name>', got {line[:120]!r}")
        index, name = int(m.group("index")), m.group("name")
        try:
            bus, slot, node = parse_device_name(name, device_dir=device_dir)
        except ParseError as e:
            raise ParseError(f"gpfn3-smi list line {n}: {e.message}") from e
        if index in seen_index:
            raise ParseError(f"gpfn3-smi list line {n}: index {index} already listed on line {seen_index[index]}")
        if name in seen_name:
            raise ParseError(f"gpfn3-smi list line {n}: device {name} already listed on line {seen_name[name]}")
        seen_index[index], seen_name[name] = n, n
        devices.append(MnCoreDevice(index=index, name=name, pci_bus=bus, slot=slot, device_node=node))
    return devices


# ------------------------------------------------------------ configuration


class MnCorePciId(_Model):
    generation: str
    vendor_id: str
    device_id: str


class MnCoreBurnin(_Model):
    program: str = "/opt/pfn/pfcomp/bin/mncore-burnin"
    args: list[str] = Field(default_factory=lambda: ["--device", "{device}", "--seconds", "{seconds}"])
    result_pattern: str = ""
    # progress lines while it runs; named groups: device, temp_c (and optionally power_w, clock_mhz)
    progress_pattern: str = ""
    expected_checksum: str | None = None

    def result_regex(self) -> re.Pattern[str] | None:
        return re.compile(self.result_pattern) if self.result_pattern else None

    def progress_regex(self) -> re.Pattern[str] | None:
        return re.compile(self.progress_pattern) if self.progress_pattern else None


class MnCoreClock(_Model):
    core_mhz: int = 750
    gddr6_mhz: int = 15000


class MnCoreConfig(_Model):
    """The MN-Core facts fleetctl assumes (see ``mncore.yaml`` for which are assumptions)."""

    smi: str = "gpfn3-smi"
    device_dir: str = "/dev"
    semaphore_dir: str = "/opt/mncore_shared_semaphore"
    pci_ids: list[MnCorePciId] = Field(default_factory=list)
    firmware_components: list[str] = Field(default_factory=list)
    burnin: MnCoreBurnin = Field(default_factory=MnCoreBurnin)
    clock: MnCoreClock = Field(default_factory=MnCoreClock)
    source: str = Field("", description="the file these were read from")


def mncore_config(path: str | os.PathLike[str] | None = None) -> MnCoreConfig:
    """The MN-Core facts from ``path``, ``$FLEETCTL_MNCORE_CONFIG``, or the bundled ``mncore.yaml``.

    Raises:
        ParseError: the file is missing, not YAML, or has unknown keys or wrong
            types (a typo must not silently fall back to a default).
    """
    import yaml

    file = Path(path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_FILE)
    try:
        data: Any = yaml.safe_load(file.read_text())
    except OSError as e:
        raise ParseError(f"{file}: cannot read the MN-Core configuration: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise ParseError(f"{file}: not valid YAML: {e}") from e
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ParseError(f"{file}: expected a mapping of settings, got {type(data).__name__}")
    try:
        cfg = MnCoreConfig.model_validate({**data, "source": str(file)})
        cfg.burnin.result_regex()
        cfg.burnin.progress_regex()
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ParseError(f"{file}: {where}: {first['msg']}") from e
    except re.error as e:
        raise ParseError(f"{file}: burnin.result_pattern or progress_pattern is not a regular expression: {e}") from e
    return cfg
