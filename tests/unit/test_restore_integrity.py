"""`db restore` checks what it restores before it replaces anything (issue #25, items 2, 3 and 13).

On both backends: a backup with 8 KiB of random bytes in its middle, one with a
table dropped (its schema revision left as it was), one with a column
dropped, one cut in half, and one of the other backend are each refused with
exit 2 and one line, and the live inventory is left as it was (its content,
and SQLite's own check of the file). The damaged backups are made here from a
good backup of the example site (no public recording of such a file exists:
they are hand-made by the test, seeded so every run damages the same bytes).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import sqlite3
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from fleetctl.store import HEAD  # the schema revision this code migrates to
from tests.conftest import new_pg_database

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "inventory"


def _needs_pg_tools(url: str) -> None:
    if url.startswith("postgresql") and not all(shutil.which(t) for t in ("pg_dump", "pg_restore", "psql")):
        pytest.skip("the PostgreSQL client programs (pg_dump, pg_restore, psql) are not on PATH")


def _export(cli) -> str:  # type: ignore[no-untyped-def]
    r = cli("inventory", "export")
    assert r.code == 0, r.err
    return r.out


def _good_backup(cli, tmp_path: Path) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    """The example site imported and backed up: the backup, and the live inventory as exported."""
    r = cli("inventory", "import", str(EXAMPLE))
    assert r.code == 0, r.err
    backup = tmp_path / "good.backup"
    r = cli("db", "backup", str(backup))
    assert r.code == 0, r.err
    return backup, _export(cli)


def _assert_refused(cli, url: str, backup: Path, before: str, *words: str) -> str:  # type: ignore[no-untyped-def]
    """Restore ``backup`` --yes: exit 2, one line naming the file and ``words``; the live inventory unchanged."""
    r = cli("db", "restore", str(backup), "--yes")
    assert r.code == 2, (r.out, r.err)
    err = r.err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {backup}: "), err
    for word in words:
        assert word in err, err
    assert r.out == ""
    assert _export(cli) == before
    if url.startswith("sqlite"):
        live = sqlite3.connect(os.environ["FLEETCTL_DB"].removeprefix("sqlite:///"))
        try:
            assert live.execute("PRAGMA quick_check").fetchall() == [("ok",)]
        finally:
            live.close()
    return err


def _damage_middle(path: Path, out: Path) -> Path:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8192] = random.Random(25).randbytes(8192)
    out.write_bytes(bytes(data))
    return out


def _pg_dump(url: str, out: Path) -> Path:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    dsn = u.set(drivername="postgresql").render_as_string(hide_password=False)
    subprocess.run(["pg_dump", "--format=custom", "--no-owner", f"--file={out}", dsn], check=True, capture_output=True)
    return out


def _without(url: str, cli, tmp_path: Path, statement: str) -> Path:  # type: ignore[no-untyped-def]
    """A backup of another inventory (the example site) after ``statement``, its revision row intact."""
    if url.startswith("sqlite"):
        backup = tmp_path / "without.backup"
        shutil.copy(tmp_path / "good.backup", backup)
        db = sqlite3.connect(backup)
        db.execute(statement)
        db.commit()
        db.close()
        return backup
    other = new_pg_database()
    old = os.environ["FLEETCTL_DB"]
    try:
        os.environ["FLEETCTL_DB"] = other
        assert cli("inventory", "import", str(EXAMPLE)).code == 0
    finally:
        os.environ["FLEETCTL_DB"] = old
    engine = create_engine(other)
    with engine.begin() as conn:
        conn.execute(text(statement + (" CASCADE" if statement.startswith("DROP TABLE") else "")))
    engine.dispose()
    return _pg_dump(other, tmp_path / "without.backup")


def test_a_backup_with_a_damaged_middle_is_refused(db_url, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _needs_pg_tools(db_url)
    backup, before = _good_backup(cli, tmp_path)
    damaged = _damage_middle(backup, tmp_path / "damaged.backup")
    _assert_refused(cli, db_url, damaged, before, "damaged", "nothing was restored")


def test_a_backup_cut_in_half_is_refused(db_url, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _needs_pg_tools(db_url)
    backup, before = _good_backup(cli, tmp_path)
    cut = tmp_path / "cut.backup"
    data = backup.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    _assert_refused(cli, db_url, cut, before)


def test_a_backup_with_a_table_dropped_is_refused_naming_it(db_url, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _needs_pg_tools(db_url)
    _backup, before = _good_backup(cli, tmp_path)
    dropped = _without(db_url, cli, tmp_path, "DROP TABLE server")
    _assert_refused(cli, db_url, dropped, before, "table server is missing", f"schema revision {HEAD}", "nothing was restored")


def test_a_backup_with_a_column_dropped_is_refused_naming_it(db_url, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _needs_pg_tools(db_url)
    _backup, before = _good_backup(cli, tmp_path)
    dropped = _without(db_url, cli, tmp_path, "ALTER TABLE site DROP COLUMN description")
    _assert_refused(cli, db_url, dropped, before, "column site.description is missing")


def test_an_older_backup_with_a_table_dropped_is_refused_before_it_is_migrated(cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from alembic import command

    from fleetctl.store import alembic_config, reset_engines

    backup, before = _good_backup(cli, tmp_path)
    old = tmp_path / "old.backup"
    shutil.copy(backup, old)
    engine = create_engine(f"sqlite:///{old}")
    with engine.begin() as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0006")
        conn.execute(text("DROP TABLE sweep_run"))  # a table revision 0006 has
    engine.dispose()
    reset_engines()
    _assert_refused(cli, "sqlite", old, before, "table sweep_run is missing, which schema revision 0006 has")


def test_the_other_backends_backup_is_refused(db_url, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _needs_pg_tools(db_url)
    _backup, before = _good_backup(cli, tmp_path)
    other = tmp_path / "other.backup"
    if db_url.startswith("sqlite"):
        # Hand-made: pg_dump's custom-format magic and nothing a pg_restore could read. Refused by its first bytes,
        # not by pg_restore failing on it (which was exit 1 "pg_restore failed", issue #25 item 13).
        other.write_bytes(b"PGDMP\x01\x0e\x00" + bytes(200))
        words = ("a postgresql backup cannot be restored into a sqlite database",)
    else:
        db = sqlite3.connect(other)  # hand-made: the smallest SQLite file that names a schema revision
        db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        db.execute(f"INSERT INTO alembic_version VALUES ('{HEAD}')")
        db.commit()
        db.close()
        words = ("a sqlite backup cannot be restored into a postgresql database",)
    _assert_refused(cli, db_url, other, before, *words)


def test_a_restore_under_a_live_lock_says_it_is_restoring(db_url, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _needs_pg_tools(db_url)
    backup, before = _good_backup(cli, tmp_path)
    engine = create_engine(db_url)
    with engine.begin() as conn:  # this process holds a server, as a running provision would
        conn.execute(text("UPDATE server SET reservation = :r, reserved_for = 'provision' WHERE name = 'mn-tyo1-r12-01'"),
                     {"r": f"tester@ci:{socket.gethostname()}:{os.getpid()}"})  # fmt: skip
    engine.dispose()
    before = _export(cli)
    r = cli("db", "restore", str(backup), "--yes")
    assert r.code == 2, (r.out, r.err)
    err = r.err.strip()
    assert len(err.splitlines()) == 1, err
    assert "let it finish before restoring" in err and "migrating" not in err, err
    assert "locks mn-tyo1-r12-01 for provision" in err
    assert _export(cli) == before


def test_a_good_backup_still_restores_after_the_checks(db_url, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _needs_pg_tools(db_url)
    backup, before = _good_backup(cli, tmp_path)
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE site SET description = 'changed after the backup'"))
    engine.dispose()
    assert _export(cli) != before
    r = cli("db", "restore", str(backup), "--yes")
    assert r.code == 0, r.err
    assert _export(cli) == before
