"""The lab's site file declares the lab's Kubernetes cluster: the stand-in's kubeconfig, by reference."""

from __future__ import annotations

from pathlib import Path

import yaml
from fleetctl_lab.inventory import lab_cluster, lab_fleet

from fleetctl.inventory.schema import SiteFile


def test_a_lab_points_every_declared_cluster_at_its_stand_in_and_learns_the_nodes(tmp_path: Path) -> None:
    example = yaml.safe_load((Path(__file__).parents[3] / "inventory" / "site-tyo1.yaml").read_text())
    site = example["sites"][0]
    assert site["clusters"] == [{"name": "tyo1-train", "kubeconfig": "/etc/fleetctl/kubeconfig", "context": "tyo1-train-admin"}]
    server = next(s for r in site["racks"] for s in r.get("servers", []))
    server["node"] = "node-in-the-real-cluster"
    doc = lab_fleet(SiteFile.model_validate(example), {}, tmp_path)
    lab_site = doc["sites"][0]
    # The real cluster's reference is gone: the lab's stand-in (its kubeconfig as `fleetctl lab k8s up` writes it).
    assert lab_site["clusters"] == [lab_cluster(tmp_path, "tyo1-train")]
    assert lab_site["clusters"][0]["kubeconfig"] == str(tmp_path / "k8s" / "kubeconfig")
    assert all("node" not in s for r in lab_site["racks"] for s in r.get("servers", []))  # the stand-in names its nodes as the servers
    SiteFile.model_validate(doc)  # and the site file stays valid
