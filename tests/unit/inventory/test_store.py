"""The store: automatic migration, db commands, WAL, the rack_unit primary key."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import insert, inspect, select
from sqlalchemy.exc import IntegrityError

from fleetctl.models import RackUnit, Server
from fleetctl.store import HEAD


def test_a_fresh_sqlite_database_is_migrated_on_first_use(cli, tmp_path, monkeypatch):
    db = tmp_path / "deep" / "folder" / "new.db"
    monkeypatch.setenv("FLEETCTL_DB", str(db))
    r = cli("server", "list", "--output", "json")
    assert r.code == 0, r.err
    assert r.out.strip() == "[]"
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT version_num FROM alembic_version").fetchone() == (HEAD,)
        tables = {
            row[0]
            for row in c.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    assert {
        "server",
        "rack",
        "rack_unit",
        "accelerator_board",
        "link",
        "event",
        "nic",
    } <= tables


def test_sqlite_is_in_wal_mode(cli, tmp_path):
    assert (
        cli("site", "list").code == 0
    )  # FLEETCTL_DB is tmp_path/fleet.db (tests/conftest.py)
    with sqlite3.connect(tmp_path / "fleet.db") as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_db_upgrade_and_info(db_url, cli):
    r = cli("db", "upgrade")
    assert r.code == 0, r.err
    assert f"schema at revision {HEAD} (head {HEAD})" in r.out
    r = cli("db", "info")
    assert r.code == 0, r.err
    assert f"revision: {HEAD}" in r.out
    assert (
        "dialect: sqlite" if db_url.startswith("sqlite") else "dialect: postgresql"
    ) in r.out


def test_db_commands_hide_the_password(db_url, cli, monkeypatch):
    if db_url.startswith("sqlite"):
        pytest.skip("a SQLite URL has no password")
    from sqlalchemy.engine import make_url

    # The local server trusts the socket, so the password is carried but not needed.
    url = (
        make_url(db_url)
        .set(password="Hunter2-db-secret")
        .render_as_string(hide_password=False)
    )
    monkeypatch.setenv("FLEETCTL_DB", url)
    for args in (("db", "info"), ("db", "upgrade")):
        r = cli(*args)
        assert r.code == 0, r.err
        assert "Hunter2-db-secret" not in r.out + r.err
        assert "***" in r.out


def test_unreachable_database_is_one_line_not_a_traceback(cli, monkeypatch):
    monkeypatch.setenv(
        "FLEETCTL_DB",
        "postgresql+psycopg://u:Hunter2-db-secret@127.0.0.1:1/none?connect_timeout=2",
    )
    r = cli("server", "list")
    assert r.code != 0
    assert "Traceback" not in r.err and "Hunter2-db-secret" not in r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert "cannot open database" in r.err and "Connection refused" in r.err


def test_a_long_error_is_not_wrapped(cli, tmp_path):
    deep = tmp_path / ("x" * 120) / ("y" * 120) / "missing-site-file.yaml"
    r = cli("inventory", "import", str(deep))
    assert r.code == 2
    assert r.err.count("\n") == 1 and str(deep) in r.err


def test_rack_unit_primary_key_refuses_two_devices_in_one_unit(base_loaded):
    from fleetctl.store import get_engine

    ru, srv = RackUnit.__table__, Server.__table__
    engine = get_engine(base_loaded)
    with engine.connect() as c:
        units = {(r.unit, r.server_id, r.switch_id) for r in c.execute(select(ru))}
        ids = dict(c.execute(select(srv.c.name, srv.c.id)).all())
        rack_id = c.execute(
            select(srv.c.rack_id).where(srv.c.name == "s1")
        ).scalar_one()
    # BASE: s1 at U1, s2 (2U) at U2-U3, sw1 at U10.
    assert {(u, s) for u, s, _ in units if s} == {
        (1, ids["s1"]),
        (2, ids["s2"]),
        (3, ids["s2"]),
    }
    assert {u for u, _, w in units if w} == {10}
    with pytest.raises(IntegrityError), engine.begin() as c:
        c.execute(
            insert(ru).values(
                rack_id=rack_id, unit=1, server_id=ids["s2"], switch_id=None
            )
        )
    with engine.connect() as c:
        assert (
            c.execute(select(ru).where(ru.c.unit == 1)).all()[0].server_id == ids["s1"]
        )
    assert "rack_unit" in inspect(engine).get_table_names()
