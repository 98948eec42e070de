"""Issue #25 items 4 and 5: a sweep that cannot store exits 6, bad values are refused before work, and a step that
fails after the run is stored keeps the verdict.

- A read-only database and a write lock held past the busy timeout: exit 6 and
  one line (`error: database: ...`), never 1 (a new warning, which the shipped
  systemd unit and CronJob take as a good run). The busy timeout is shortened
  for the test (30 s in production); the lock is a real SQLite write lock held
  by another connection.
- A batch of verdicts that cannot be written mid-run: the run's error is the
  store's (exit 6) even where the engine turned it into a lost shard.
- `--retention 1000000` (OverflowError in pruning, after the run) and a
  `--textfile` folder that cannot take a file: exit 2, one line naming the
  option, nothing swept.
- A textfile that cannot be written at the end (the disk filled after the
  check: a hand-made ENOSPC, as no public recording of one exists) and a
  pruning the store refuses: the report, then one line, and the verdict's exit code.

The sweeps that finish read no device: the engine's ``collect`` hook feeds
their verdicts (the example site's BMCs are never contacted).
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

SERVER = "mn-tyo1-r12-01"


def _runs() -> int:
    from fleetctl.store import get_engine
    from fleetctl.store import tables as T

    with get_engine().connect() as c:
        return int(c.execute(select(func.count()).select_from(T.sweep_run)).scalar_one())


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def sqlite_loaded(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "fleet.db"
    monkeypatch.setenv("FLEETCTL_DB", str(path))
    r = cli("inventory", "import", str(Path(__file__).resolve().parents[2] / "inventory"))
    assert r.code == 0, r.err
    return path


def test_a_read_only_database_is_exit_6_and_one_line(sqlite_loaded: Path, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetctl.store import reset_engines

    monkeypatch.setenv("FLEETCTL_DB", f"sqlite:///file:{sqlite_loaded}?mode=ro&uri=true")
    reset_engines()
    r = cli("sweep", SERVER)
    assert r.code == 6, (r.code, r.out, r.err)
    assert _one_line(r.err) == "error: database: attempt to write a readonly database"
    monkeypatch.setenv("FLEETCTL_DB", str(sqlite_loaded))
    reset_engines()
    assert _runs() == 0


def _short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's own pragmas, with a busy timeout of 0.3 s instead of 30 s (the lock is held past it either way)."""
    import fleetctl.store as store

    pragmas = store._sqlite_pragmas

    def short(dbapi_conn: Any, record: Any) -> None:
        pragmas(dbapi_conn, record)
        dbapi_conn.execute("PRAGMA busy_timeout=300")

    monkeypatch.setattr(store, "_sqlite_pragmas", short)
    store.reset_engines()


def test_a_lock_held_past_the_timeout_is_exit_6_and_one_line(sqlite_loaded: Path, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _short_busy_timeout(monkeypatch)
    holder = sqlite3.connect(sqlite_loaded, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer (a migration, a long import) holds the write lock
        r = cli("sweep", SERVER)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.code == 6, (r.code, r.out, r.err)
    assert _one_line(r.err) == "error: database: database is locked"
    assert _runs() == 0


def _verdict(name: str) -> Any:
    from fleetctl.sweep.engine import TargetVerdict
    from fleetctl.sweep.model import Finding, Status

    f = Finding("server", name, "psu", Status.CRITICAL, "PSU Power Supply 1: Critical", "Power Supply 1")
    return TargetVerdict("server", name, Status.CRITICAL, [f], rack="rack-12", site="tyo1", position=1)


def test_verdicts_that_cannot_be_written_mid_run_are_the_store_s_failure(sqlite_loaded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetctl.errors import FleetError, StoreError
    from fleetctl.sweep.engine import run

    _short_busy_timeout(monkeypatch)

    async def collect(rec: Any) -> None:
        holder = sqlite3.connect(sqlite_loaded, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            rec.add(_verdict(SERVER), None)
            rec.flush()
        except StoreError:
            # as the described workflow reports a unit that raised: a lost shard, a FleetError of exit 1
            raise FleetError("the sweep could not read 1 shard(s): all: lost") from None
        finally:
            holder.execute("ROLLBACK")
            holder.close()

    with pytest.raises(StoreError) as got:
        run([], [], selector="t", collect=collect)
    assert got.value.exit_code == 6
    assert str(got.value) == "database: database is locked (the sweep's verdicts were not stored)"


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_retention_that_is_no_date_is_refused_before_work(example_loaded: Any, cli: Any, monkeypatch: pytest.MonkeyPatch,
                                                            how: str) -> None:  # fmt: skip
    if how == "option":
        r = cli("sweep", SERVER, "--retention", "1000000")
    else:
        monkeypatch.setenv("FLEETCTL_SWEEP_RETENTION_DAYS", "1000000")
        r = cli("sweep", SERVER)
    assert r.code == 2, (r.code, r.err)
    line = _one_line(r.err)
    assert "'--retention'" in line and "36500" in line, line
    assert _runs() == 0


def test_a_textfile_folder_that_cannot_take_a_file_is_refused_before_work(example_loaded: Any, cli: Any) -> None:
    # /proc is a folder no file can be created in, even by root (a permission bit would not stop root)
    r = cli("sweep", SERVER, "--textfile", "/proc")
    assert r.code == 2, (r.code, r.err)
    line = _one_line(r.err)
    assert line.startswith("error: --textfile: /proc: cannot write there"), line
    assert _runs() == 0


def test_an_immutable_textfile_folder_is_refused_before_work(example_loaded: Any, cli: Any, tmp_path: Path) -> None:
    """The issue's own case: `chattr +i` on the folder (root may write anywhere else); skips where chattr cannot."""
    import shutil
    import subprocess

    folder = tmp_path / "textfile"
    folder.mkdir()
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available or not permitted here (e2fsprogs, CAP_LINUX_IMMUTABLE)")
    try:
        r = cli("sweep", SERVER, "--textfile", str(folder))
    finally:
        subprocess.run([chattr, "-i", str(folder)], check=True)
    assert r.code == 2, (r.code, r.err)
    assert _one_line(r.err) == f"error: --textfile: {folder}: cannot write there: Operation not permitted"
    assert _runs() == 0


@pytest.fixture
def swept_without_devices(example_loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleetctl sweep` runs its real engine, with the verdicts fed instead of read (a new critical PSU finding)."""
    import fleetctl.sweep.engine as engine

    real = engine.run

    def run(servers: list[Any], switches: list[Any], **kw: Any) -> Any:
        async def collect(rec: Any) -> None:
            for s in servers:
                rec.add(_verdict(s.name), None)

        return real(servers, switches, **{**kw, "collect": collect})

    monkeypatch.setattr(engine, "run", run)


def test_a_textfile_that_cannot_be_written_at_the_end_keeps_the_verdict(swept_without_devices: None, cli: Any, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import fleetctl.sweep.prometheus as prometheus

    def full(*_a: Any, **_k: Any) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(prometheus, "write_textfile", full)
    r = cli("sweep", SERVER, "--textfile", str(tmp_path))
    assert r.code == 5, (r.code, r.out, r.err)  # the new critical finding's code, not 3 and not 1
    assert "since the last sweep: 1 new" in r.out  # the report is printed
    line = _one_line(r.err)
    assert line.startswith(f"error: --textfile {tmp_path}: fleetctl.prom not written: No space left on device (sweep "), line
    assert _runs() == 1


def test_a_pruning_the_store_refuses_keeps_the_verdict(swept_without_devices: None, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3 as dbapi

    from sqlalchemy.exc import OperationalError

    import fleetctl.sweep.engine as engine

    def locked(*_a: Any, **_k: Any) -> int:
        raise OperationalError("DELETE FROM finding", {}, dbapi.OperationalError("database is locked"))

    monkeypatch.setattr(engine, "prune", locked)
    r = cli("sweep", SERVER, "-o", "json")
    assert r.code == 5, (r.code, r.out, r.err)
    assert '"worst_new": "critical"' in r.out
    # (-o json: the "fleet: ..." line goes to stderr too, before the work)
    assert [x for x in r.err.splitlines() if x.startswith("error")] == ["error: database: database is locked (old runs not pruned)"]
