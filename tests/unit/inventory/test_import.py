"""Import semantics: all or nothing, idempotent, dry runs, changes and removals applied."""

from __future__ import annotations

import json

from invtest_sites import BASE, replace_once
from sqlalchemy import text


def _events(cli) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    r = cli("events", "list", "--limit", "1000", "--output", "json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def _servers(cli) -> dict[str, dict]:  # type: ignore[no-untyped-def,type-arg]
    r = cli("server", "list", "--output", "json")
    assert r.code == 0, r.err
    return {s["name"]: s for s in json.loads(r.out)}


def _sql(db_url: str, statement: str, **params):  # type: ignore[no-untyped-def]
    from fleetctl.store import get_engine

    with get_engine(db_url).begin() as c:
        return c.execute(text(statement), params)


# A second, independent site in its own file (uses BASE's models).
SITE2 = """\
sites:
- name: lab2
  racks:
  - name: q1
    servers:
    - name: z1
      serial: ZZ-1
      model: srv1u
      position: 1
"""


def test_import_is_all_or_nothing_across_files(db_url, cli, write, export, tmp_path):
    write(BASE, "a.yaml", "folder")
    bad = write(
        replace_once(SITE2, "      position: 1\n", "      position: 0\n"),
        "b.yaml",
        "folder",
    )
    before = export()
    r = cli("inventory", "import", str(tmp_path / "folder"))
    assert r.code == 2
    assert str(bad) in r.err and "servers[0].position" in r.err
    assert export() == before
    assert _servers(cli) == {}
    assert cli("site", "list", "--output", "json").out.strip() == "[]"
    assert _events(cli) == []


def test_folder_import_takes_every_file(db_url, cli, write, tmp_path):
    write(BASE, "a.yaml", "folder")
    write(SITE2, "b.yml", "folder/sub")
    r = cli("inventory", "import", str(tmp_path / "folder"))
    assert r.code == 0, r.err
    assert set(_servers(cli)) == {"s1", "s2", "z1"}


def test_import_is_idempotent(db_url, cli, write, export):
    path = write(BASE)
    first = cli("inventory", "import", str(path))
    assert first.code == 0, first.err
    assert "applied:" in first.out and "server: 2 add" in first.out
    events = _events(cli)
    assert (
        len(events) == 1
        and events[0]["action"] == "inventory.import"
        and events[0]["actor"] == "tester@ci"
    )
    snapshot = export()
    again = cli("inventory", "import", str(path))
    assert again.code == 0, again.err
    assert again.out.strip() == "nothing to change"
    assert _events(cli) == events
    assert export() == snapshot


def test_dry_run_prints_the_plan_and_changes_nothing(db_url, cli, write, export):
    path = write(BASE)
    empty = export()
    r = cli("inventory", "import", "--dry-run", str(path))
    assert r.code == 0, r.err
    for line in (
        "+ server s1",
        "+ server s2",
        "+ board B-1",
        "+ switch sw1",
        "+ cable sw1:Ethernet1",
        "+ rack lab1/r1",
    ):
        assert line in r.out
    assert "dry run" in r.out
    assert export() == empty
    assert _events(cli) == []

    r = cli("inventory", "import", "--dry-run", "--output", "json", str(path))
    assert r.code == 0, r.err
    plan = json.loads(r.out)
    assert plan["dry_run"] is True
    adds = {(c["kind"], c["name"]) for c in plan["changes"] if c["action"] == "add"}
    assert {
        ("server", "s1"),
        ("server", "s2"),
        ("board", "B-2"),
        ("cable", "sw1:Ethernet2"),
        ("model", "sw8"),
    } <= adds
    assert len(plan["changes"]) == 3 + 1 + 1 + 2 + 2 + 1 + 2
    assert export() == empty


def _edited() -> str:
    """BASE with s2 moved to U4, s1 (its boards and cable) removed, and s2's cable on VLAN 200."""
    t = replace_once(BASE, "      position: 2\n", "      position: 4\n")
    start, end = t.index("    - name: s1\n"), t.index("    - name: s2\n")
    t = t[:start] + t[end:]
    t = replace_once(
        t,
        "  - switch: sw1\n    port: Ethernet1\n    server: s1\n    nic: eth0\n    vlans:\n    - 100\n",
        "",
    )
    return t[: t.rindex("    - 100\n")] + "    - 200\n"


def test_changes_and_removals_are_planned_then_applied(base_loaded, cli, write, export):
    path = write(_edited())
    before = export()
    r = cli("inventory", "import", "--dry-run", "--output", "json", str(path))
    assert r.code == 0, r.err
    changes = {
        (c["action"], c["kind"], c["name"]): c.get("fields")
        for c in json.loads(r.out)["changes"]
    }
    assert changes == {
        ("change", "server", "s2"): {"position": {"from": 2, "to": 4}},
        ("remove", "server", "s1"): None,
        ("remove", "board", "B-1"): None,
        ("remove", "board", "B-2"): None,
        ("remove", "cable", "sw1:Ethernet1"): None,
        ("change", "cable", "sw1:Ethernet2"): {"vlans": {"from": [100], "to": [200]}},
    }
    table = cli("inventory", "import", "--dry-run", str(path))
    assert "~ server s2  position: 2 -> 4" in table.out and "- server s1" in table.out
    assert export() == before

    r = cli("inventory", "import", str(path))
    assert r.code == 0, r.err
    servers = _servers(cli)
    assert set(servers) == {"s2"} and servers["s2"]["position"] == 4
    assert cli("board", "list", "--output", "json").out.strip() == "[]"
    s2 = json.loads(cli("server", "show", "s2", "--output", "json").out)
    eth0 = next(n for n in s2["nics"] if n["name"] == "eth0")
    assert (eth0["switch"], eth0["port"], eth0["vlans"]) == ("sw1", "Ethernet2", "200")
    # The freed units are free in the database too (rack_unit was rebuilt).
    r = cli(
        "server",
        "add",
        "n1",
        "--rack",
        "r1",
        "--position",
        "2",
        "--model",
        "srv2u",
        "--serial",
        "N-1",
    )
    assert r.code == 0, r.err
    assert (
        cli("inventory", "import", str(path)).code == 0
    )  # n1 is not in the file: removed again
    assert set(_servers(cli)) == {"s2"}


def test_lifecycle_state_in_the_file_is_used_only_on_creation(db_url, cli, write):
    path = write(
        replace_once(
            BASE,
            "      serial: SER-1\n",
            "      serial: SER-1\n      state: in-service\n",
        )
    )
    assert cli("inventory", "import", str(path)).code == 0
    assert _servers(cli)["s1"]["state"] == "in-service"
    assert _servers(cli)["s2"]["state"] == "registered"
    # The lifecycle moves s2 on; a file saying otherwise does not move it back.
    _sql(db_url, "UPDATE server SET state = 'ready' WHERE name = 's2'")
    path2 = write(
        replace_once(
            BASE,
            "      serial: SER-1\n",
            "      serial: SER-1\n      state: maintenance\n",
        ),
        "b.yaml",
    )
    r = cli("inventory", "import", str(path2))
    assert r.code == 0 and r.out.strip() == "nothing to change"
    states = {n: s["state"] for n, s in _servers(cli).items()}
    assert states == {"s1": "in-service", "s2": "ready"}


FP = "ab" * 32


def test_pinned_fingerprint_is_kept_when_the_file_leaves_it_out(
    base_loaded, cli, write
):
    # Pinned later (as a first contact with the BMC would), not by the file.
    _sql(
        base_loaded, "UPDATE server SET bmc_fingerprint = :fp WHERE name = 's1'", fp=FP
    )
    r = cli("inventory", "import", str(write(BASE)))
    assert r.code == 0 and r.out.strip() == "nothing to change", r.out
    assert (
        json.loads(cli("server", "show", "s1", "--output", "json").out)["fingerprint"]
        == FP
    )
    # A file that names another fingerprint does replace it.
    other = "cd" * 32
    r = cli(
        "inventory",
        "import",
        str(
            write(
                replace_once(
                    BASE,
                    "      credential: env:BMC_LAB\n",
                    f"      credential: env:BMC_LAB\n      fingerprint: {other}\n",
                ),
                "b.yaml",
            )
        ),
    )
    assert r.code == 0 and "fingerprint" in r.out
    assert (
        json.loads(cli("server", "show", "s1", "--output", "json").out)["fingerprint"]
        == other
    )


def _boards(cli) -> dict[str, tuple]:  # type: ignore[no-untyped-def,type-arg]
    return {
        b["serial"]: (b["server"], b["slot"])
        for b in json.loads(cli("board", "list", "--output", "json").out)
    }


def _macs(cli, name: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {
        n["name"]: n["mac"]
        for n in json.loads(cli("server", "show", name, "--output", "json").out)["nics"]
    }


def test_swap_board_slots_and_swap_macs_in_one_import(base_loaded, cli, write):
    t = replace_once(
        BASE,
        "      - serial: B-1\n        slot: 0\n",
        "      - serial: B-1\n        slot: 1\n",
    )
    t = replace_once(
        t,
        "      - serial: B-2\n        slot: 1\n",
        "      - serial: B-2\n        slot: 0\n",
    )
    t = replace_once(t, "mac: 02:00:00:00:00:02", "mac: 02:00:00:00:00:XX")
    t = replace_once(t, "mac: 02:00:00:00:00:03", "mac: 02:00:00:00:00:02").replace(
        "02:00:00:00:00:XX", "02:00:00:00:00:03"
    )
    r = cli("inventory", "import", str(write(t)))
    assert r.code == 0, r.err
    assert _boards(cli) == {"B-1": ("s1", 1), "B-2": ("s1", 0)}
    assert _macs(cli, "s2") == {
        "eth0": "02:00:00:00:00:03",
        "eth1": "02:00:00:00:00:02",
    }
    assert cli("inventory", "import", str(write(t))).out.strip() == "nothing to change"


def test_mac_moves_from_an_earlier_server_to_a_later_one(base_loaded, cli, write):
    # s1/eth0's MAC goes to s2/eth1; s1/eth0 gets a new one.
    t = replace_once(BASE, "mac: 02:00:00:00:00:03", "mac: 02:00:00:00:00:01")
    t = replace_once(
        t,
        "        mac: 02:00:00:00:00:01\n      boards:",
        "        mac: 02:00:00:00:00:09\n      boards:",
    )
    r = cli("inventory", "import", str(write(t)))
    assert r.code == 0, r.err
    assert _macs(cli, "s1") == {"eth0": "02:00:00:00:00:09"}
    assert _macs(cli, "s2")["eth1"] == "02:00:00:00:00:01"


def test_mac_moves_from_a_later_server_to_an_earlier_one(base_loaded, cli, write):
    # s2/eth1's MAC goes to s1/eth0; s2/eth1 gets a new one.
    t = replace_once(
        BASE,
        "        mac: 02:00:00:00:00:01\n      boards:",
        "        mac: 02:00:00:00:00:03\n      boards:",
    )
    t = replace_once(
        t,
        "        mac: 02:00:00:00:00:03\n    switches:",
        "        mac: 02:00:00:00:00:09\n    switches:",
    )
    r = cli("inventory", "import", str(write(t)))
    assert r.code == 0, r.err
    assert _macs(cli, "s1") == {"eth0": "02:00:00:00:00:03"}
    assert _macs(cli, "s2")["eth1"] == "02:00:00:00:00:09"


def test_board_moves_between_servers(base_loaded, cli, write):
    # B-2 leaves s1 for s2 (a 2U model without a board kind: kind given).
    t = replace_once(BASE, "      - serial: B-2\n        slot: 1\n", "")
    t = replace_once(
        t,
        "        mac: 02:00:00:00:00:03\n    switches:",
        "        mac: 02:00:00:00:00:03\n      boards:\n      - serial: B-2\n        slot: 0\n        kind: mncore2\n    switches:",
    )
    r = cli("inventory", "import", str(write(t)))
    assert r.code == 0, r.err
    assert _boards(cli) == {"B-1": ("s1", 0), "B-2": ("s2", 0)}


def test_two_servers_swap_serials(base_loaded, cli, write):
    t = replace_once(BASE, "serial: SER-1", "serial: SER-X")
    t = replace_once(t, "serial: SER-2", "serial: SER-1").replace("SER-X", "SER-2")
    r = cli("inventory", "import", str(write(t)))
    assert r.code == 0, r.err
    assert {n: s["serial"] for n, s in _servers(cli).items()} == {
        "s1": "SER-2",
        "s2": "SER-1",
    }
