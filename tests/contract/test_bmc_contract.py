"""One BMC contract, every BMC peer (after NAPALM's shared getter tests).

The same tests run against each peer through the driver class the registry
hands out (``load_driver("bmc", "redfish")``) and its per-BMC capabilities
(``bmc.power``, ``bmc.inventory`` ...):

- the lab's simulated BMCs, one per vendor flavour (``fleetctl_lab.bmc``,
  in-process, TLS with pinned certificates: iLO 5 and iLO 6/7, iDRAC 9, AMI,
  OpenBMC, an NVIDIA GPU tray with two systems, DMTF), and one served by the lab daemon
  (a process of its own, reached through its lab.json);
- sushy-tools (OpenStack's Redfish emulator, fake driver);
- every recorded real BMC in ``shared/redfish-mockups`` (served read-only).

The contract itself (the checks per capability, the refusal rule, the base
test class) ships in the drivers package, :mod:`fleetctl_drivers.testing.bmc`,
so that a driver outside this repository runs the same one. What stays here is
this repository's table of peers, :data:`PEERS` (a capability is either
supported, and the contract checks the typed result is sane, or refused, and
the driver must raise its own ``DriverError`` naming the BMC and matching the
pattern), and how each peer is reached. A recording added to the shared
folder fails ``test_every_recorded_bmc_has_a_row`` until it gets its row here.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import pytest
from fleetctl_drivers.testing import bmc as contract
from fleetctl_drivers.testing.bmc import BMCContract, Refused, all_caps, recorded_caps
from mockup_server import mockups_dir
from peers import LAB_FLAVOURS, SUSHY_SYSTEMS

from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.plugins import load_driver

# --------------------------------------------------------------------------
# The table: what each peer supports
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Peer(contract.Peer):
    """A peer of this repository: ``kind`` is ``lab`` (flavour = the lab's vendor flavour), ``lab-daemon``, ``sushy``
    or ``mockup`` (folder = the recording's folder in shared/redfish-mockups)."""

    flavour: str = ""
    folder: str = ""


PEERS: dict[str, Peer] = {
    # The lab: every capability, one BMC per vendor flavour (serial/model from the spec).
    **{f"lab-{f}": Peer("lab", flavour=f, caps=all_caps(), live_clock=True) for f in LAB_FLAVOURS},
    "lab-daemon-dell": Peer("lab-daemon", flavour="dell", caps=all_caps(), live_clock=True),
    # sushy-tools 2.x, fake driver: see PEERS.md for what it does not do.
    "sushy": Peer(
        "sushy",
        caps=all_caps(
            firmware=Refused(r"firmware inventory is not supported by this BMC", "sushy answers 404 for FirmwareInventory"),
            bios=Refused(r"BIOS settings are not supported by this BMC", "the fake driver has no Bios resource"),
        ),
        serial=None,  # the fake driver reports no SerialNumber
        model=None,
        live_clock=True,
        boot_once_reads_persistent=True,  # NOTE(sushy-tools 2.2, fake driver): always Continuous
        power_wait=25.0,  # sushy applies a power change 1-11 s later (random)
        poll=0.3,
    ),
    # Recorded real BMCs: every read, no write.
    "mockup-hpe-xl675d-a40-ilo5": Peer(
        "mockup", folder="hpe-xl675d-a40-ilo5", caps=recorded_caps(), serial="JS05NP1072", model="ProLiant XL675d Gen10 Plus"
    ),
    "mockup-hpe-dl325-ilo5": Peer(
        "mockup", folder="hpe-dl325-ilo5", caps=recorded_caps(), serial="MXQ019020B", model="ProLiant DL325 Gen10 Plus"
    ),
    "mockup-openbmc-stock": Peer(
        "mockup",
        folder="openbmc-stock",
        caps=recorded_caps(
            bios=Refused(r"Bios resource has no Attributes", "bmcweb's Bios resource carries no Attributes"),
            media=Refused(r"virtual media is not supported by this BMC", "this bmcweb build has no VirtualMedia"),
        ),
        serial=None,  # the captured system reports no SerialNumber, no Model
        model=None,
    ),
    "mockup-gigabyte-ami": Peer("mockup", folder="gigabyte-ami", caps=recorded_caps(), serial="GJG9NF512A000302", model="H262-Z63-00"),
    "mockup-dmtf-public-rackmount1": Peer(
        "mockup", folder="dmtf-public-rackmount1", caps=recorded_caps(), serial="437XR1138R2", model="3500"
    ),
    "mockup-dmtf-public-pdu": Peer(
        "mockup",
        folder="dmtf-public-pdu",
        opens=Refused(r"no Systems", "a PDU: the service has no ComputerSystem at all"),
    ),
}

SUSHY_ROLE = {"facts": "contract-ro", "power_write": "contract-power", "boot_write": "contract-boot"}

# --------------------------------------------------------------------------
# Reaching a peer
# --------------------------------------------------------------------------

Driver = load_driver("bmc", "redfish")


def target_of(request: pytest.FixtureRequest, name: str, cap: str = "facts") -> tuple[BMCTarget, dict[str, Any]]:
    """The BMCTarget of peer ``name`` (its fixture started on first need) and what its spec says."""
    peer = PEERS[name]
    if peer.kind == "lab":
        lab, specs = request.getfixturevalue("lab_bmcs")
        spec = specs[peer.flavour]
        t = BMCTarget(
            name=name,
            url=lab.url_of(spec.name),
            username=spec.username,
            password=spec.password,
            fingerprint=lab.fingerprint_of(spec.name),
            timeout=5,
        )
        return t, {"serial": spec.serial, "model": spec.model, "manufacturer": spec.manufacturer}
    if peer.kind == "lab-daemon":
        status, spec = request.getfixturevalue("lab_daemon_bmc")
        info = status["servers"][spec.name]
        t = BMCTarget(
            name=name, url=info["url"], username=spec.username, password=spec.password, fingerprint=info["fingerprint"], timeout=5
        )
        return t, {"serial": spec.serial, "model": spec.model, "manufacturer": spec.manufacturer}
    if peer.kind == "sushy":
        url = request.getfixturevalue("sushy_peer")
        system = SUSHY_SYSTEMS[SUSHY_ROLE.get(cap, "contract-ro")][0]
        t = BMCTarget(name=name, url=url, username="admin", password="secret", system_id=system, timeout=10)
        return t, {"serial": peer.serial, "model": peer.model}
    srv = request.getfixturevalue("mockup_farm")(peer.folder)
    t = BMCTarget(name=name, url=srv.url, username="admin", password="secret", timeout=10)
    return t, {"serial": peer.serial, "model": peer.model}


# --------------------------------------------------------------------------
# The tests: the shipped contract over this table, and the table kept whole
# --------------------------------------------------------------------------


class TestRedfishContract(BMCContract):
    """The Redfish driver the registry hands out, against every peer of :data:`PEERS`."""

    PEERS = PEERS

    def target(self, request: pytest.FixtureRequest, name: str, cap: str) -> tuple[BMCTarget, dict[str, Any]]:
        return target_of(request, name, cap)

    def open(self, target: Any) -> AbstractAsyncContextManager[Any]:
        return Driver(target, backoff=0.01, task_poll_interval=0.05)  # type: ignore[no-any-return]

    def marks(self, name: str, peer: contract.Peer, cap: str) -> list[Any]:
        return [pytest.mark.slow] if peer.kind == "sushy" and cap == "power_write" else []


def test_every_recorded_bmc_has_a_row() -> None:
    base = mockups_dir()
    if base is None:
        pytest.skip("shared/redfish-mockups not found beside the repository (set FLEETCTL_SHARED)")
    recorded = {p.name for p in base.iterdir() if (p / "index.json").is_file()}
    in_table = {p.folder for p in PEERS.values() if p.kind == "mockup"}
    assert recorded == in_table, "add a row to PEERS for each recording (and drop rows of removed ones)"


def test_every_lab_flavour_has_a_row() -> None:
    """A flavour added to the lab (fleetctl_lab.bmc.flavours) runs the contract too (iLO 6/7, iDRAC 9, the NVIDIA tray...)."""
    try:
        from fleetctl_lab.bmc.flavours import FLAVOURS
    except ImportError as e:
        pytest.skip(f"fleetctl_lab.bmc not available: {e}")
    assert set(LAB_FLAVOURS) == set(FLAVOURS), "add the flavour to LAB_FLAVOURS (tests/contract/peers.py)"
    assert {p.flavour for p in PEERS.values() if p.kind == "lab"} == set(FLAVOURS)
