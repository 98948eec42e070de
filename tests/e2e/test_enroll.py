"""Enrolling a server by its BMC alone, then letting inspection fill its model and serial (issue #13).

As Ironic enrolls a node with a driver and a BMC address: `server add NAME
--bmc URL --credential REF --rack R --position N` stores the server with the
placeholder model `unidentified` and the serial UNKNOWN-NAME; `server inspect
NAME --dry-run` shows what the BMC says (a declared model matched by vendor and
model, or a new one proposed) and changes nothing; without --dry-run it fills
them in. Against lab BMCs over HTTPS, the real CLI.
"""

from __future__ import annotations

import json

import pytest
from tests_helpers_bmc import lab_up, serve  # (path set in conftest)

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # heavy: minutes long; `make test-heavy` runs the heavy ones alone

MN = "mn-tyo1-r12-01"
GPU = "gpu-tyo1-r12-19"


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    r = lab_up(cli, monkeypatch, *lab_db_args, "--power-transition", "0.2", *serve([MN, GPU]))
    assert r.code == 0, r.err
    yield
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


def show(cli, name):  # type: ignore[no-untyped-def]
    r = cli("server", "show", name, "--output", "json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def reenroll(cli, name):  # type: ignore[no-untyped-def]
    """Forget a lab server, then add it back by its BMC alone (as racked: its rack and unit, nothing else)."""
    before = show(cli, name)
    assert cli("server", "remove", name).code == 0
    r = cli("server", "add", name, "--rack", before["rack"], "--position", str(before["position"]),
            "--bmc", before["bmc"], "--credential", before["credential"])  # fmt: skip
    assert r.code == 0, r.err
    return before


def test_add_without_model_and_serial_needs_the_bmc(example_loaded, cli):  # type: ignore[no-untyped-def]
    r = cli("server", "add", "mn-tyo1-r12-99", "--rack", "rack-12", "--position", "45")
    assert r.code == 2 and "--bmc and --credential" in r.err and "--model and --serial" in r.err
    r = cli("server", "add", "mn-tyo1-r12-99", "--rack", "rack-12", "--position", "45", "--model", "mn-server-2",
            "--bmc", "https://mn-tyo1-r12-99-bmc.example")  # fmt: skip
    assert r.code == 2 and "--serial" in r.err
    assert cli("server", "show", "mn-tyo1-r12-99").code == 2  # nothing stored


def test_add_by_bmc_alone_stores_placeholders(example_loaded, cli):  # type: ignore[no-untyped-def]
    r = cli("server", "add", "mn-tyo1-r12-99", "--rack", "rack-12", "--position", "45",
            "--bmc", "https://mn-tyo1-r12-99-bmc.example", "--credential", "env:BMC_TYO1", "--dry-run")  # fmt: skip
    assert r.code == 0 and "+ server mn-tyo1-r12-99" in r.out, r.err
    assert cli("server", "show", "mn-tyo1-r12-99").code == 2  # a dry run stores nothing
    r = cli("server", "add", "mn-tyo1-r12-99", "--rack", "rack-12", "--position", "45",
            "--bmc", "https://mn-tyo1-r12-99-bmc.example", "--credential", "env:BMC_TYO1")  # fmt: skip
    assert r.code == 0, r.err
    assert "server inspect mn-tyo1-r12-99" in r.err
    s = show(cli, "mn-tyo1-r12-99")
    assert (s["model"], s["serial"], s["state"]) == ("unidentified", "UNKNOWN-mn-tyo1-r12-99", "registered")
    # The export carries the placeholders and imports again unchanged.
    exported = cli("inventory", "export")
    assert "name: unidentified" in exported.out and "UNKNOWN-mn-tyo1-r12-99" in exported.out


def test_inspect_matches_a_declared_model_plan_first(lab, cli):  # type: ignore[no-untyped-def]
    before = reenroll(cli, MN)
    assert show(cli, MN)["model"] == "unidentified"
    r = cli("server", "inspect", MN, "--dry-run", "--output", "json")
    assert r.code == 0, r.err + r.out
    [row] = json.loads(r.out)
    assert row["model"] == "mn-server-2" and row["new_model"] is None
    assert f"serial {before['serial']}" in row["filled"] and "model mn-server-2" in row["filled"] and "4 boards" in row["filled"]
    s = show(cli, MN)
    assert (s["model"], s["serial"], s["boards"], s["state"]) == ("unidentified", f"UNKNOWN-{MN}", [], "registered")  # unchanged
    r = cli("server", "inspect", MN)
    assert r.code == 0, r.err + r.out
    assert "model mn-server-2" in r.out
    s = show(cli, MN)
    assert (s["model"], s["serial"], len(s["boards"]), s["state"]) == ("mn-server-2", before["serial"], 4, "inspected")
    assert cli("server", "inspect", MN).code == 0  # nothing left to fill, nothing drifts


def test_inspect_proposes_a_new_model_when_none_matches(lab, cli, tmp_path):  # type: ignore[no-untyped-def]
    # The GPU servers' declared model names another product: the BMC's matches none.
    site = tmp_path / "site.yaml"
    text = cli("inventory", "export").out
    assert "model: AS-4124GO-NART" in text
    site.write_text(text.replace("model: AS-4124GO-NART", "model: AS-4124GS-TNR"))
    assert cli("inventory", "import", str(site)).code == 0
    reenroll(cli, GPU)
    r = cli("server", "inspect", GPU, "--dry-run", "--output", "json")
    assert r.code == 0, r.err + r.out
    [row] = json.loads(r.out)
    assert row["new_model"] == {"name": "supermicro-as-4124go-nart", "kind": "server", "vendor": "Supermicro",
                                "model": "AS-4124GO-NART", "height": 1, "boards": {"kind": "gpu", "count": 8}}  # fmt: skip
    assert "supermicro-as-4124go-nart" not in cli("inventory", "export").out
    r = cli("server", "inspect", GPU, "--output", "json")
    assert r.code == 0, r.err + r.out
    s = show(cli, GPU)
    assert (s["model"], s["vendor"], s["product"], len(s["boards"])) == ("supermicro-as-4124go-nart", "Supermicro", "AS-4124GO-NART", 8)
