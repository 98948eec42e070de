"""Bad site files are refused with exit 2 and one line naming file, line and field; nothing changes.

Each case mutates the small valid BASE and names the text on the line the
error must point at. The store already holds BASE, so "untouched" compares a
non-empty inventory before and after.
"""

from __future__ import annotations

import pytest
from invtest_sites import BASE, line_of, replace_once

# A valid provisioning block for BASE's site; the provisioning cases break one line of it.
PROV = """\
  provisioning:
    vlan: 200
    boot: pxe
    firmware_images: https://fw.lab1.example/firmware
    ssh_key: /etc/fleetctl/provision_ed25519
    k8s:
      endpoint: k8s-api.lab1:6443
      token: env:K8S_JOIN
      ca_cert_hash: sha256:{}
""".format("ab" * 32)


def _prov(text: str, old: str, new: str) -> str:
    """BASE with PROV in its site, ``old`` replaced by ``new`` in the block."""
    return replace_once(text, "- name: lab1\n", "- name: lab1\n" + replace_once(PROV, old, new))


# (id, mutate(text) -> text, needle on the expected line (or (needle, nth)), field suffix, message fragment)
CASES = [
    ("malformed-yaml", lambda t: replace_once(t, "      model: srv2u\n", "      model: srv2u: oops\n"),
     "srv2u: oops", None, "malformed YAML"),
    ("unknown-key", lambda t: replace_once(t, "      model: srv2u\n", "      model: srv2u\n      colour: red\n"),
     "colour: red", "servers[1].colour", "unknown key 'colour'"),
    ("wrong-type", lambda t: replace_once(t, "      position: 2\n", "      position: two\n"),
     "position: two", "servers[1].position", "integer"),
    ("missing-field", lambda t: replace_once(t, "      serial: SER-2\n", ""),
     "- name: s2", "servers[1].serial", "missing required field 'serial'"),
    ("duplicate-yaml-key", lambda t: replace_once(t, "      serial: SER-2\n", "      serial: SER-2\n      serial: SER-3\n"),
     "serial: SER-3", None, "duplicate key 'serial'"),
    ("duplicate-serial", lambda t: replace_once(t, "serial: SER-2", "serial: SER-1"),
     ("serial: SER-1", 2), "servers[1].serial", "serial 'SER-1' is already used by server s1"),
    ("duplicate-mac", lambda t: replace_once(t, "mac: 02:00:00:00:00:03", "mac: 02:00:00:00:00:01"),
     ("mac: 02:00:00:00:00:01", 2), "servers[1].nics[1].mac", "already used by s1/eth0"),
    ("duplicate-board-serial", lambda t: replace_once(t, "serial: B-2", "serial: B-1"),
     ("serial: B-1", 2), "servers[0].boards[1].serial", "board serial 'B-1'"),
    ("overlapping-units", lambda t: replace_once(t, "      position: 2\n", "      position: 1\n"),
     ("position: 1", 2), "servers[1].position", "s2 overlaps s1 at U1"),
    ("beyond-rack-height", lambda t: replace_once(t, "      position: 10\n", "      position: 11\n"),
     "position: 11", "switches[0].position", "beyond the rack's 10U"),
    ("unknown-model", lambda t: replace_once(t, "      model: srv2u\n", "      model: nosuch\n"),
     "model: nosuch", "servers[1].model", "unknown hardware model 'nosuch'"),
    ("model-kind-mismatch", lambda t: replace_once(t, "      model: srv2u\n", "      model: sw8\n"),
     ("model: sw8", 1), "servers[1].model", "is a switch model, not a server model"),
    ("unknown-port", lambda t: replace_once(t, "port: Ethernet1\n", "port: Ethernet99\n"),
     "port: Ethernet99", "cabling[0].port", "no port 'Ethernet99'"),
    ("unknown-server", lambda t: replace_once(t, "    server: s1\n", "    server: s9\n"),
     "server: s9", "cabling[0].server", "no server 's9'"),
    ("unknown-nic", lambda t: replace_once(t, "    server: s2\n    nic: eth0\n", "    server: s2\n    nic: eth7\n"),
     "nic: eth7", "cabling[1].nic", "has no NIC 'eth7'"),
    ("port-cabled-twice", lambda t: replace_once(t, "port: Ethernet2\n", "port: Ethernet1\n"),
     ("port: Ethernet1", 2), "cabling[1].port", "already cabled to s1/eth0"),
    ("access-port-two-vlans", lambda t: t + "    - 200\n    mode: access\n",
     ("- switch: sw1", 2), "cabling[1]", "exactly one VLAN"),
    ("bad-credential-ref", lambda t: replace_once(t, "credential: env:BMC_LAB", "credential: vault:bmc"),
     "credential: vault:bmc", "servers[0].credential", "not a credential reference (env:PREFIX, file:/ABS/PATH, cmd:NAME)"),
    ("bad-bmc-url", lambda t: replace_once(t, "bmc: https://10.0.0.2", "bmc: ftp://10.0.0.2"),
     "bmc: ftp://10.0.0.2", "servers[1].bmc", "BMC URL"),
    ("unknown-switch", lambda t: replace_once(t, "  - switch: sw1\n    port: Ethernet1\n", "  - switch: swX\n    port: Ethernet1\n"),
     "switch: swX", "cabling[0].switch", "no switch 'swX'"),
    # The site's provisioning block (a valid one is PROV below).
    ("provisioning-vlan-out-of-range", lambda t: _prov(t, "    vlan: 200\n", "    vlan: 4095\n"),
     "vlan: 4095", "provisioning.vlan", "less than or equal to 4094"),
    ("provisioning-vmedia-without-image", lambda t: _prov(t, "    boot: pxe\n", "    boot: vmedia\n"),
     "  provisioning:", "provisioning.image", "boot: vmedia needs an image"),
    ("provisioning-unknown-boot", lambda t: _prov(t, "    boot: pxe\n", "    boot: usb\n"),
     "boot: usb", "provisioning.boot", "'pxe' or 'vmedia'"),
    ("provisioning-image-not-http", lambda t: _prov(t, "    boot: pxe\n", "    boot: vmedia\n    image: ftp://deploy.lab1/os.iso\n"),
     "image: ftp://", "provisioning.image", "is not an http:// or https:// URL"),
    ("provisioning-firmware-url-scheme", lambda t: _prov(t, "firmware_images: https://fw.lab1", "firmware_images: file:///srv/fw"),
     "firmware_images: file:", "provisioning.firmware_images", "is not an http:// or https:// URL"),
    ("provisioning-template-placeholder",
     lambda t: _prov(t, "    boot: pxe\n", "    boot: pxe\n    firmware_template: '{base}/{model}.bin'\n"),
     "firmware_template:", "provisioning.firmware_template", "not {model}"),
    ("provisioning-timeout-zero", lambda t: _prov(t, "    boot: pxe\n", "    boot: pxe\n    install_timeout: 0\n"),
     "install_timeout: 0", "provisioning.install_timeout", "greater than or equal to 1"),
    ("provisioning-ssh-key-material",
     lambda t: _prov(t, "ssh_key: /etc/fleetctl/provision_ed25519", "ssh_key: '-----BEGIN OPENSSH PRIVATE KEY-----'"),
     "ssh_key: '-----BEGIN", "provisioning.ssh_key", "never the key itself"),
    ("provisioning-k8s-literal-token", lambda t: _prov(t, "token: env:K8S_JOIN", "token: abcdef.0123456789abcdef"),
     "token: abcdef", "provisioning.k8s.token", "must be a credential reference"),
    ("provisioning-k8s-bad-hash", lambda t: _prov(t, "ca_cert_hash: sha256:", "ca_cert_hash: md5:"),
     "ca_cert_hash: md5:", "provisioning.k8s.ca_cert_hash", "sha256:<64 hex digits>"),
    ("provisioning-k8s-endpoint-without-port", lambda t: _prov(t, "endpoint: k8s-api.lab1:6443", "endpoint: k8s-api.lab1"),
     "endpoint: k8s-api.lab1", "provisioning.k8s.endpoint", "is not host:port"),
    ("provisioning-unknown-key", lambda t: _prov(t, "    boot: pxe\n", "    boot: pxe\n    bootloader: grub\n"),
     "bootloader: grub", "provisioning.bootloader", "unknown key 'bootloader'"),
]  # fmt: skip


def _ids(case) -> str:  # type: ignore[no-untyped-def]
    return case.values[0] if hasattr(case, "values") else case[0]


def _check_refusal(r, text, path, where, field, fragment) -> None:  # type: ignore[no-untyped-def]
    needle, nth = where if isinstance(where, tuple) else (where, 1)
    line = line_of(text, needle, nth)
    assert r.code == 2, (r.out, r.err)
    err = r.err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    assert f"{path}:{line}:" in err, err
    if field:
        assert f"sites[0].racks[0].{field}:" in err or f"sites[0].{field}:" in err, err
    assert fragment in err, err


# The checks themselves do not depend on the backend: one case per test on
# SQLite; the loop below runs every case against each backend's store.
@pytest.mark.parametrize(
    ("case", "mutate", "where", "field", "fragment"),
    CASES,
    ids=[_ids(c) for c in CASES],
)
def test_bad_site_file_is_refused_with_file_line_field(
    cli, write, export, case, mutate, where, field, fragment
):
    assert cli("inventory", "import", str(write(BASE, "base.yaml", "base"))).code == 0
    before = export()
    text = mutate(BASE)
    path = write(text)
    r = cli("inventory", "import", str(path))
    _check_refusal(r, text, path, where, field, fragment)
    assert export() == before


def test_every_bad_file_leaves_the_store_untouched(base_loaded, cli, write, export):
    before = export()
    events = cli("events", "list", "--output", "json").out
    for case in CASES:
        name, mutate, where, field, fragment = case
        text = mutate(BASE)
        path = write(text, f"{name}.yaml")
        _check_refusal(
            cli("inventory", "import", str(path)), text, path, where, field, fragment
        )
    assert export() == before
    assert cli("events", "list", "--output", "json").out == events


def test_dry_run_refuses_bad_input_too(db_url, cli, write):
    path = write(replace_once(BASE, "serial: SER-2", "serial: SER-1"))
    r = cli("inventory", "import", "--dry-run", str(path))
    assert r.code == 2
    assert f"{path}:{line_of(BASE, 'serial: SER-2')}:" in r.err


def test_model_error_points_into_models(db_url, cli, write):
    text = replace_once(
        BASE,
        "  model: W8\n  height: 1\n",
        "  model: W8\n  height: 1\n  boards:\n    kind: gpu\n    count: 2\n",
    )
    path = write(text)
    r = cli("inventory", "import", str(path))
    assert r.code == 2
    assert (
        f"{path}:{line_of(text, '- name: sw8')}: models[2]: a switch model holds no accelerator boards"
        in r.err
    )


def _second_site(
    serial: str = "SER-9", mac: str = "02:00:00:00:09:01", board: str = "Z-1"
) -> str:
    return f"""\
sites:
- name: lab2
  racks:
  - name: r1
    servers:
    - name: z1
      serial: {serial}
      model: srv1u
      position: 1
      nics:
      - name: eth0
        mac: {mac}
      boards:
      - serial: {board}
        slot: 0
"""


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [({"serial": "SER-1"}, "serial 'SER-1'"), ({"mac": "02:00:00:00:00:01"}, "MAC '02:00:00:00:00:01'"),
     ({"board": "B-1"}, "board serial 'B-1'")],
    ids=["serial", "mac", "board-serial"],
)  # fmt: skip
def test_duplicate_against_a_site_in_the_store_is_refused(
    base_loaded, cli, write, export, kwargs, what
):
    before = export()
    path = write(_second_site(**kwargs), "lab2.yaml")
    r = cli("inventory", "import", str(path))
    assert r.code == 2, r.out
    assert len(r.err.strip().splitlines()) == 1
    assert what in r.err
    assert export() == before


def test_duplicate_against_the_store_names_the_imported_file_and_line(
    base_loaded, cli, write
):
    text = _second_site(serial="SER-1")
    path = write(text, "lab2.yaml")
    r = cli("inventory", "import", str(path))
    assert r.code == 2
    assert (
        f"{path}:{line_of(text, 'serial: SER-1')}: sites[0].racks[0].servers[0].serial:"
        in r.err
    ), r.err


def test_not_a_mapping_and_missing_path(db_url, cli, write, tmp_path):
    path = write("- just\n- a list\n")
    r = cli("inventory", "import", str(path))
    assert r.code == 2 and f"{path}:1:" in r.err
    r = cli("inventory", "import", str(tmp_path / "nope.yaml"))
    assert r.code == 2 and "nope.yaml" in r.err and "no such file" in r.err
