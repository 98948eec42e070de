"""One switch contract, every switch peer (after NAPALM's shared getter tests).

The same tests run against each peer through the driver class the registry
hands out (``load_driver("switch", "netmiko")``) and its per-switch
capabilities (``sw.facts``, ``sw.interfaces``, ``sw.lldp``, ``sw.ports``,
and the driver's ``vlans()``):

- the lab's EOS and SONiC switches (``fleetctl_lab.switch``, SSH in-process);
- a Linux switch in a network namespace (bridges per VLAN, sshd; needs root);
- fakenos's recorded Arista EOS and Cisco NX-OS (canned output, no config).

The contract itself (the checks per capability, the refusal rule, the base
test class) ships in the drivers package, :mod:`fleetctl_drivers.testing.switch`,
so that a driver outside this repository runs the same one. What stays here is
this repository's table of peers, :data:`PEERS` (a capability is either
supported, and the typed result must be sane and match what the peer is known
to hold, or refused, and the driver must raise its own ``SwitchError`` naming
the switch and matching the pattern), and how each peer is reached.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from fleetctl_drivers.testing import switch as contract
from fleetctl_drivers.testing.switch import Refused, SwitchContract, all_caps

from fleetctl.interfaces.switch import PortMode, SwitchTarget
from fleetctl.plugins import load_driver

FAKENOS_NO_PORT = Refused(
    r"no port .* \(or it cannot be read\)", "fakenos has no recording of the per-port `show interface X ...` commands"
)


@dataclass(frozen=True)
class Peer(contract.Peer):
    """A peer of this repository: ``kind`` is ``lab`` (spec = the lab switch's name; its facts, ports, neighbours and
    VLANs come from that spec), ``netns`` or ``fakenos``; ``show_quirks`` are show commands replaced for this peer
    (``Platform.with_commands``)."""

    spec: str = ""
    show_quirks: dict[str, str] = field(default_factory=dict)


PEERS: dict[str, Peer] = {
    "lab-eos": Peer("lab", "eos", all_caps(), spec="ct-eos-1", port="Ethernet1", trunk_port="Ethernet2"),
    "lab-sonic": Peer(
        "lab",
        "sonic",
        all_caps(),
        spec="ct-sonic-1",
        port="Ethernet0",
        trunk_port="Ethernet4",
    ),
    "linux-netns": Peer(
        "netns",
        "linux",
        all_caps(
            lldp=Refused(r"LLDP is not supported by this switch", "no lldpd runs in the switch namespace"),
            trunk_write=Refused(r"trunk ports are not supported", "one bridge per VLAN: a port sits in one"),
        ),
        port="swp2",
        ports={  # not lo, mgmt0 or the bridges; veths say 10000 Mb/s
            "swp1": {"admin_up": True, "oper_up": True, "speed_mbps": 10000, "mode": PortMode.ACCESS, "access_vlan": 100},
            "swp2": {"admin_up": True, "oper_up": True, "mode": PortMode.ACCESS, "access_vlan": 100},
            "swp3": {"mode": PortMode.ACCESS, "access_vlan": 200},
        },
        all_ports=True,
        vlans=frozenset({100, 200}),  # the bridges br100, br200
        all_vlans=True,
    ),
    "fakenos-eos": Peer(
        "fakenos",
        "eos",
        all_caps(
            interfaces=Refused(
                r"could not parse 'show interfaces status'",
                "fakenos's EOS recording has its columns squeezed to one space: TextFSM cannot follow it",
            ),
            port_read=FAKENOS_NO_PORT,
            port_write=FAKENOS_NO_PORT,  # it takes no configuration: refused at the read before any change
            trunk_write=FAKENOS_NO_PORT,
        ),
        port="Ethernet1",
        # vEOS prints no serial: read from `show inventory`; uptime "1 hour and 5 minutes"
        facts={"os_version": "4.14.7M", "model": "vEOS", "hostname": "spine1", "uptime_s": 3900, "serial": "JPE13120702"},
        neighbor_count=20,
        first_neighbor={
            "local_port": "Ethernet1",
            "remote_system": "spine2.company.com",
            "remote_port": "Ethernet1",
            "remote_chassis_id": "2cc2.6081.eaf9",
        },
        vlans=frozenset({1, 10, 20, 30}),
        vlans_cover_ports=False,
    ),
    "fakenos-nxos": Peer(
        "fakenos",
        "nxos",
        all_caps(port_read=FAKENOS_NO_PORT, port_write=FAKENOS_NO_PORT, trunk_write=FAKENOS_NO_PORT),
        # NOTE(fakenos 1.2): its NX-OS recording answers `show interfaces switchport`
        # (the plural, which NX-OS also takes), not `show interface switchport`.
        show_quirks={"switchport": "show interfaces switchport"},
        port="Ethernet1/1",
        facts={
            "os_version": "7.1(4)N1(1)",
            "serial": "FOC17153X08",
            "model": "5596",
            "hostname": "IEDP02-N5K-SW01",
            "uptime_s": 749 * 86400 + 15 * 3600 + 17 * 60 + 48,
        },
        ports={
            # `show interface status`: connected, 1000; switchport: access VLAN 3
            "Ethernet1/1": {"admin_up": True, "oper_up": True, "speed_mbps": 1000, "mode": PortMode.ACCESS, "access_vlan": 3},
            # xcvrAbsen; a trunk with every VLAN allowed
            "Ethernet1/2": {"admin_up": True, "oper_up": False, "mode": PortMode.TRUNK, "trunk_vlans": list(range(1, 4095))},
        },
        port_count=54,  # mgmt0 is no front-panel port
        neighbors={
            "Ethernet1/1": {"remote_system": "n9k2.company.com", "remote_chassis_id": "5087.89a1.d8d6"},
            "mgmt0": {"remote_port": "Fa1/0/9"},
        },
        vlans=frozenset({1}),
        vlans_cover_ports=False,  # its `show vlan brief` lists VLAN 1 alone, its ports sit in 3 and more
    ),
}


def _lab_port(p: Any) -> dict[str, Any]:
    """What a lab switch port must read as, from its spec (ports left in the default VLAN say less)."""
    want: dict[str, Any] = {"admin_up": p.enabled, "oper_up": p.neighbor is not None, "speed_mbps": p.speed_mbps}
    if p.mode == "access" and p.vlans:
        want.update(mode=PortMode.ACCESS, access_vlan=p.vlans[0])
    if p.mode == "trunk" and p.vlans:
        want.update(mode=PortMode.TRUNK, trunk_vlans=sorted(p.vlans))
    return want


# --------------------------------------------------------------------------
# Reaching a peer: one open session per peer for the class
# --------------------------------------------------------------------------

Driver = load_driver("switch", "netmiko")


def _connect(request: pytest.FixtureRequest, name: str) -> tuple[Any, Peer]:
    """An open driver for peer ``name`` and the peer's row, its facts filled in from the lab's spec."""
    peer = PEERS[name]
    if peer.kind == "lab":
        lab, specs = request.getfixturevalue("lab_switches")
        spec = specs[peer.spec].filled()
        host, port = lab.ssh_of(spec.name)
        t = SwitchTarget(name, host, port, peer.platform, spec.username, spec.password, timeout=10)
        peer = replace(
            peer,
            facts={"os_version": spec.os_version, "serial": spec.serial, "model": spec.model, "hostname": spec.name},
            ports={p.name: _lab_port(p) for p in spec.ports},
            all_ports=True,
            neighbors={p.name: {"remote_system": p.neighbor.system, "remote_port": p.neighbor.port} for p in spec.ports if p.neighbor},
            neighbor_count=sum(1 for p in spec.ports if p.neighbor),
            vlans=frozenset(spec.vlans),
        )
    elif peer.kind == "netns":
        ns = request.getfixturevalue("netns_peer")
        ns.reset()  # the older namespace tests share this switch
        t = SwitchTarget(name, ns.host, 22, peer.platform, ns.username, ns.password, timeout=15)
        peer = replace(peer, facts={"hostname": os.uname().nodename}, os_version_has=os.uname().release)
    else:
        hosts = request.getfixturevalue("fakenos_peer")
        t = SwitchTarget(name, "127.0.0.1", hosts[name].port, peer.platform, "admin", "fleet-pw", timeout=10)
    platform = None
    if peer.show_quirks:
        from fleetctl_drivers.switch import load_platform

        platform = load_platform(peer.platform).with_commands(**peer.show_quirks)
    return Driver(t, platform=platform).open(), peer


# --------------------------------------------------------------------------
# The tests: the shipped contract over this table
# --------------------------------------------------------------------------


class TestNetmikoContract(SwitchContract):
    """The netmiko driver the registry hands out, against every peer of :data:`PEERS`."""

    PEERS = PEERS

    def connect(self, request: pytest.FixtureRequest, name: str) -> tuple[Any, contract.Peer]:
        return _connect(request, name)
