"""Export -> import into an empty store -> export gives the same bytes."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

FP = "0f" * 32


@pytest.fixture
def lived_in(example_loaded, cli):  # type: ignore[no-untyped-def]
    """The example site after some life: states and a pinned fingerprint that the files did not set."""
    from fleetctl.store import get_engine

    with get_engine(example_loaded).begin() as c:
        c.execute(
            text(
                "UPDATE server SET state = 'in-service', bmc_fingerprint = :fp WHERE name = 'mn-tyo1-r12-01'"
            ),
            {"fp": FP},
        )
    assert cli("board", "set", "MN2B-01012012", "--state", "suspect").code == 0
    return example_loaded


def _use_fresh_store(monkeypatch, tmp_path, name: str) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_DB", f"sqlite:///{tmp_path / name}")


def test_export_import_export_is_byte_identical(lived_in, cli, tmp_path, monkeypatch):
    y1 = cli("inventory", "export").out
    j1 = cli("inventory", "export", "--output", "json").out
    assert (
        "mn-tyo1-r12-01" in y1
        and "state: in-service" in y1
        and FP in y1
        and "suspect" in y1
        and "  provisioning:\n    vlan: 200\n    boot: pxe\n" in y1
    )
    assert json.loads(j1)["sites"][0]["name"] == "tyo1"
    (tmp_path / "export.yaml").write_text(y1)

    _use_fresh_store(monkeypatch, tmp_path, "b.db")
    assert cli("inventory", "export").out.strip() == "{}"
    r = cli("inventory", "import", str(tmp_path / "export.yaml"))
    assert r.code == 0, r.err
    assert cli("inventory", "export").out == y1
    assert cli("inventory", "export", "--output", "json").out == j1


def test_export_to_a_folder_round_trips(lived_in, cli, tmp_path, monkeypatch):
    r = cli("inventory", "export", "--dir", str(tmp_path / "one"))
    assert r.code == 0, r.err
    first = {p.name: p.read_bytes() for p in (tmp_path / "one").iterdir()}
    assert set(first) == {"models.yaml", "site-tyo1.yaml"}
    assert first["site-tyo1.yaml"].startswith(b"sites:\n- name: tyo1\n")
    _use_fresh_store(monkeypatch, tmp_path, "c.db")
    assert cli("inventory", "import", str(tmp_path / "one")).code == 0
    assert cli("inventory", "export", "--dir", str(tmp_path / "two")).code == 0
    second = {p.name: p.read_bytes() for p in (tmp_path / "two").iterdir()}
    assert second == first


def test_json_folder_export_round_trips(base_loaded, cli, tmp_path, monkeypatch):
    j1 = cli("inventory", "export", "--output", "json").out
    assert (
        cli(
            "inventory", "export", "--output", "json", "--dir", str(tmp_path / "one")
        ).code
        == 0
    )
    _use_fresh_store(monkeypatch, tmp_path, "d.db")
    r = cli("inventory", "import", str(tmp_path / "one"))
    assert r.code == 0, r.err
    assert cli("inventory", "export", "--output", "json").out == j1


def test_a_single_json_export_file_imports(base_loaded, cli, tmp_path, monkeypatch):
    j1 = cli("inventory", "export", "--output", "json").out
    (tmp_path / "inv.json").write_text(j1)
    _use_fresh_store(monkeypatch, tmp_path, "e.db")
    r = cli("inventory", "import", str(tmp_path / "inv.json"))
    assert r.code == 0, r.err
    assert cli("inventory", "export", "--output", "json").out == j1


def test_the_example_site_file_is_what_sitegen_writes():
    """inventory/site-tyo1.yaml is generated: `python -m fleetctl_lab.sitegen example > inventory/site-tyo1.yaml`."""
    from pathlib import Path

    from fleetctl_lab.sitegen import example

    from fleetctl.inventory.render import dump_yaml

    path = Path(__file__).resolve().parents[3] / "inventory" / "site-tyo1.yaml"
    assert path.read_text() == dump_yaml(example()), "stale: python -m fleetctl_lab.sitegen example > inventory/site-tyo1.yaml"
