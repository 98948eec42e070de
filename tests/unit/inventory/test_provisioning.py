"""A site's provisioning settings: parsed, stored minimal, planned, exported unchanged, read back with defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from invtest_sites import BASE, replace_once
from sqlalchemy import text

EXAMPLE = Path(__file__).resolve().parents[3] / "inventory"
HASH = "sha256:" + "ab" * 32

# Every key set, none at its default (round trips must keep all of them).
FULL = f"""\
  provisioning:
    vlan: 300
    boot: vmedia
    image: https://deploy.lab1.example/images/debian-12-fleet.iso
    firmware_images: https://fw.lab1.example/firmware
    firmware_template: '{{base}}/{{component}}/{{version}}.bin'
    install_timeout: 5400
    ssh_user: deploy
    ssh_key: /etc/fleetctl/provision_ed25519
    k8s:
      endpoint: k8s-api.lab1.example:6443
      token: env:K8S_JOIN
      ca_cert_hash: {HASH}
"""


def _with(block: str) -> str:
    return replace_once(BASE, "- name: lab1\n", "- name: lab1\n" + block)


def _sql(db_url: str, statement: str):  # type: ignore[no-untyped-def]
    from fleetctl.store import get_engine

    with get_engine(db_url).begin() as c:
        return c.execute(text(statement)).all()


def _provisioning(db_url: str, site: str):  # type: ignore[no-untyped-def]
    from fleetctl.inventory.queries import site_provisioning
    from fleetctl.store import get_engine

    with get_engine(db_url).connect() as c:
        return site_provisioning(c, site)


def test_the_block_parses_with_defaults_and_normalises():
    from fleetctl.inventory.schema import SiteSpec

    site = SiteSpec.model_validate(
        {"name": "x", "provisioning": {"vlan": 200, "boot": "pxe", "firmware_images": "https://fw.x/firmware/",
                                       "k8s": {"endpoint": "[fd00::1]:6443", "token": "file:/etc/k8s-token",
                                               "ca_cert_hash": "SHA256:" + "AB" * 32}}}
    )  # fmt: skip
    p = site.provisioning
    assert p is not None
    assert (p.vlan, p.boot, p.image, p.install_timeout, p.ssh_user, p.ssh_key) == (200, "pxe", None, 3600, "root", None)
    assert p.firmware_template == "{base}/{id}-{version}.bin"
    assert p.firmware_images == "https://fw.x/firmware"  # as the firmware workflow joins it
    assert p.k8s is not None and p.k8s.ca_cert_hash == HASH
    assert p.model_dump(exclude_defaults=True) == {
        "vlan": 200, "boot": "pxe", "firmware_images": "https://fw.x/firmware",
        "k8s": {"endpoint": "[fd00::1]:6443", "token": "file:/etc/k8s-token", "ca_cert_hash": HASH},
    }  # fmt: skip


def test_the_literal_token_is_not_repeated_in_the_error():
    from pydantic import ValidationError

    from fleetctl.inventory.schema import K8sJoinSpec

    with pytest.raises(ValidationError) as e:
        K8sJoinSpec.model_validate({"endpoint": "k:6443", "token": "abcdef.0123456789abcdef", "ca_cert_hash": HASH})
    assert "0123456789abcdef" not in e.value.errors()[0]["msg"]


def test_the_read_path_defaults_match_the_schema():
    from fleetctl.inventory.queries import PROVISIONING_DEFAULTS, PROVISIONING_KEYS
    from fleetctl.inventory.schema import ProvisioningSpec
    from fleetctl.workflows.firmware import DEFAULT_TEMPLATE

    fields = ProvisioningSpec.model_fields
    assert tuple(fields) == PROVISIONING_KEYS
    assert {n: f.get_default() for n, f in fields.items() if not f.is_required()} == PROVISIONING_DEFAULTS
    assert PROVISIONING_DEFAULTS["firmware_template"] == DEFAULT_TEMPLATE


def test_the_example_site_has_it_and_site_show_shows_it(db_url, cli):  # type: ignore[no-untyped-def]
    assert cli("inventory", "import", str(EXAMPLE)).code == 0
    want = {
        "vlan": 200, "boot": "pxe", "image": None, "firmware_images": "https://fw.tyo1.example/firmware",
        "firmware_template": "{base}/{id}-{version}.bin", "install_timeout": 3600, "ssh_user": "root",
        "ssh_key": None,
        "known_hosts": None,
        "k8s": {"endpoint": "k8s-api.tyo1.example:6443", "token": "env:FLEETCTL_K8S_TOKEN",
                "ca_cert_hash": "sha256:" + "5e" * 32},
    }  # fmt: skip
    got = _provisioning(db_url, "tyo1")
    assert got == want and list(got) == list(want)
    r = cli("site", "show", "tyo1", "--output", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["provisioning"] == want
    table = cli("site", "show", "tyo1").out
    assert "Provisioning" in table and "k8s.endpoint" in table and "install_timeout" in table and "3600" in table
    # Stored minimal: what the file said, no defaults.
    (stored,) = _sql(db_url, "SELECT provisioning FROM site WHERE name = 'tyo1'")[0]
    stored = json.loads(stored) if isinstance(stored, str) else stored
    assert set(stored) == {"vlan", "boot", "firmware_images", "k8s"}


def test_a_site_without_it_reads_none(base_loaded, cli):  # type: ignore[no-untyped-def]
    from fleetctl.errors import NotFound

    assert _provisioning(base_loaded, "lab1") is None
    with pytest.raises(NotFound):
        _provisioning(base_loaded, "nosuch")
    # A real NULL, not a JSON null.
    assert _sql(base_loaded, "SELECT name FROM site WHERE provisioning IS NULL") == [("lab1",)]
    assert json.loads(cli("site", "show", "lab1", "--output", "json").out)["provisioning"] is None
    assert "provisioning  none" in cli("site", "show", "lab1").out


def test_every_key_round_trips_byte_identical(db_url, cli, write, export, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    r = cli("inventory", "import", str(write(_with(FULL))))
    assert r.code == 0, r.err
    got = _provisioning(db_url, "lab1")
    assert got["boot"] == "vmedia" and got["ssh_user"] == "deploy" and got["k8s"]["token"] == "env:K8S_JOIN"
    y1, j1 = export(), export("json")
    assert FULL in y1  # written back as the file said it, in the schema's order
    (tmp_path / "export.yaml").write_text(y1)
    monkeypatch.setenv("FLEETCTL_DB", f"sqlite:///{tmp_path / 'second.db'}")
    r = cli("inventory", "import", str(tmp_path / "export.yaml"))
    assert r.code == 0, r.err
    assert export() == y1 and export("json") == j1


def test_defaults_written_out_are_left_out_of_the_export(db_url, cli, write, export):  # type: ignore[no-untyped-def]
    block = "  provisioning:\n    vlan: 200\n    boot: pxe\n    install_timeout: 3600\n    ssh_user: root\n"
    assert cli("inventory", "import", str(write(_with(block)))).code == 0
    assert "  provisioning:\n    vlan: 200\n    boot: pxe\n  racks:\n" in export()
    # And importing the same file again (defaults spelt out or not) changes nothing.
    assert cli("inventory", "import", str(write(_with(block)))).out.strip() == "nothing to change"
    short = "  provisioning:\n    vlan: 200\n    boot: pxe\n"
    assert cli("inventory", "import", str(write(_with(short)))).out.strip() == "nothing to change"


def test_a_change_is_planned_as_a_site_update_then_applied(db_url, cli, write, export):  # type: ignore[no-untyped-def]
    assert cli("inventory", "import", str(write(_with(FULL)))).code == 0
    before = export()
    changed = _with(FULL.replace("vlan: 300", "vlan: 310").replace("    install_timeout: 5400\n", "")
                    .replace("token: env:K8S_JOIN", "token: file:/etc/fleetctl/k8s-token"))  # fmt: skip
    path = write(changed, "changed.yaml")
    r = cli("inventory", "import", "--dry-run", "--output", "json", str(path))
    assert r.code == 0, r.err
    changes = json.loads(r.out)["changes"]
    assert changes == [{
        "action": "change", "kind": "site", "name": "lab1",
        "fields": {
            "provisioning.vlan": {"from": 300, "to": 310},
            "provisioning.install_timeout": {"from": 5400, "to": 3600},  # back to the default
            "provisioning.k8s.token": {"from": "env:K8S_JOIN", "to": "file:/etc/fleetctl/k8s-token"},
        },
    }]  # fmt: skip
    table = cli("inventory", "import", "--dry-run", str(path)).out
    assert "~ site lab1  provisioning.vlan: 300 -> 310" in table
    assert export() == before
    r = cli("inventory", "import", str(path))
    assert r.code == 0, r.err
    got = _provisioning(db_url, "lab1")
    assert (got["vlan"], got["install_timeout"], got["k8s"]["token"]) == (310, 3600, "file:/etc/fleetctl/k8s-token")
    assert "install_timeout" not in export()

    # The block taken away: the site changes, the column goes back to NULL.
    r = cli("inventory", "import", "--dry-run", "--output", "json", str(write(BASE, "plain.yaml")))
    (change,) = json.loads(r.out)["changes"]
    assert (change["kind"], list(change["fields"]), change["fields"]["provisioning"]["to"]) == ("site", ["provisioning"], None)
    assert cli("inventory", "import", str(write(BASE, "plain.yaml"))).code == 0
    assert _provisioning(db_url, "lab1") is None
    assert _sql(db_url, "SELECT name FROM site WHERE provisioning IS NULL") == [("lab1",)]


def test_a_cli_edit_of_the_site_keeps_it(db_url, cli, write):  # type: ignore[no-untyped-def]
    assert cli("inventory", "import", str(write(_with(FULL)))).code == 0
    before = _provisioning(db_url, "lab1")
    r = cli("site", "set", "lab1", "--description", "Lab 1")
    assert r.code == 0, r.err
    assert "provisioning" not in r.out
    assert _provisioning(db_url, "lab1") == before
