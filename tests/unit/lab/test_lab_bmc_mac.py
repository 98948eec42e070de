"""A lab BMC's own MAC is its ``bmc`` NIC's: the MAC the lab's switches learn on its port (issue #23).

Discovery with ``--credential`` reads a BMC's MACs from its Managers' EthernetInterfaces and places the BMC by
the switch port that learned one of them; a lab BMC that reported a made-up MAC could not be placed that way.
Read through ``resources.dispatch`` (no sockets), every flavour.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest
from fleetctl_lab.bmc import LabConfig, LabNic, LabServerSpec, SimBMC
from fleetctl_lab.bmc.resources import dispatch
from fleetctl_lab.bmc.spec import BMC_NIC, Flavour

R = "/redfish/v1"
BMC_MAC = "02:fc:01:0c:05:00"


def get(bmc: SimBMC, path: str) -> Any:
    status, doc, _ = dispatch(bmc, "GET", path, None)
    assert status == 200, (path, status, doc)
    return doc


def manager_macs(bmc: SimBMC) -> list[str]:
    coll = get(bmc, f"{R}/Managers/{bmc.manager_id}/EthernetInterfaces")
    return [get(bmc, m["@odata.id"])["MACAddress"] for m in coll["Members"]]


@pytest.mark.parametrize("flavour", get_args(Flavour))
def test_the_manager_reports_the_bmc_nic_mac(flavour: str) -> None:
    spec = LabServerSpec(name=f"srv-{flavour}", flavour=flavour,
                         nics=[LabNic(name="eth0", mac="02:fc:01:0c:05:01"), LabNic(name=BMC_NIC, mac=BMC_MAC.upper())])  # fmt: skip
    bmc = SimBMC(spec, LabConfig(), index=7)
    assert spec.bmc_mac == BMC_MAC
    assert manager_macs(bmc) == [BMC_MAC]


def test_dell_service_root_names_the_same_mac() -> None:
    bmc = SimBMC(LabServerSpec(name="srv-dell", flavour="idrac9", nics=[LabNic(name=BMC_NIC, mac=BMC_MAC)]), LabConfig())
    assert get(bmc, R)["Oem"]["Dell"]["ManagerMACAddress"] == BMC_MAC


def test_without_a_bmc_nic_a_stable_mac_of_its_own() -> None:
    # Generated labs cable their BMCs to no switch: the made-up MAC by index stays, distinct per BMC.
    specs = [LabServerSpec(name=f"gen-{i}", nics=[LabNic(name="ens1f0", mac=f"02:1a:00:00:00:0{i}")]) for i in range(2)]
    macs = [manager_macs(SimBMC(s, LabConfig(), index=i)) for i, s in enumerate(specs)]
    assert specs[0].bmc_mac is None
    assert macs == [["02:1b:00:00:00:00"], ["02:1b:00:00:00:01"]]
