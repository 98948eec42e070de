"""What a lab BMC simulates: the server behind it and how the lab runs.

``LabServerSpec`` describes one server (identity, NICs, accelerator boards,
firmware, vendor flavour); ``LabConfig`` describes the lab as a whole
(where it keeps state, how BMCs are addressed, timings). Both are pydantic
models so a spec file (JSON) validates at the edge and round-trips.
``generate_specs`` makes N realistic servers for scale tests and demos.
"""

from __future__ import annotations

import ipaddress
import zlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: The site file's name of a server's BMC port (fleetctl.discovery.plan's BMC_NIC): the NIC the cabling plan
#: cables to a management switch, whose MAC that switch learns and the BMC's Manager reports as its own.
BMC_NIC = "bmc"

Flavour = Literal["generic", "hpe", "openbmc", "ami", "dell", "ilo6", "idrac9", "nvidia"]
BoardKind = Literal["mncore2", "gpu", "amd-instinct"]

# Default resource ids per vendor flavour, as the recorded real BMCs use them
# (iLO: Systems/1, OpenBMC: Systems/system, AMI MegaRAC: Systems/Self,
# iDRAC: Systems/System.Embedded.1, NVIDIA GPU trays: Systems/System_0 beside
# Systems/HGX_Baseboard_0). ``generic`` follows the DMTF examples.
DEFAULT_SYSTEM_ID: dict[str, str] = {
    "generic": "1",
    "hpe": "1",
    "openbmc": "system",
    "ami": "Self",
    "dell": "System.Embedded.1",
    "ilo6": "1",
    "idrac9": "System.Embedded.1",
    "nvidia": "System_0",
}


class LabNic(BaseModel):
    """A host network port: its name (``eth0``, ``ens1f0``) and MAC."""

    model_config = ConfigDict(extra="forbid")

    name: str
    mac: str
    speed_mbps: int = 100_000
    # A NIC may sit on its own PCIe card; when set it shows in PCIeDevices.
    slot: int | None = None
    model: str = "ConnectX-6 Dx"
    firmware: str = "22.36.1010"

    @field_validator("mac")
    @classmethod
    def _mac(cls, v: str) -> str:
        parts = v.replace("-", ":").lower().split(":")
        if len(parts) != 6 or not all(len(p) == 2 and all(c in "0123456789abcdef" for c in p) for p in parts):
            raise ValueError(f"not a MAC address: {v!r}")
        return ":".join(parts)


class LabBoard(BaseModel):
    """An accelerator board in a PCIe slot: an MN-Core 2 board or a GPU."""

    model_config = ConfigDict(extra="forbid")

    kind: BoardKind
    serial: str
    slot: int
    pci_address: str = ""  # "0000:3b:00.0"; generated from the slot when empty
    model: str = ""  # defaults per kind
    firmware: dict[str, str] = Field(default_factory=dict)  # {"board": "1.2.3"}
    # PCIe link as the board is capable of; a fault can lower what is in use.
    max_lanes: int = 16
    pcie_gen: str = ""  # "Gen4"; defaults per kind

    @model_validator(mode="after")
    def _defaults(self) -> LabBoard:
        # NOTE: MN-Core 2's PCIe generation, model string and firmware
        # component names are not public; these are assumptions, kept here.
        # AMD Instinct: an MI300X OAM (Gen5 x16: amd-smi static of an MI300X in the ROCm blog "Getting to Know Your
        # GPU"); its VBIOS version is a lab value.
        defaults = {"mncore2": ("MN-Core 2", "Gen4", {"board": "1.4.2"}), "gpu": ("NVIDIA H100 PCIe", "Gen5", {"vbios": "96.00.74.00.01"}),
                    "amd-instinct": ("AMD Instinct MI300X", "Gen5", {"vbios": "113-M3000100-102"})}  # fmt: skip
        model, gen, firmware = defaults[self.kind]
        if not self.model:
            self.model = model
        if not self.pcie_gen:
            self.pcie_gen = gen
        if not self.firmware:
            self.firmware = dict(firmware)
        if not self.pci_address:
            self.pci_address = f"0000:{(0x10 + self.slot * 0x10) & 0xFF:02x}:00.0"
        return self


class LabServerSpec(BaseModel):
    """One simulated server and its BMC.

    ``system_id`` empty means the flavour's usual id (``1`` for generic and
    hpe and ilo6, ``system`` for openbmc, ``Self`` for ami, ``System.Embedded.1``
    for dell and idrac9, ``System_0`` for nvidia). ``username``/``password`` are lab-only credentials; the lab never
    writes the password to lab.json or its log.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    serial: str = ""
    model: str = "Lab Server"
    manufacturer: str = "Lab"
    system_id: str = ""
    username: str = "admin"
    password: str = Field(default="labpass", repr=False)
    nics: list[LabNic] = Field(default_factory=list)
    boards: list[LabBoard] = Field(default_factory=list)
    firmware: dict[str, str] = Field(default_factory=lambda: {"BMC": "1.00", "BIOS": "1.0.0"})
    power_watts_idle: float | None = None
    power_watts_peak: float | None = None
    flavour: Flavour = "generic"
    bios_attributes: dict[str, str | int | bool] = Field(default_factory=dict)  # overrides of the defaults
    # Optional fixed address for this BMC ("127.10.0.5" or "127.0.0.1:20001").
    address: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v or "/" in v or len(v) > 128:
            raise ValueError(f"bad server name: {v!r}")
        return v

    @property
    def bmc_mac(self) -> str | None:
        """The BMC's own MAC: its ``bmc`` NIC's, the one the lab's switches learn on its port (None: it has none).

        One source of truth: the lab's switch tables take the same NIC's MAC from the cabling plan (an
        unregistered BMC's from ``fleetctl_lab.unregistered``), so what a login reads from the Manager's
        EthernetInterface places the BMC as a real one would be placed.
        """
        return next((n.mac for n in self.nics if n.name == BMC_NIC), None)

    @model_validator(mode="after")
    def _defaults(self) -> LabServerSpec:
        if not self.system_id:
            self.system_id = DEFAULT_SYSTEM_ID[self.flavour]
        if not self.serial:
            self.serial = f"LAB{zlib.crc32(self.name.encode()):010d}"
        self.firmware.setdefault("BMC", "1.00")
        self.firmware.setdefault("BIOS", "1.0.0")
        return self


class LabConfig(BaseModel):
    """How the lab runs.

    Addressing: ``address_mode="port"`` puts every BMC on ``host`` at its own
    port, ``base_port + i`` (``base_port=0`` lets the kernel pick free ports:
    best for tests running side by side). ``address_mode="address"`` puts
    every BMC at its own address in 127.0.0.0/8 from ``base_address`` on the
    common ``port``: no port exhaustion at 10,000 BMCs.
    """

    model_config = ConfigDict(extra="forbid")

    state_dir: Path | None = None  # certificates are cached here; None: a temp dir
    address_mode: Literal["port", "address"] = "port"
    host: str = "127.0.0.1"
    base_port: int = 0
    base_address: str = "127.10.0.1"
    port: int = 8443
    control_host: str = "127.0.0.1"
    control_port: int = 0  # 0: kernel picks
    tls: bool = True
    max_sessions: int = 16
    session_timeout_s: float = 1800.0
    power_transition_s: float = 2.0  # PoweringOn / PoweringOff each
    graceful_shutdown_s: float | None = None  # None: power_transition_s
    firmware_update_s: float = 5.0  # SimpleUpdate task duration
    initial_power: Literal["On", "Off"] = "Off"
    backlog: int = 128
    # Pre-rendered GET answers (body, ETag, headers) kept per BMC and path until the BMC's state changes:
    # at most this many MB of bodies for the whole lab (0: render every answer). A BMC's fleet read
    # once a day is read again by the next sweep: 41 documents of ~1.2 KB per BMC.
    render_cache_mb: float = 256.0
    # Hosts (fleetctl_lab.hosts): the OS behind each BMC, over SSH.
    hosts: bool = False  # serve an SSH host per server (`fleetctl lab up` turns it on)
    install_s: float = 30.0  # an OS install after a PXE / virtual-media boot
    os_boot_s: float = 1.0  # an installed OS booting from disk
    host_base_address: str | None = None  # None: the BMCs' base with second octet + 60 (address mode)
    host_ssh_port: int = 2222  # per host address; an ephemeral port when it cannot be bound

    @field_validator("host", "base_address", "control_host", "host_base_address")
    @classmethod
    def _loopback(cls, v: str | None) -> str | None:
        if v is None:
            return v
        # Everything the lab binds stays on 127.0.0.0/8.
        if not ipaddress.ip_address(v).is_loopback or ipaddress.ip_address(v).version != 4:
            raise ValueError(f"lab addresses must be in 127.0.0.0/8, got {v!r}")
        return v

    @property
    def graceful_s(self) -> float:
        return self.power_transition_s if self.graceful_shutdown_s is None else self.graceful_shutdown_s


# --- generated servers -------------------------------------------------------

_KINDS = ("mncore", "gpu")


def _mac(i: int, port: int) -> str:
    # Locally administered unicast prefix 02:, unique per (server, port).
    n = (i << 4) | port
    return "02:1a:" + ":".join(f"{(n >> s) & 0xFF:02x}" for s in (24, 16, 8, 0))


#: The PCI buses of an eight-GPU MI300X node (the topology tables in ROCm/amdsmi's CHANGELOG.md; tests/data/accel/amd).
AMD_MI300X_BUSES = (0x0C, 0x22, 0x38, 0x5C, 0x9F, 0xAF, 0xBF, 0xDF)


def generate_specs(
    n: int,
    *,
    prefix: str = "lab",
    mix: tuple[str, ...] = _KINDS,
    flavours: tuple[str, ...] = ("generic", "hpe", "openbmc", "ami", "dell"),
    password: str = "labpass",
    start: int = 0,
) -> list[LabServerSpec]:
    """Make ``n`` realistic servers: alternating MN-Core servers (4 MN-Core 2
    boards, 2 NICs) and GPU servers (8 GPUs, 2 NICs), cycling through the
    given vendor flavours. Names are ``{prefix}-{kind}-{i:05d}``. ``mix`` may
    also name ``amd``: an MI300X-like server (8 AMD Instinct boards).
    """
    specs: list[LabServerSpec] = []
    for j in range(n):
        i = start + j
        kind = mix[i % len(mix)]
        flavour = flavours[i % len(flavours)]
        name = f"{prefix}-{kind}-{i:05d}"
        nics = [LabNic(name=f"ens{k + 1}f0", mac=_mac(i, k), slot=10 + k) for k in range(2)]
        if kind == "mncore":
            boards = [
                LabBoard(kind="mncore2", serial=f"MNC2-{i:05d}-{b}", slot=1 + b) for b in range(4)
            ]
            model, manuf, idle, peak = "MN-Server 2", "Preferred Networks", 450.0, 2600.0
        elif kind == "amd":  # an MI300X-like server: 8 OAM boards at the PCI addresses of a real 8 x MI300X node
            boards = [LabBoard(kind="amd-instinct", serial=f"AMD{i:05d}{b:02d}", slot=1 + b, pci_address=f"0000:{bus:02x}:00.0")
                      for b, bus in enumerate(AMD_MI300X_BUSES)]  # fmt: skip
            model, manuf, idle, peak = "AS-8125GS-TNMR2", "Supermicro", 1500.0, 8000.0
        elif flavour == "nvidia":  # a GB200-like compute tray: 4 GPUs in 2 processor modules
            boards = [LabBoard(kind="gpu", serial=f"GPU{i:05d}{b:02d}", slot=1 + b, model="NVIDIA GB200") for b in range(4)]
            model, manuf, idle, peak = "GB200 NVL Compute Tray", "NVIDIA", 1200.0, 5600.0
        else:
            boards = [LabBoard(kind="gpu", serial=f"GPU{i:05d}{b:02d}", slot=1 + b) for b in range(8)]
            model, manuf, idle, peak = "GPU Server 8x", "Lab Systems", 900.0, 6500.0
        bmc_fw = {"hpe": "2.72", "openbmc": "2.15.0", "ami": "12.61.21", "dell": "7.00.00.171", "ilo6": "1.64",
                  "idrac9": "7.10.70.00", "nvidia": "GB200Nvl-25.06-1"}.get(flavour, "1.10")  # fmt: skip
        specs.append(
            LabServerSpec(
                name=name,
                serial=f"SN{i:08d}",
                model=model,
                manufacturer=manuf,
                flavour=flavour,
                password=password,
                nics=nics,
                boards=boards,
                firmware={"BMC": bmc_fw, "BIOS": "2.10.0"},
                power_watts_idle=idle,
                power_watts_peak=peak,
            )
        )
    return specs
