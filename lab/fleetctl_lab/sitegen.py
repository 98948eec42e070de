"""Generate site files: the example site in inventory/ and benchmark fleets.

``python -m fleetctl_lab.sitegen example`` prints the example site;
``python -m fleetctl_lab.sitegen fleet --servers 10000`` a large one. Serials,
MACs and addresses are derived from positions, so output is reproducible.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

MODELS: list[dict[str, Any]] = [
    {
        "name": "mn-server-2", "kind": "server", "vendor": "Preferred Networks", "model": "MN-Server 2",
        "height": 2, "power": {"idle": 450, "peak": 1600}, "boards": {"kind": "mncore2", "count": 4},
        "bios_profile": "mncore-hpc",
        "firmware": {"BMC": "2.14.0", "BIOS": "1.8.2", "mncore2-board": "0.9.7"},
    },
    {
        "name": "mn-server-2-1u", "kind": "server", "vendor": "Preferred Networks", "model": "MN-Server 2 (1U)",
        "height": 1, "power": {"idle": 400, "peak": 1500}, "boards": {"kind": "mncore2", "count": 4},
        "bios_profile": "mncore-hpc",
        "firmware": {"BMC": "2.14.0", "BIOS": "1.8.2", "mncore2-board": "0.9.7"},
    },
    {
        "name": "gpu-8x-a100", "kind": "server", "vendor": "Supermicro", "model": "AS-4124GO-NART",
        "height": 4, "power": {"idle": 1200, "peak": 6500}, "boards": {"kind": "gpu", "count": 8},
        "bios_profile": "gpu-default",
        "firmware": {"BMC": "01.01.10", "BIOS": "2.7", "vbios": "92.00.45.00.03"},
    },
    {
        "name": "sn2700", "kind": "switch", "vendor": "NVIDIA", "model": "SN2700 (SONiC)", "height": 1,
        "power": {"idle": 150, "peak": 350}, "firmware": {"SONiC": "SONiC.202311.1"},
        "ports": ["Ethernet[0-127]"],
    },
    {
        "name": "dcs-7050sx3", "kind": "switch", "vendor": "Arista", "model": "DCS-7050SX3-48YC8",
        "height": 1, "power": {"idle": 120, "peak": 280}, "firmware": {"EOS": "4.30.2F"},
        "ports": ["Ethernet[1-48]", "Ethernet[49-56]/1", "Management1"],
    },
    {
        "name": "n9k-c93180", "kind": "switch", "vendor": "Cisco", "model": "N9K-C93180YC-FX", "height": 1,
        "power": {"idle": 200, "peak": 450}, "firmware": {"NX-OS": "10.3(4a)"},
        "ports": ["Ethernet1/[1-54]", "mgmt0"],
    },
]  # fmt: skip


BIOS_PROFILES: list[dict[str, Any]] = [
    {"name": "mncore-hpc", "description": "MN-Core nodes: all four boards mapped, no PCIe power saving",
     "attributes": {"Above4GDecoding": "Enabled", "PcieAspm": "Disabled", "SriovGlobalEnable": "Disabled",
                    "ProcTurboMode": "Enabled", "WorkloadProfile": "HighPerformanceCompute"}},
    {"name": "gpu-default", "description": "GPU nodes: IOMMU on for GPUDirect, performance power profile",
     "attributes": {"Above4GDecoding": "Enabled", "IommuEnabled": True, "PowerRegulator": "StaticHighPerf",
                    "ProcHyperthreading": "Enabled"}},
]  # fmt: skip


# The example site's provisioning settings (docs/site-files.md); the CA hash is a dummy.
PROVISIONING: dict[str, Any] = {
    "vlan": 200, "boot": "pxe", "firmware_images": "https://fw.tyo1.example/firmware",
    "k8s": {"endpoint": "k8s-api.tyo1.example:6443", "token": "env:FLEETCTL_K8S_TOKEN",
            "ca_cert_hash": "sha256:" + "5e" * 32},
}  # fmt: skip


# The example site's Kubernetes cluster (docs/kubernetes.md): a reference to a kubeconfig, never a token. Its
# servers' nodes are learned (named as the servers); `fleetctl lab up` points it at the lab's stand-in.
CLUSTERS: list[dict[str, Any]] = [{"name": "tyo1-train", "kubeconfig": "/etc/fleetctl/kubeconfig", "context": "tyo1-train-admin"}]


def _mac(site: int, rack: int, unit: int, nic: int) -> str:
    return f"02:fc:{site:02x}:{rack:02x}:{unit:02x}:{nic:02x}"


def _server(site_no: int, site: str, rack_no: int, rack: str, model: dict[str, Any], pos: int, idx: int) -> dict[str, Any]:
    kind = model["boards"]["kind"]
    count = model["boards"]["count"]
    prefix = "mn" if kind == "mncore2" else "gpu"
    name = f"{prefix}-{site}-r{rack_no:02d}-{idx:02d}"
    boards = []
    for slot in range(count):
        if kind == "mncore2":
            bus = [0x1B, 0x3D, 0x9F, 0xBE][slot % 4] + slot // 4
            boards.append({"serial": f"MN2B-{site_no:02d}{rack_no:03d}{pos:02d}{slot}", "slot": slot,
                           "pci": f"0000:{bus:02x}:00.0", "model": "MN-Core 2", "firmware": {"mncore2-board": "0.9.7"}})  # fmt: skip
        else:
            bus = [0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD][slot % 8]
            boards.append({"serial": f"1321{site_no:02d}{rack_no:03d}{pos:02d}{slot}", "slot": slot,
                           "pci": f"0000:{bus:02x}:00.0", "model": "NVIDIA A100-SXM4-80GB"})  # fmt: skip
    return {
        "name": name,
        "serial": f"{'MNS' if kind == 'mncore2' else 'GPS'}{site_no:02d}{rack_no:03d}{pos:02d}",
        "model": model["name"],
        "position": pos,
        # Names, not addresses: BMCs are reached through the OOB network's DNS.
        "bmc": f"https://{name}-bmc.oob.{site}.example",
        "credential": f"env:BMC_{site.upper()}",
        "nics": [
            {"name": "bmc", "mac": _mac(site_no, rack_no, pos, 0)},
            {"name": "eth0", "mac": _mac(site_no, rack_no, pos, 1)},
            {"name": "eth1", "mac": _mac(site_no, rack_no, pos, 2)},
        ],
        "boards": boards,
        "tags": [kind, "batch-2026q3"],
    }


def _rack(site_no: int, site: str, rack_no: int, layout: list[tuple[str, int]], height: int,
          budget: int | None, spines: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:  # fmt: skip
    """A rack of servers from the bottom up, two leaves and a management switch on top."""
    models = {m["name"]: m for m in MODELS}
    rack = f"rack-{rack_no:02d}"
    servers = []
    pos = 1
    idx = 1
    for model_name, count in layout:
        model = models[model_name]
        for _ in range(count):
            servers.append(_server(site_no, site, rack_no, rack, model, pos, idx))
            pos += model["height"]
            idx += 1
    leaf_a, leaf_b, mgmt = (f"leaf-{site}-r{rack_no:02d}-a", f"leaf-{site}-r{rack_no:02d}-b", f"mgmt-{site}-r{rack_no:02d}")
    switches = [
        {"name": mgmt, "model": "dcs-7050sx3", "platform": "eos", "role": "management",
         "address": f"10.{200 + site_no}.{rack_no}.3", "position": height - 2, "serial": f"JPE{site_no:02d}{rack_no:03d}3",
         "credential": "env:SWITCH", "snmp": {"version": "2c", "credential": "env:SNMP_RO"}},
        {"name": leaf_a, "model": "sn2700", "platform": "sonic", "role": "leaf",
         "address": f"10.{200 + site_no}.{rack_no}.1", "position": height - 1, "serial": f"MT{site_no:02d}{rack_no:03d}1",
         "credential": "env:SWITCH", "snmp": {"version": "2c", "credential": "env:SNMP_RO"}},
        {"name": leaf_b, "model": "sn2700", "platform": "sonic", "role": "leaf",
         "address": f"10.{200 + site_no}.{rack_no}.2", "position": height, "serial": f"MT{site_no:02d}{rack_no:03d}2",
         "credential": "env:SWITCH", "snmp": {"version": "2c", "credential": "env:SNMP_RO"}},
    ]  # fmt: skip
    cabling = []
    for i, s in enumerate(servers):
        cabling.append({"switch": mgmt, "port": f"Ethernet{i + 1}", "server": s["name"], "nic": "bmc", "vlans": [10]})
        cabling.append({"switch": leaf_a, "port": f"Ethernet{i}", "server": s["name"], "nic": "eth0", "vlans": [100]})
        cabling.append({"switch": leaf_b, "port": f"Ethernet{i}", "server": s["name"], "nic": "eth1", "vlans": [100]})
    for j, spine in enumerate(spines):
        for k, leaf in enumerate((leaf_a, leaf_b)):
            cabling.append({"switch": leaf, "port": f"Ethernet{120 + j}", "peer": spine,
                            "peer_port": f"Ethernet{(rack_no * 2 + k) % 128}", "vlans": [10, 100, 200], "mode": "trunk"})  # fmt: skip
    body: dict[str, Any] = {"name": rack, "row": "B", "position": rack_no, "height": height}
    if budget:
        body["power_budget"] = budget
    body["servers"] = servers
    body["switches"] = switches
    return body, cabling


def example() -> dict[str, Any]:
    """The example site: a network rack, a GPU rack, rack-12 (MN-Core + GPU) and rack-13."""
    site, site_no = "tyo1", 1
    spines = ["spine-tyo1-01", "spine-tyo1-02"]
    net = {
        "name": "rack-01", "row": "A", "position": 1, "height": 42, "power_budget": 6000,
        "switches": [
            {"name": s, "model": "sn2700", "platform": "sonic", "role": "spine", "address": f"10.201.1.{10 + i}",
             "position": 20 + i, "serial": f"MT01SP{i}", "credential": "env:SWITCH", "snmp": {"version": "2c", "credential": "env:SNMP_RO"}}
            for i, s in enumerate(spines)
        ],
    }  # fmt: skip
    racks, cabling = [net], []
    for rack_no, layout, height, budget in (
        (11, [("gpu-8x-a100", 4)], 42, 30000),
        (12, [("mn-server-2", 16), ("gpu-8x-a100", 3)], 48, 46000),
        (13, [("mn-server-2", 8)], 42, 16000),
    ):
        rack, cables = _rack(site_no, site, rack_no, layout, height, budget, spines)
        racks.append(rack)
        cabling += cables
    return {
        "bios_profiles": BIOS_PROFILES,
        "models": MODELS,
        "sites": [{"name": site, "description": "Tokyo 1, hall B: MN-Core and GPU training racks",
                   "provisioning": PROVISIONING, "clusters": CLUSTERS, "racks": racks, "cabling": cabling}],
    }  # fmt: skip


def fleet(servers: int, per_rack: int = 40, sites: int = 1) -> dict[str, Any]:
    """A large fleet of 1U MN-Core servers with 4 boards, 3 switches a rack, fully cabled.

    Each rack's two leaves go up to a pair of spines; a spine pair takes 120
    racks (ports 0-119 of its 128), so big sites get several pairs.
    """
    out_sites = []
    racks_total = -(-servers // per_rack)
    racks_per_site = -(-racks_total // sites)
    left = servers
    for s in range(sites):
        name = f"s{s + 1:02d}"
        pairs = -(-racks_per_site // 120)
        spines = [(f"spine-{name}-{p:02d}a", f"spine-{name}-{p:02d}b") for p in range(1, pairs + 1)]
        racks: list[dict[str, Any]] = [{
            "name": "rack-net", "height": 42,
            "switches": [{"name": sp, "model": "sn2700", "platform": "sonic", "role": "spine",
                          "address": f"10.{250 - s}.0.{2 * i + k + 1}", "position": 2 * i + k + 1, "credential": "env:SWITCH",
                          "snmp": {"version": "2c", "credential": "env:SNMP_RO"}}
                         for i, pair in enumerate(spines) for k, sp in enumerate(pair)],
        }]  # fmt: skip
        cabling: list[dict[str, Any]] = []
        for r in range(1, racks_per_site + 1):
            if left <= 0:
                break
            n = min(per_rack, left)
            left -= n
            rack, cables = _rack(s + 1, name, r, [("mn-server-2-1u", n)], 44, None, [])
            racks.append(rack)
            cabling += cables
            pair = spines[(r - 1) // 120]
            for k, leaf in enumerate((f"leaf-{name}-r{r:02d}-a", f"leaf-{name}-r{r:02d}-b")):
                cabling.append({"switch": leaf, "port": "Ethernet127", "peer": pair[k],
                                "peer_port": f"Ethernet{(r - 1) % 120}", "vlans": [10, 100, 200], "mode": "trunk"})  # fmt: skip
        out_sites.append({"name": name, "racks": racks, "cabling": cabling})
    return {"bios_profiles": BIOS_PROFILES, "models": MODELS, "sites": out_sites}


def main(argv: list[str] | None = None) -> None:
    from fleetctl.inventory.render import dump_yaml

    p = argparse.ArgumentParser(prog="python -m fleetctl_lab.sitegen")
    sub = p.add_subparsers(dest="what", required=True)
    sub.add_parser("example")
    f = sub.add_parser("fleet")
    f.add_argument("--servers", type=int, default=1000)
    f.add_argument("--per-rack", type=int, default=40)
    f.add_argument("--sites", type=int, default=1)
    args = p.parse_args(argv)
    doc = example() if args.what == "example" else fleet(args.servers, args.per_rack, args.sites)
    sys.stdout.write(dump_yaml(doc))


if __name__ == "__main__":
    main()
