"""A board's identity (issue 20, items 3 and 4): (serial, position) where boards share a serial,
its slot where the BMC reports no serial; site files, validation, apply and export, migration 0009."""

from __future__ import annotations

import json

import yaml
from invtest_sites import BASE
from sqlalchemy import create_engine, text

# Two GPUs of one superchip module share a serial (NVIDIA GB200/GB300): positions 1 and 2.
SHARED = BASE.replace(
    """      - serial: B-1
        slot: 0
      - serial: B-2
        slot: 1
""",
    """      - serial: MOD-1
        position: 1
        slot: 0
      - serial: MOD-1
        position: 2
        slot: 1
""",
)


def test_boards_sharing_a_serial_import_apply_and_export_round_trip(base_loaded, cli, write, export):  # type: ignore[no-untyped-def]
    r = cli("inventory", "import", str(write(SHARED, "shared.yaml")))
    assert r.code == 0, r.err
    out = export()
    s1 = yaml.safe_load(out)["sites"][0]["racks"][0]["servers"][0]
    assert [(b["serial"], b.get("position"), b["slot"]) for b in s1["boards"]] == [("MOD-1", 1, 0), ("MOD-1", 2, 1)]
    assert "B-1" not in out
    # exported, imported again: nothing to change
    r = cli("inventory", "import", str(write(out, "again.yaml", "again")), "--dry-run", "--output", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["changes"] == []
    # the two boards change places: parked, then swapped, on the (serial, position) key
    swapped = SHARED.replace("position: 1\n        slot: 0", "position: 1\n        slot: 9").replace(
        "position: 2\n        slot: 1", "position: 2\n        slot: 0").replace("slot: 9", "slot: 1")  # fmt: skip
    r = cli("inventory", "import", str(write(swapped, "swapped.yaml", "swapped")))
    assert r.code == 0, r.err
    boards = json.loads(cli("server", "show", "s1", "--output", "json").out)["boards"]
    assert sorted((b["serial"], b["slot"]) for b in boards) == [("MOD-1", 0), ("MOD-1", 1)]
    # back to serials of their own: the shared rows go, B-1 and B-2 come back
    r = cli("inventory", "import", str(write(BASE, "base2.yaml", "base2")))
    assert r.code == 0, r.err
    assert "MOD-1" not in export() and "B-1" in export()


def test_a_board_key_taken_twice_or_a_serial_alone_and_shared_is_refused(base_loaded, cli, write):  # type: ignore[no-untyped-def]
    twice = SHARED.replace("position: 2", "position: 1")
    r = cli("inventory", "import", str(write(twice, "twice.yaml")))
    assert r.code == 2 and "board serial and position ('MOD-1', 1) is already used" in r.err, r.err
    mixed = SHARED.replace("        position: 2\n", "")
    r = cli("inventory", "import", str(write(mixed, "mixed.yaml", "mixed")))
    assert r.code == 2 and "board serial 'MOD-1' is given without a position here and with one" in r.err, r.err


def test_migration_0009_keeps_boards_and_lets_a_serial_be_shared(db_url, cli, write):  # type: ignore[no-untyped-def]
    from alembic import command
    from sqlalchemy.exc import IntegrityError

    from fleetctl.store import HEAD, alembic_config, current_revision, get_engine, reset_engines

    r = cli("inventory", "import", str(write(BASE, "base.yaml")))
    assert r.code == 0, r.err
    get_engine(db_url)
    reset_engines()
    engine = create_engine(db_url)
    with engine.begin() as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0008")
    assert current_revision(engine) == "0008"
    with engine.begin() as conn:  # at 0008 a serial is unique alone
        sid = conn.execute(text("SELECT server_id FROM accelerator_board WHERE serial = 'B-1'")).scalar()
    engine.dispose()
    # any command upgrades it; the boards are kept, without a position
    r = cli("server", "show", "s1", "--output", "json")
    assert r.code == 0, r.err
    assert sorted(b["serial"] for b in json.loads(r.out)["boards"]) == ["B-1", "B-2"]
    engine = create_engine(db_url)
    assert current_revision(engine) == HEAD
    with engine.begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM accelerator_board WHERE position IS NULL")).scalar() == 2
        ins = (
            "INSERT INTO accelerator_board (kind, serial, position, server_id, slot, firmware, state) "
            "VALUES ('gpu', :s, :p, :sid, :slot, '{}', 'ok')"
        )
        conn.execute(text(ins), {"s": "MOD-9", "p": 1, "sid": sid, "slot": 5})
        conn.execute(text(ins), {"s": "MOD-9", "p": 2, "sid": sid, "slot": 6})
    for serial, position, slot in (("MOD-9", 2, 7), ("B-1", None, 8)):  # the same key twice: refused
        try:
            with engine.begin() as conn:
                conn.execute(text(ins), {"s": serial, "p": position, "sid": sid, "slot": slot})
        except IntegrityError:
            continue
        raise AssertionError(f"({serial}, {position}) inserted twice")
    engine.dispose()


def test_a_board_sharing_a_serial_is_named_serial_slash_position(base_loaded, cli, write):  # type: ignore[no-untyped-def]
    r = cli("inventory", "import", str(write(SHARED, "shared.yaml")))
    assert r.code == 0, r.err
    r = cli("board", "set", "MOD-1", "--state", "suspect")
    assert r.code == 2 and "2 boards share serial 'MOD-1': name one (MOD-1/1, MOD-1/2)" in r.err, r.err
    r = cli("board", "set", "MOD-1/2", "--state", "suspect")
    assert r.code == 0, r.err
    shown = json.loads(cli("board", "show", "MOD-1/2", "--output", "json").out)
    assert (shown["serial"], shown["position"], shown["state"]) == ("MOD-1", 2, "suspect")
    assert json.loads(cli("board", "show", "MOD-1/1", "--output", "json").out)["state"] == "ok"
    r = cli("board", "set", "MOD-1/1", "--slot", "7")
    assert r.code == 0, r.err + r.out
    r = cli("board", "remove", "MOD-1/2")
    assert r.code == 0, r.err + r.out
    boards = json.loads(cli("server", "show", "s1", "--output", "json").out)["boards"]
    assert [(b["serial"], b["position"], b["slot"]) for b in boards] == [("MOD-1", 1, 7)]
