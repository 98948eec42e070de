"""`db backup` / `db restore` (issue #13, "the inventory is precious") and migrations refused under a live process."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "inventory"
SITE = (EXAMPLE / "site-tyo1.yaml").read_text(encoding="utf-8")


def _export(cli) -> str:  # type: ignore[no-untyped-def]
    r = cli("inventory", "export")
    assert r.code == 0, r.err
    return r.out


def _import_example(cli) -> str:  # type: ignore[no-untyped-def]
    r = cli("inventory", "import", str(EXAMPLE))
    assert r.code == 0, r.err
    return _export(cli)


def _change_something(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    changed = tmp_path / "changed" / "site-tyo1.yaml"
    changed.parent.mkdir(exist_ok=True)
    text = SITE.replace("description: 'Tokyo 1, hall B: MN-Core and GPU training racks'", "description: changed after the backup")
    assert text != SITE
    changed.write_text(text)
    r = cli("inventory", "import", str(changed))
    assert r.code == 0, r.err


def _to_revision(url: str, revision: str) -> None:
    from alembic import command

    from fleetctl.store import alembic_config, get_engine, reset_engines

    get_engine(url)
    reset_engines()
    engine = create_engine(url)
    with engine.begin() as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
    engine.dispose()


def _needs_pg_tools(url: str) -> None:
    if url.startswith("postgresql") and not all(shutil.which(t) for t in ("pg_dump", "pg_restore", "psql")):
        pytest.skip("the PostgreSQL client programs (pg_dump, pg_restore, psql) are not on PATH")


def test_round_trip_restores_the_inventory_as_it_was(db_url, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _needs_pg_tools(db_url)
    first = _import_example(cli)
    backup = tmp_path / "fleet.backup"
    r = cli("db", "backup", str(backup))
    assert r.code == 0, r.err
    assert "1 site, 31 servers" in r.out and str(backup) in r.out and "schema revision" in r.out
    _change_something(cli, tmp_path)
    assert _export(cli) != first
    r = cli("db", "restore", str(backup), "--yes")
    assert r.code == 0, r.err
    assert r.out.startswith(f"restored {backup} (schema revision ") and ": 1 site, 31 servers" in r.out
    assert _export(cli) == first
    # The restored database is in use as before: commands read and write it.
    _change_something(cli, tmp_path)
    assert "changed after the backup" in _export(cli)


def test_restore_refuses_an_inventory_that_is_not_empty_without_yes(db_url, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _needs_pg_tools(db_url)
    _import_example(cli)
    backup = tmp_path / "fleet.backup"
    assert cli("db", "backup", str(backup)).code == 0
    _change_something(cli, tmp_path)
    before = _export(cli)
    r = cli("db", "restore", str(backup))
    assert r.code == 2
    assert r.err.startswith("error: ") and len(r.err.strip().splitlines()) == 1
    assert "holds an inventory (1 site, 31 servers); give --yes" in r.err
    assert _export(cli) == before


def test_restore_into_a_new_database_needs_no_yes(cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.store import reset_engines

    first = _import_example(cli)
    backup = tmp_path / "fleet.backup"
    assert cli("db", "backup", str(backup)).code == 0
    new = tmp_path / "elsewhere" / "new.db"
    monkeypatch.setenv("FLEETCTL_DB", str(new))
    reset_engines()
    r = cli("db", "restore", str(backup))
    assert r.code == 0, r.err
    assert f"into sqlite:///{new}: 1 site, 31 servers" in r.out
    assert _export(cli) == first


def test_backup_refuses_to_overwrite_a_file_without_force(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _import_example(cli)
    backup = tmp_path / "fleet.backup"
    backup.write_text("precious")
    r = cli("db", "backup", str(backup))
    assert r.code == 2 and f"{backup}: exists; give --force" in r.err
    assert backup.read_text() == "precious"
    assert cli("db", "backup", str(backup), "--force").code == 0
    assert backup.read_bytes().startswith(b"SQLite format 3\x00")


def test_backup_is_consistent_while_another_connection_writes(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A writer in the middle of a transaction neither blocks the backup nor leaks half its rows into it."""
    _import_example(cli)
    db = Path(os.environ["FLEETCTL_DB"])
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE site SET description = 'written during the backup'")
    writer.execute("INSERT INTO event (at, actor, action, object_kind, object_name, detail) "
                   "VALUES ('2026-01-01', 'w', 'test.write', 'site', 'tyo1', 'uncommitted')")  # fmt: skip
    backup = tmp_path / "fleet.backup"
    try:
        r = cli("db", "backup", str(backup))
        assert r.code == 0, r.err
    finally:
        writer.execute("COMMIT")
        writer.close()
    copy = sqlite3.connect(backup)
    assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert copy.execute("SELECT description FROM site").fetchone() != ("written during the backup",)
    assert copy.execute("SELECT count(*) FROM event WHERE action = 'test.write'").fetchone() == (0,)
    assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # one self-contained file
    copy.close()
    assert not Path(f"{backup}-wal").exists()
    # The writer's transaction committed in the live database.
    live = sqlite3.connect(db)
    assert live.execute("SELECT description FROM site").fetchone() == ("written during the backup",)
    live.close()


def test_restore_refuses_a_backup_of_a_newer_schema(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    first = _import_example(cli)
    backup = tmp_path / "fleet.backup"
    assert cli("db", "backup", str(backup)).code == 0
    with sqlite3.connect(backup) as c:
        c.execute("UPDATE alembic_version SET version_num = '9999'")
    r = cli("db", "restore", str(backup), "--yes")
    assert r.code == 2, (r.out, r.err)
    assert f"backup {backup} is at schema revision 9999, newer than this fleetctl's" in r.err
    assert _export(cli) == first


def test_restore_refuses_what_is_not_a_backup(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    junk = tmp_path / "junk.backup"
    junk.write_text("not a backup\n")
    r = cli("db", "restore", str(junk), "--yes")
    assert r.code == 2 and f"{junk}: not a fleetctl backup" in r.err
    r = cli("db", "restore", str(tmp_path / "absent.backup"))
    assert r.code == 2 and "absent.backup: cannot read" in r.err


def test_restore_of_an_older_backup_migrates_it(cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.store import HEAD, current_revision, reset_engines

    _import_example(cli)
    url = f"sqlite:///{os.environ['FLEETCTL_DB']}"
    _to_revision(url, "0006")
    backup = tmp_path / "old.backup"
    src, dst = sqlite3.connect(os.environ["FLEETCTL_DB"]), sqlite3.connect(backup)
    src.backup(dst)  # a backup an older fleetctl (schema 0006) would have written
    src.close()
    dst.close()
    monkeypatch.setenv("FLEETCTL_DB", str(tmp_path / "new.db"))
    reset_engines()
    r = cli("db", "restore", str(backup))
    assert r.code == 0, r.err
    assert "(schema revision 0006)" in r.out and "1 site, 31 servers" in r.out
    assert current_revision(create_engine(f"sqlite:///{tmp_path / 'new.db'}")) == HEAD


def test_restore_refuses_while_another_process_has_the_database_open(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    first = _import_example(cli)
    backup = tmp_path / "fleet.backup"
    assert cli("db", "backup", str(backup)).code == 0
    other = sqlite3.connect(os.environ["FLEETCTL_DB"])
    other.execute("SELECT count(*) FROM server").fetchone()  # a reader, as another process would be
    try:
        r = cli("db", "restore", str(backup), "--yes")
    finally:
        other.close()
    assert r.code == 2, (r.out, r.err)
    assert "is open in another process" in r.err
    assert _export(cli) == first


# -- migrations under a live process ----------------------------------------------------------------


def _hold(url: str, server: str, pid: int) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE server SET reservation = :r, reserved_for = 'provision' WHERE name = :n"),
                     {"r": f"tester@ci:{socket.gethostname()}:{pid}", "n": server})  # fmt: skip
    engine.dispose()


def test_upgrade_is_refused_while_a_live_process_holds_a_server(db_url, cli) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.store import HEAD, current_revision, reset_engines

    _import_example(cli)
    _to_revision(db_url, "0006")
    _hold(db_url, "mn-tyo1-r12-01", os.getpid())  # this process: alive, on this host
    r = cli("db", "upgrade")
    assert r.code == 2, (r.out, r.err)
    err = r.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: another fleetctl process holds "), err
    assert f"(pid {os.getpid()}, user tester@ci, locks mn-tyo1-r12-01 for provision)" in err
    # Any command would migrate on first use: refused the same way, nothing migrated.
    assert cli("site", "list").code == 2
    assert current_revision(create_engine(db_url)) == "0006"
    # The holder gone (a pid that is not running), the migration runs.
    reset_engines()
    _hold(db_url, "mn-tyo1-r12-01", _dead_pid())
    r = cli("db", "upgrade")
    assert r.code == 0, r.err
    assert current_revision(create_engine(db_url)) == HEAD


def test_upgrade_is_refused_while_a_sweep_of_another_live_process_runs(cli) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.store import current_revision

    _import_example(cli)
    url = f"sqlite:///{os.environ['FLEETCTL_DB']}"
    engine = create_engine(url)
    with engine.begin() as conn:  # the parent process (pytest's shell or runner): alive, not us
        conn.execute(text("INSERT INTO sweep_run (started_at, state, level, selector, actor, host, pid, servers, switches, counts) "
                          "VALUES ('2026-01-01', 'running', 'bmc', 'all', 'x', :h, :p, 0, 0, '{}')"),
                     {"h": socket.gethostname(), "p": os.getppid()})  # fmt: skip
    engine.dispose()
    _to_revision(url, "0006")
    r = cli("db", "upgrade")
    assert r.code == 2, (r.out, r.err)
    assert f"(pid {os.getppid()}, sweep run 1 running)" in r.err
    assert current_revision(create_engine(url)) == "0006"


def _dead_pid() -> int:
    """A pid no process has (the highest possible, checked)."""
    pid = int(Path("/proc/sys/kernel/pid_max").read_text()) - 1 if Path("/proc/sys/kernel/pid_max").exists() else 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1


def test_upgrade_is_refused_while_a_job_of_another_live_process_runs(cli) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.store import current_revision

    _import_example(cli)
    url = f"sqlite:///{os.environ['FLEETCTL_DB']}"
    engine = create_engine(url)
    with engine.begin() as conn:  # a job whose owner is the parent process: alive, on this host, not us
        conn.execute(text("INSERT INTO job (kind, target, state, actor, args, created_at) "
                          "VALUES ('power.on', 'rack-12', 'running', 'x', :a, '2026-01-01')"),
                     {"a": f'{{"owner": "op@ci:{socket.gethostname()}:{os.getppid()}"}}'})  # fmt: skip
    engine.dispose()
    _to_revision(url, "0006")
    r = cli("db", "upgrade")
    assert r.code == 2, (r.out, r.err)
    assert f"(pid {os.getppid()}, user op@ci, job 1 (power.on) running)" in r.err
    assert current_revision(create_engine(url)) == "0006"
