"""What a lab switch simulates, and how the switch lab runs.

``LabSwitchSpec`` describes one switch (platform, identity, ports with what is
cabled to them and their starting configuration); ``SwitchLabConfig`` the
switch lab as a whole (addresses, ports, SNMP community). Pydantic models, so
a spec file validates at the edge and round-trips through JSON.
"""

from __future__ import annotations

import zlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Platform = Literal["eos", "sonic"]
PortMode = Literal["access", "trunk", "routed"]

# What the lab calls each platform, and the netmiko device_type that reaches it.
# NOTE: netmiko 4.8 has no plain "sonic" device type: community SONiC's CLI is
# the Linux shell (show ..., sudo config ...), which is what "edgecore_sonic"
# (a LinuxSSH) drives; "dell_sonic" expects Dell's klish sonic-cli instead.
NETMIKO_DEVICE_TYPE: dict[str, str] = {"eos": "arista_eos", "sonic": "edgecore_sonic"}

DEFAULT_MODEL: dict[str, str] = {"eos": "DCS-7050SX3-48YC8", "sonic": "MSN2700-CS2FO"}
DEFAULT_VERSION: dict[str, str] = {"eos": "4.30.2F", "sonic": "SONiC.202311.1"}


def lab_mac(seed: str) -> str:
    """A stable locally administered MAC derived from a name."""
    h = zlib.crc32(seed.encode()) & 0xFFFFFFFF
    return "02:1c:73:" + ":".join(f"{(h >> s) & 0xFF:02x}" for s in (16, 8, 0))


class LabNeighbor(BaseModel):
    """The far end of a cable as LLDP would report it."""

    model_config = ConfigDict(extra="forbid")

    system: str  # its hostname (a server, or another switch)
    port: str  # its port: a server NIC name (eth0) or a switch port (Ethernet120)
    kind: Literal["server", "switch"] = "server"
    chassis_id: str = ""  # a MAC; derived from the name when empty
    description: str = ""  # its sysDescr


class LabSwitchPort(BaseModel):
    """One front-panel port: what is cabled to it and how it starts configured."""

    model_config = ConfigDict(extra="forbid")

    name: str
    speed_mbps: int = 100_000
    neighbor: LabNeighbor | None = None
    mode: PortMode = "access"
    vlans: list[int] = Field(default_factory=list)  # access: [vlan] (empty = 1); trunk: allowed (empty = all)
    native_vlan: int | None = None
    description: str = ""
    enabled: bool = True
    # MACs learned on the port besides its neighbour's: the stations behind an
    # uplink, or a BMC cabled where the plan has no cable (``lab up --unregistered``).
    learned: list[str] = Field(default_factory=list)


class LabSwitchSpec(BaseModel):
    """A lab switch. ``platform`` says which CLI it speaks."""

    model_config = ConfigDict(extra="forbid")

    name: str
    platform: Platform
    model: str = ""
    serial: str = ""
    os_version: str = ""
    mac: str = ""
    username: str = "admin"
    password: str = "labpass"
    address: str | None = None  # a 127.x address of its own; allotted from the config when None
    vlans: list[int] = Field(default_factory=list)  # VLANs that exist at start (EOS adds 1)
    ports: list[LabSwitchPort] = Field(default_factory=list)

    @field_validator("ports")
    @classmethod
    def _unique(cls, v: list[LabSwitchPort]) -> list[LabSwitchPort]:
        seen = set()
        for p in v:
            if p.name in seen:
                raise ValueError(f"duplicate port {p.name!r}")
            seen.add(p.name)
        return v

    def filled(self) -> LabSwitchSpec:
        """A copy with defaults derived from the name and platform."""
        return self.model_copy(
            update={
                "model": self.model or DEFAULT_MODEL[self.platform],
                "os_version": self.os_version or DEFAULT_VERSION[self.platform],
                "serial": self.serial or f"LAB{zlib.crc32(self.name.encode()) & 0xFFFFFF:06X}",
                "mac": self.mac or lab_mac(self.name),
            }
        )


class SwitchLabConfig(BaseModel):
    """How the switch lab runs.

    Each switch gets its own loopback address (``base_address`` + its index)
    with SSH on ``ssh_port`` and SNMP on ``snmp_port``; where a port cannot be
    bound (not root, or taken) the switch gets an ephemeral port instead.
    """

    model_config = ConfigDict(extra="forbid")

    state_dir: str | None = None
    base_address: str = "127.110.0.1"
    ssh_port: int = 22
    snmp_port: int = 161
    snmp: bool = True  # run snmpsim for the switches
    community: str = "public"  # each switch's community is "<community>@<switch name>"
    control_host: str = "127.0.0.1"
    control_port: int = 0
    utilisation: float = 0.05  # mean share of line rate the cabled ports carry
    snmp_start_timeout_s: float = 60.0
    # snmpsim processes (0: one per 100 switches, up to the cores: snmpsim answers from one thread)
    snmp_processes: int = 0


def generate_switch_specs(n: int, *, ports: int = 64, prefix: str = "labsw", platforms: tuple[str, ...] = ("eos", "sonic"),
                          password: str = "labpass") -> list[LabSwitchSpec]:  # fmt: skip
    """N switches of ``ports`` ports, every other port cabled to a server NIC (for scale tests)."""
    out = []
    for i in range(n):
        plat = platforms[i % len(platforms)]
        first = 1 if plat == "eos" else 0
        name = f"{prefix}-{i:04d}"
        pl = []
        for j in range(ports):
            nb = LabNeighbor(system=f"{name}-host{j:02d}", port="eth0") if j % 2 == 0 else None
            pl.append(LabSwitchPort(name=f"Ethernet{first + j}", neighbor=nb, vlans=[100] if nb else []))
        out.append(LabSwitchSpec(name=name, platform=plat, password=password, vlans=[100], ports=pl))
    return out
