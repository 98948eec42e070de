"""Kubernetes nodes in the site file: a site's clusters (references only), a server's cluster and node.

Bad input is refused with one line naming the file, line and field, exit 2,
and the store keeps what it had; a good file round-trips through export.
"""

from __future__ import annotations

import pytest
from invtest_sites import BASE, line_of, replace_once

CLUSTERS = """\
  clusters:
  - name: train
    kubeconfig: /etc/fleetctl/kubeconfig
    context: train-admin
"""


def with_clusters(text: str, clusters: str = CLUSTERS) -> str:
    return replace_once(text, "- name: lab1\n", "- name: lab1\n" + clusters)


def with_node(text: str, server_line: str = "      serial: SER-1\n", extra: str = "      node: s1.train\n") -> str:
    return replace_once(text, server_line, server_line + extra)


GOOD = with_node(with_clusters(BASE))

# (id, text, needle on the expected line, field, message fragment)
CASES = [
    ("kubeconfig-content", with_clusters(BASE, CLUSTERS.replace("/etc/fleetctl/kubeconfig", "'apiVersion: v1'")),
     "kubeconfig: 'apiVersion", "clusters[0].kubeconfig", "never its content"),
    ("kubeconfig-relative", with_clusters(BASE, CLUSTERS.replace("/etc/fleetctl/kubeconfig", "kubeconfig")),
     "kubeconfig: kubeconfig", "clusters[0].kubeconfig", "absolute path"),
    ("cluster-neither", with_clusters(BASE, "  clusters:\n  - name: train\n"),
     "- name: train", "clusters[0]", "in_cluster: true, one of them"),
    ("cluster-both", with_clusters(BASE, CLUSTERS + "    in_cluster: true\n"),
     "- name: train", "clusters[0]", "one of them"),
    ("cluster-token", with_clusters(BASE, CLUSTERS + "    token: abc\n"),
     "token: abc", "clusters[0].token", "unknown key 'token'"),
    ("cluster-twice", with_clusters(BASE, CLUSTERS + "  - name: train\n    in_cluster: true\n"),
     ("- name: train", 2), "clusters[1].name", "cluster 'train' appears twice"),
    ("unknown-cluster", with_node(with_clusters(BASE), extra="      cluster: other\n"),
     "cluster: other", "servers[0].cluster", "cluster 'other' is not one of site 'lab1'"),
    ("node-without-cluster", with_node(BASE),
     "node: s1.train", "servers[0].node", "a node name needs a cluster"),
    ("node-not-dns", with_node(with_clusters(BASE), extra="      node: S1_train\n"),
     "node: S1_train", "servers[0].node", "pattern"),
    ("node-twice", with_node(GOOD, "      serial: SER-2\n", "      node: s1.train\n"),
     ("node: s1.train", 2), "servers[1].node", "node 's1.train' of cluster 'train' is already s1's"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "text", "where", "field", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_bad_cluster_or_node_is_refused_with_file_line_field(cli, write, export, case, text, where, field, fragment):
    assert cli("inventory", "import", str(write(BASE, "base.yaml", "base"))).code == 0
    before = export()
    path = write(text)
    r = cli("inventory", "import", str(path))
    needle, nth = where if isinstance(where, tuple) else (where, 1)
    assert r.code == 2, (r.out, r.err)
    err = r.err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{path}:{line_of(text, needle, nth)}:" in err, err
    assert f"sites[0].racks[0].{field}:" in err or f"sites[0].{field}:" in err, err
    assert fragment in err, err
    assert export() == before


def test_clusters_and_nodes_round_trip(db_url, cli, write, export):
    text = with_node(GOOD, "      serial: SER-2\n", "      cluster: train\n")
    assert cli("inventory", "import", str(write(text))).code == 0
    out = export()
    assert "clusters:\n  - {name: train, kubeconfig: /etc/fleetctl/kubeconfig, context: train-admin}\n" in out, out
    assert "node: s1.train" in out and "cluster: train" in out
    # Imported again, the export is the same file: nothing changes.
    r = cli("inventory", "import", str(write(out, "again.yaml")))
    assert r.code == 0, r.err
    assert export() == out


def test_in_cluster_needs_no_kubeconfig(db_url, cli, write, export):
    text = with_clusters(BASE, "  clusters:\n  - name: here\n    in_cluster: true\n")
    assert cli("inventory", "import", str(write(text))).code == 0, text
    assert "in_cluster: true" in export()
