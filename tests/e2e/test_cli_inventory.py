"""The inventory CLI end to end: the real `fleetctl` entry point on the example site.

Read-only checks share one loaded store per backend test; edits are grouped
by noun so the example site is imported a handful of times, not per check.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

FLEETCTL = str(Path(sys.executable).parent / "fleetctl")
R12_SERVERS = [f"mn-tyo1-r12-{i:02d}" for i in range(1, 17)] + [
    f"gpu-tyo1-r12-{i}" for i in (17, 18, 19)
]


def ok(r):  # type: ignore[no-untyped-def]
    assert r.code == 0, (r.out, r.err)
    return r


def js(cli, *args):  # type: ignore[no-untyped-def]
    return json.loads(ok(cli(*args, "--output", "json")).out)


def refused(r, *fragments: str) -> None:  # type: ignore[no-untyped-def]
    assert r.code == 2, (r.out, r.err)
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, r.err
    for f in fragments:
        assert f in r.err, r.err


def export(cli) -> str:  # type: ignore[no-untyped-def]
    return ok(cli("inventory", "export")).out


# -- listings --------------------------------------------------------------------------


def test_server_list_rack_12_in_every_format(example_loaded, cli):
    rows = js(cli, "server", "list", "--rack", "rack-12")
    assert [r["name"] for r in rows] == R12_SERVERS
    for r in rows:
        assert {"name", "serial", "rack", "position", "state"} <= set(r)
        assert r["rack"] == "rack-12" and r["state"] == "registered"
    assert rows[0]["serial"] == "MNS0101201" and rows[0]["position"] == 1
    assert [r["position"] for r in rows] == sorted(r["position"] for r in rows)
    assert js(cli, "server", "list", "--rack", "tyo1/rack-12") == rows

    as_yaml = yaml.safe_load(
        ok(cli("server", "list", "--rack", "rack-12", "--output", "yaml")).out
    )
    assert as_yaml == rows
    as_csv = list(
        csv.DictReader(
            io.StringIO(
                ok(cli("server", "list", "--rack", "rack-12", "--output", "csv")).out
            )
        )
    )
    assert [r["name"] for r in as_csv] == R12_SERVERS
    assert (
        as_csv[0]["serial"] == "MNS0101201"
        and as_csv[0]["position"] == "1"
        and as_csv[0]["state"] == "registered"
    )
    assert as_csv[0]["tags"] == "batch-2026q3,mncore2"
    table = ok(cli("server", "list", "--rack", "rack-12")).out
    assert all(name in table for name in R12_SERVERS) and "gpu-tyo1-r11-01" not in table

    gpus = js(cli, "server", "list", "--rack", "rack-12", "--model", "gpu-8x-a100")
    assert [r["name"] for r in gpus] == [
        "gpu-tyo1-r12-17",
        "gpu-tyo1-r12-18",
        "gpu-tyo1-r12-19",
    ]
    tagged = js(cli, "server", "list", "--tag", "gpu")
    assert {r["name"] for r in tagged} == {
        f"gpu-tyo1-r11-0{i}" for i in range(1, 5)
    } | {r["name"] for r in gpus}
    assert len(js(cli, "server", "list", "--state", "registered")) == 31
    assert js(cli, "server", "list", "--state", "in-service") == []
    refused(cli("server", "list", "--rack", "rack-99"), "rack-99")


def test_other_listings_and_shows(example_loaded, cli):
    assert js(cli, "site", "list") == [
        {
            "name": "tyo1",
            "description": "Tokyo 1, hall B: MN-Core and GPU training racks",
            "racks": 4,
            "servers": 31,
        }
    ]
    site = js(cli, "site", "show", "tyo1")
    assert [r["name"] for r in site["racks"]] == [
        "rack-01",
        "rack-11",
        "rack-12",
        "rack-13",
    ]
    racks = {r["name"]: r for r in js(cli, "rack", "list")}
    assert (
        racks["rack-12"]["height"] == 48
        and racks["rack-12"]["servers"] == 19
        and racks["rack-12"]["switches"] == 3
    )
    boards = js(cli, "board", "list", "--server", "mn-tyo1-r12-01")
    assert [(b["slot"], b["kind"]) for b in boards] == [
        (0, "mncore2"),
        (1, "mncore2"),
        (2, "mncore2"),
        (3, "mncore2"),
    ]
    assert len(js(cli, "board", "list", "--rack", "rack-12", "--kind", "gpu")) == 24
    assert js(cli, "board", "show", "MN2B-01012011")["server"] == "mn-tyo1-r12-01"
    leaves = js(cli, "switch", "list", "--role", "leaf", "--rack", "rack-12")
    assert [s["name"] for s in leaves] == ["leaf-tyo1-r12-a", "leaf-tyo1-r12-b"]
    sw = js(cli, "switch", "show", "leaf-tyo1-r12-a")
    cabled = {p["port"]: p["cabled_to"] for p in sw["ports"] if p["cabled_to"]}
    assert (
        cabled["Ethernet0"] == "mn-tyo1-r12-01/eth0"
        and cabled["Ethernet120"] == "spine-tyo1-01:Ethernet24"
    )
    server = js(cli, "server", "show", "mn-tyo1-r12-01")
    assert (
        server["rack"] == "rack-12"
        and server["bmc"] == "https://mn-tyo1-r12-01-bmc.oob.tyo1.example"
        and len(server["boards"]) == 4
    )
    assert {n["name"]: (n["switch"], n["port"]) for n in server["nics"]}["eth0"] == (
        "leaf-tyo1-r12-a",
        "Ethernet0",
    )
    table = ok(cli("server", "show", "mn-tyo1-r12-01")).out
    assert "MN2B-01012010" in table and "leaf-tyo1-r12-a" in table
    refused(cli("server", "show", "nosuch"), "no server named 'nosuch'")


def test_rack_show_draws_all_48_units(example_loaded, cli):
    out = ok(cli("rack", "show", "rack-12")).out
    lines = out.splitlines()
    assert lines[0].startswith("tyo1/rack-12") and "48U" in lines[0]
    unit_lines = {
        int(line.split("|")[0].strip()[1:]): line
        for line in lines
        if line.startswith(" U")
    }
    assert sorted(unit_lines) == list(range(1, 49))
    # Top to bottom, as a rack is read.
    order = [
        int(line.split("|")[0].strip()[1:]) for line in lines if line.startswith(" U")
    ]
    assert order == list(range(48, 0, -1))
    for name in [*R12_SERVERS, "leaf-tyo1-r12-a", "leaf-tyo1-r12-b", "mgmt-tyo1-r12"]:
        assert sum(name in line for line in lines) == 1, name
    assert (
        "mn-tyo1-r12-01 (registered)" in unit_lines[2]
    )  # 2U high: the name sits on its top unit
    assert "mn-server-2" in unit_lines[1]
    assert unit_lines[45].split("|")[1].strip() == ""  # the free unit
    assert "leaf-tyo1-r12-b" in unit_lines[48]
    as_json = js(cli, "rack", "show", "rack-12")
    assert as_json["height"] == 48 and len(as_json["devices"]) == 22


# -- edits -----------------------------------------------------------------------------


def test_server_edits(example_loaded, cli):
    before = export(cli)
    # U1 holds mn-tyo1-r12-01 (2U): refused, naming it; nothing changes.
    refused(cli("server", "add", "new-1", "--rack", "rack-12", "--position", "2", "--model", "mn-server-2-1u",
                "--serial", "NEW-1"), "mn-tyo1-r12-01")  # fmt: skip
    refused(cli("server", "add", "new-1", "--rack", "rack-12", "--position", "45", "--model", "mn-server-2-1u",
                "--serial", "MNS0101201"), "serial 'MNS0101201'")  # fmt: skip
    args = ("server", "add", "new-1", "--rack", "tyo1/rack-12", "--position", "45", "--model", "mn-server-2-1u",
            "--serial", "NEW-1", "--bmc", "https://10.9.9.9", "--credential", "env:BMC_NEW", "--nic", "eth0=02:AA:00:00:00:01",
            "--tag", "spare")  # fmt: skip
    dry = ok(cli(*args, "--dry-run"))
    assert "+ server new-1" in dry.out and "would" in dry.out
    assert export(cli) == before
    ok(cli(*args))
    s = js(cli, "server", "show", "new-1")
    assert (s["rack"], s["position"], s["serial"], s["credential"], s["tags"]) == (
        "rack-12",
        45,
        "NEW-1",
        "env:BMC_NEW",
        ["spare"],
    )
    assert s["nics"][0]["mac"] == "02:aa:00:00:00:01"
    refused(cli("server", "add", "new-2", "--rack", "rack-12", "--position", "45", "--model", "mn-server-2-1u",
                "--serial", "NEW-2"), "new-1")  # fmt: skip
    refused(cli("server", "add", "new-2", "--rack", "rack-12", "--position", "49", "--model", "mn-server-2-1u",
                "--serial", "NEW-2"), "beyond")  # fmt: skip
    refused(cli("server", "add", "new-2", "--rack", "rack-12", "--position", "3", "--model", "mn-server-2-1u",
                "--serial", "NEW-2", "--bmc", "ftp://x"), "bmc: 'ftp://x' is not an https://")  # fmt: skip

    after_add = export(cli)
    refused(
        cli("server", "set", "new-1", "--position", "2", "--dry-run"), "mn-tyo1-r12-01"
    )
    dry = ok(cli("server", "set", "new-1", "--add-tag", "burnin", "--dry-run"))
    assert "~ server new-1  tags: ['spare'] -> ['burnin', 'spare']" in dry.out
    assert export(cli) == after_add
    refused(cli("server", "set", "new-1", "--position", "2"), "mn-tyo1-r12-01")
    ok(
        cli(
            "server",
            "set",
            "new-1",
            "--add-tag",
            "burnin",
            "--remove-tag",
            "spare",
            "--nic",
            "eth1=02:aa:00:00:00:02",
        )
    )
    s = js(cli, "server", "show", "new-1")
    assert s["tags"] == ["burnin"] and [n["name"] for n in s["nics"]] == [
        "eth0",
        "eth1",
    ]
    ok(cli("server", "set", "new-1", "--rack", "rack-13", "--position", "20"))
    assert (
        js(cli, "server", "show", "new-1")["rack"],
        js(cli, "server", "show", "new-1")["position"],
    ) == ("rack-13", 20)

    # Removal: an in-service server needs --force.
    from sqlalchemy import text

    from fleetctl.store import get_engine

    with get_engine(example_loaded).begin() as c:
        c.execute(text("UPDATE server SET state = 'in-service' WHERE name = 'new-1'"))
    refused(cli("server", "remove", "new-1"), "in service", "--force")
    ok(cli("server", "remove", "new-1", "--force", "--dry-run"))
    assert "new-1" in export(cli)
    ok(cli("server", "remove", "new-1", "--force", "--reason", "decommissioned"))
    assert export(cli) == before
    refused(cli("server", "show", "new-1"), "new-1")
    # Removing a cabled server takes its cables and boards along.
    ok(cli("server", "remove", "mn-tyo1-r12-02"))
    assert "MN2B-01012030" in before  # mn-tyo1-r12-02's first board
    assert "mn-tyo1-r12-02" not in export(cli) and "MN2B-01012030" not in export(cli)
    events = js(cli, "events", "list")
    assert [e["action"] for e in events[:3]] == [
        "server.remove",
        "server.remove",
        "server.set",
    ]
    assert events[1]["reason"] == "decommissioned" and events[0]["actor"] == "tester@ci"


def test_rack_site_switch_board_edits(example_loaded, cli):
    # site
    before = export(cli)
    ok(cli("site", "add", "osa1", "--description", "Osaka", "--dry-run"))
    assert export(cli) == before
    ok(cli("site", "add", "osa1", "--description", "Osaka"))
    refused(cli("site", "add", "osa1"), "exists")
    ok(cli("site", "set", "osa1", "--description", "Osaka 1"))
    assert {s["name"]: s["description"] for s in js(cli, "site", "list")}[
        "osa1"
    ] == "Osaka 1"

    # rack: the same name in two sites makes a bare name ambiguous
    ok(cli("rack", "add", "rack-12", "--site", "osa1", "--height", "42", "--dry-run"))
    assert js(cli, "rack", "list", "--site", "osa1") == []
    ok(
        cli(
            "rack",
            "add",
            "rack-12",
            "--site",
            "osa1",
            "--height",
            "42",
            "--power-budget",
            "9000",
        )
    )
    refused(
        cli("server", "list", "--rack", "rack-12"),
        "ambiguous",
        "osa1/rack-12",
        "tyo1/rack-12",
    )
    refused(cli("rack", "show", "rack-12"), "ambiguous")
    assert js(cli, "server", "list", "--rack", "osa1/rack-12") == []
    assert len(js(cli, "server", "list", "--rack", "tyo1/rack-12")) == 19
    ok(cli("rack", "set", "osa1/rack-12", "--height", "44", "--row", "C"))
    assert js(cli, "rack", "show", "osa1/rack-12")["height"] == 44
    refused(cli("rack", "set", "tyo1/rack-12", "--height", "40"), "beyond")
    refused(
        cli("rack", "remove", "tyo1/rack-12"), "still holds 19 servers and 3 switches"
    )
    refused(cli("site", "remove", "osa1"), "still has 1 racks")
    ok(cli("rack", "remove", "osa1/rack-12", "--dry-run"))
    assert len(js(cli, "rack", "list", "--site", "osa1")) == 1
    ok(cli("rack", "remove", "osa1/rack-12"))
    ok(cli("site", "remove", "osa1"))
    assert [s["name"] for s in js(cli, "site", "list")] == ["tyo1"]

    # switch
    ok(cli("switch", "add", "mgmt-new", "--rack", "tyo1/rack-12", "--position", "45", "--model", "dcs-7050sx3",
           "--platform", "eos", "--role", "management", "--address", "10.201.12.99", "--dry-run"))  # fmt: skip
    assert all(s["name"] != "mgmt-new" for s in js(cli, "switch", "list"))
    refused(cli("switch", "add", "mgmt-new", "--rack", "tyo1/rack-12", "--position", "45", "--model", "mn-server-2",
                "--platform", "eos", "--role", "management", "--address", "10.201.12.99"), "not a switch model")  # fmt: skip
    refused(cli("switch", "add", "mgmt-new", "--rack", "tyo1/rack-12", "--position", "45", "--model", "dcs-7050sx3",
                "--platform", "eos", "--role", "management", "--address", "10.201.12.1"), "10.201.12.1")  # fmt: skip
    ok(cli("switch", "add", "mgmt-new", "--rack", "tyo1/rack-12", "--position", "45", "--model", "dcs-7050sx3",
           "--platform", "eos", "--role", "management", "--address", "10.201.12.99"))  # fmt: skip
    ok(cli("switch", "set", "mgmt-new", "--address", "10.201.12.98"))
    assert js(cli, "switch", "show", "mgmt-new")["address"] == "10.201.12.98"
    ok(cli("switch", "remove", "leaf-tyo1-r12-b"))
    names = {s["name"] for s in js(cli, "switch", "list")}
    assert "leaf-tyo1-r12-b" not in names and "mgmt-new" in names
    assert "leaf-tyo1-r12-b" not in export(cli)  # its cables went with it

    # board
    ok(cli("board", "remove", "MN2B-01012013", "--dry-run"))
    assert len(js(cli, "board", "list", "--server", "mn-tyo1-r12-01")) == 4
    ok(cli("board", "remove", "MN2B-01012013"))
    refused(
        cli("board", "add", "NEWB", "--server", "mn-tyo1-r12-01", "--slot", "0"),
        "slot 0",
    )
    refused(
        cli(
            "board",
            "add",
            "NEWB",
            "--server",
            "mn-tyo1-r12-01",
            "--slot",
            "3",
            "--kind",
            "gpu",
        ),
        "holds mncore2",
    )
    ok(
        cli(
            "board",
            "add",
            "NEWB",
            "--server",
            "mn-tyo1-r12-01",
            "--slot",
            "3",
            "--pci",
            "0000:BE:00.0",
        )
    )
    assert js(cli, "board", "show", "NEWB")["pci"] == "0000:be:00.0"
    refused(
        cli("board", "set", "NEWB", "--server", "mn-tyo1-r12-03", "--slot", "4"),
        "declares 5 boards",
    )
    ok(cli("board", "remove", "MN2B-01012053"))  # mn-tyo1-r12-03's slot 3
    ok(
        cli(
            "board",
            "set",
            "NEWB",
            "--server",
            "mn-tyo1-r12-03",
            "--slot",
            "3",
            "--dry-run",
        )
    )
    assert js(cli, "board", "show", "NEWB")["server"] == "mn-tyo1-r12-01"
    ok(cli("board", "set", "NEWB", "--server", "mn-tyo1-r12-03", "--slot", "3"))
    assert (
        js(cli, "board", "show", "NEWB")["server"],
        js(cli, "board", "show", "NEWB")["slot"],
    ) == ("mn-tyo1-r12-03", 3)

    ok(cli("board", "set", "NEWB", "--state", "suspect", "--dry-run"))
    assert js(cli, "board", "show", "NEWB")["state"] == "ok"
    r = ok(cli("board", "set", "NEWB", "--state", "suspect", "--reason", "ECC errors"))
    assert "ok -> suspect" in r.out
    assert js(cli, "board", "show", "NEWB")["state"] == "suspect"
    assert [b["serial"] for b in js(cli, "board", "list", "--state", "suspect")] == [
        "NEWB"
    ]
    event = js(cli, "events", "list", "--name", "NEWB")[0]
    assert (event["action"], event["object"], event["detail"], event["reason"]) == (
        "board.state", "board NEWB", "ok -> suspect", "ECC errors")  # fmt: skip
    refused(cli("board", "set", "NEWB", "--state", "melted"), "not a board state")


# -- exit codes ------------------------------------------------------------------------


def test_exit_codes(cli):
    assert cli("--help").code == 0
    assert "server" in cli("--help").out
    assert cli("frobnicate").code == 2
    assert cli("server", "list", "--colour", "red").code == 2
    assert cli("server", "list", "--output", "xml").code == 2
    assert cli("server", "add", "x").code == 2  # missing required options
    r = cli("server", "show", "nosuch")
    assert r.code == 2 and r.err.strip() == "error: no server named 'nosuch'"


def test_debug_shows_a_traceback_for_an_expected_error(tmp_path):
    env = {**os.environ, "FLEETCTL_DB": str(tmp_path / "sub.db")}
    quiet = subprocess.run(
        [FLEETCTL, "server", "show", "nosuch"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert quiet.returncode == 2 and "Traceback" not in quiet.stderr
    loud = subprocess.run(
        [FLEETCTL, "--debug", "server", "show", "nosuch"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert loud.returncode != 0
    assert "Traceback" in loud.stderr and "NotFound" in loud.stderr


# -- concurrency -----------------------------------------------------------------------

SITE_B = """\
sites:
- name: labB
  racks:
  - name: rb
    servers:
    - name: b-{i}
      serial: SB-{i}
      model: m1
      position: {i}
"""
MODELS = "models:\n- {name: m1, kind: server, vendor: Acme, model: M1, height: 1}\n"


def test_two_processes_import_at_once_on_sqlite(tmp_path):
    db = tmp_path / "shared.db"
    env = {**os.environ, "FLEETCTL_DB": str(db), "FLEETCTL_ACTOR": "proc@ci"}
    (tmp_path / "models.yaml").write_text(MODELS)
    subprocess.run(
        [FLEETCTL, "inventory", "import", str(tmp_path / "models.yaml")],
        check=True,
        env=env,
        capture_output=True,
        timeout=60,
    )
    # Same file twice (one applies, the other finds nothing to change), and two different sites.
    site_a = tmp_path / "a.yaml"
    site_a.write_text(
        SITE_B.replace("labB", "labA")
        .replace("rb", "ra")
        .replace("b-{i}", "a-{i}")
        .replace("SB-", "SA-")
        .format(i=1)
    )
    site_b = tmp_path / "b.yaml"
    site_b.write_text(SITE_B.format(i=2))
    runs = [site_a, site_a, site_b]
    procs = [subprocess.Popen([FLEETCTL, "inventory", "import", str(p)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for p in runs]  # fmt: skip
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    for code, _out, err in results:
        # Both succeed, or one reports cleanly: never a traceback or a half import.
        assert code in (0, 1), err
        assert "Traceback" not in err and "internal error" not in err
        if code == 1:
            assert len(err.strip().splitlines()) == 1
    assert results[2][0] == 0, results[2]
    a_outs = [r for r in results[:2] if r[0] == 0]
    assert sum("applied" in r[1] for r in a_outs) == 1 or any(
        r[0] == 1 for r in results[:2]
    )
    listing = subprocess.run(
        [FLEETCTL, "server", "list", "--output", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert {s["name"] for s in json.loads(listing.stdout)} == {"a-1", "b-2"}
    events = subprocess.run(
        [FLEETCTL, "events", "list", "--output", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    # One audit event per applied import: the models, then each site (a small
    # change names its objects, so each event names what it added).
    objects = sorted(e["object"] for e in json.loads(events.stdout))
    assert len(objects) == 3, objects
    assert any("model m1" in o for o in objects)
    assert any("labA" in o and "a-1" in o for o in objects)
    assert any("labB" in o and "b-2" in o for o in objects)
