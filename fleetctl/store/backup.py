"""`fleetctl db backup` and `db restore`: the whole inventory database, to a file and back.

One format per backend, each the backend's own:

- **SQLite**: a SQLite file, written with SQLite's online backup API from the
  live (WAL) database. The copy is one read transaction, so it is consistent
  while other processes keep writing; it is written to a temporary file
  beside FILE and renamed, so a FILE that exists is a whole backup.
- **PostgreSQL**: ``pg_dump`` custom format (``pg_dump -Fc``), which needs the
  PostgreSQL client programs (``pg_dump``, ``pg_restore``, ``psql``) on PATH;
  without them the command says so and does nothing.

A restore goes into the same kind of database the backup came from (export
and import move an inventory between kinds). It refuses a backup whose schema
is newer than this fleetctl's, and an inventory that is not empty unless
told ``yes``; a backup older than the code is migrated as it is restored. It
is atomic: SQLite restores into a temporary file which replaces the database
only while no other connection has it open; PostgreSQL restores in one
transaction (drop the tables, recreate them from the dump) that commits or
leaves everything as it was.

What is restored is checked before it replaces anything (issue #25): a backup
that is damaged (SQLite's ``integrity_check`` on the restored copy;
``pg_restore`` reading the whole dump) or whose schema lacks a table or a
column its own schema revision has (a table dropped, the revision left) is
refused with exit 2, naming what is wrong, and the live database is left as it
was. The schema a revision should have is this fleetctl's tables at the head,
or an empty database migrated to that revision for an older one.

The database holds credential references (``env:BMC_TYO1``), never the
secrets, and so does a backup.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from fleetctl.errors import EXIT_USAGE, InputError, StoreError
from fleetctl.store import HEAD, _make_engine, alembic_config, check_revision_known, get_engine, live_holders, redact_url, reset_engines

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy.engine import URL

T = TypeVar("T")

SQLITE_MAGIC = b"SQLite format 3\x00"
PGDUMP_MAGIC = b"PGDMP"

# What makes an inventory "not empty" for restore: any row in these.
_INVENTORY_TABLES = ("site", "hardware_model", "bios_profile", "server")


@dataclass(frozen=True)
class Backup:
    """A backup file: which backend wrote it and its schema revision."""

    path: Path
    dialect: str  # "sqlite" or "postgresql"
    revision: str | None


@dataclass(frozen=True)
class Counts:
    """How much inventory a database holds (for the messages)."""

    sites: int = 0
    servers: int = 0

    def __str__(self) -> str:
        return f"{self.sites} site{'s' * (self.sites != 1)}, {self.servers} server{'s' * (self.servers != 1)}"


def _url(url: str) -> URL:
    from sqlalchemy.engine import make_url

    return make_url(url)


def _sqlite_file(url: str) -> Path:
    path = _url(url).database
    if not path or path == ":memory:":
        raise InputError(f"{url}: an in-memory database cannot be backed up or restored")
    return Path(path)


def _dialect(url: str) -> str:
    name = _url(url).get_backend_name()
    if name not in ("sqlite", "postgresql"):
        raise InputError(f"backup and restore support SQLite and PostgreSQL, not {name}")
    return name


# -- reading a backup ------------------------------------------------------------------------------


def _sqlite_revision(conn: sqlite3.Connection) -> str | None:
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'").fetchone()
    if not has:
        return None
    row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return str(row[0]) if row else None


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise StoreError(
            f"{name} is not on PATH: a PostgreSQL inventory is backed up and restored with the PostgreSQL client programs"
            " (pg_dump, pg_restore, psql; Debian: apt-get install postgresql-client, of the server's major version)",
            exit_code=EXIT_USAGE,
        )
    return path


def _run(argv: list[str], *, env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    except OSError as e:
        raise StoreError(f"{Path(argv[0]).name}: {e.strerror or e}") from e
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        # psql tells its NOTICEs (a DROP ... CASCADE) before the error that stopped it: name the error.
        errors = [line for line in lines if re.search(r"\b(ERROR|FATAL|error):", line)]
        raise StoreError(f"{Path(argv[0]).name} failed: {(errors or lines or [f'exit {done.returncode}'])[0]}")
    return done.stdout


def _pgdump_tables(path: Path) -> set[str]:
    """The tables a pg_dump custom-format file holds, from its table of contents (``pg_restore --list``)."""
    out = _run([_tool("pg_restore"), "--list", str(path)])
    # A TOC line: "215; 1259 16390 TABLE public server root" (dump id; catalog oids; kind schema name owner).
    return {m.group(1) for m in re.finditer(r"^\d+; \d+ \d+ TABLE public (\S+) ", out, re.MULTILINE)}


def _pgdump_revision(path: Path) -> str | None:
    """The alembic_version row inside a pg_dump custom-format file, read without restoring it."""
    out = _run([_tool("pg_restore"), "--data-only", "--table=alembic_version", "--file=-", str(path)])
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("COPY ") and "alembic_version" in line and i + 1 < len(lines) and lines[i + 1] != "\\.":
            return lines[i + 1].strip()
    return None


def backup_kind(path: Path) -> str:
    """Which backend wrote the backup ``path`` ("sqlite" or "postgresql"), from its first bytes alone.

    Needs no client program: a pg_dump file offered to a SQLite inventory is
    refused as such even where pg_restore is not installed.

    Raises:
        InputError: no such file, or neither kind of backup.
    """
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", location=str(path)) from e
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head.startswith(PGDUMP_MAGIC):
        return "postgresql"
    raise InputError("not a fleetctl backup (neither a SQLite file nor a pg_dump custom-format file)", location=str(path))


def read_backup(path: Path) -> Backup:
    """What ``path`` is: a fleetctl backup of either kind, with its revision.

    Raises:
        InputError: no such file, not a backup fleetctl wrote, or one that cannot be read.
    """
    if backup_kind(path) == "sqlite":
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
            try:
                revision = _sqlite_revision(conn)
            finally:
                conn.close()
        except sqlite3.DatabaseError as e:
            raise InputError(f"not a readable SQLite backup: {e}", location=str(path)) from e
        if revision is None:
            raise InputError("a SQLite file, but not a fleetctl inventory (no schema revision in it)", location=str(path))
        return Backup(path, "sqlite", revision)
    revision = _read_dump(path, _pgdump_revision)
    if revision is None:
        raise InputError("a pg_dump file, but not of a fleetctl inventory (no schema revision in it)", location=str(path))
    return Backup(path, "postgresql", revision)


def _read_dump(path: Path, read: Callable[[Path], T]) -> T:
    """``read(path)``, where pg_restore failing on the file is the file's fault: a damaged dump, refused (exit 2)."""
    try:
        return read(path)
    except StoreError as e:
        if e.exit_code == EXIT_USAGE:  # pg_restore is not installed: that message stands
            raise
        raise InputError(f"damaged: pg_restore cannot read it ({e}); nothing was restored", location=str(path)) from e


# -- what a backup's schema must hold --------------------------------------------------------------

Schema = dict[str, frozenset[str]]  # table -> its columns
_expected: dict[str, Schema] = {}


def expected_schema(revision: str) -> Schema:
    """The tables and columns a database at schema ``revision`` has.

    At the head: this fleetctl's own tables (``fleetctl.store.tables``,
    generated from the models and checked against them by a test). At an older
    revision: an empty SQLite database migrated to it, as the migrations would
    have left any inventory (table and column names are the same on both
    backends). Read once per revision and process.
    """
    if revision not in _expected:
        if revision == HEAD:
            from fleetctl.store import tables

            _expected[revision] = {name: frozenset(c.name for c in getattr(tables, name).columns) for name in tables.__all__}
        else:
            from alembic import command
            from sqlalchemy import create_engine, inspect

            engine = create_engine("sqlite://")
            try:
                with engine.begin() as conn:
                    cfg = alembic_config()
                    cfg.attributes["connection"] = conn
                    command.upgrade(cfg, revision)
                    insp = inspect(conn)
                    _expected[revision] = {t: frozenset(c["name"] for c in insp.get_columns(t))
                                           for t in insp.get_table_names() if t != "alembic_version"}  # fmt: skip
            finally:
                engine.dispose()
    return _expected[revision]


def _first_missing(want: Schema, have: Schema) -> str | None:
    """What the first thing ``have`` lacks of ``want`` is called ("table server", "column server.rack_id"), or None."""
    for table in sorted(want):
        if table not in have:
            return f"table {table}"
    for table in sorted(want):
        for col in sorted(want[table] - have[table]):
            return f"column {table}.{col}"
    return None


def _refuse_missing(path: Path, revision: str, missing: str) -> InputError:
    return InputError(f"{missing} is missing, which schema revision {revision} has: the backup is incomplete; nothing was restored",
                      location=str(path))  # fmt: skip


# -- what a database holds -------------------------------------------------------------------------


def counts(url: str) -> Counts | None:
    """Sites and servers in the database at ``url``; None when there is no inventory there at all.

    Reads without migrating or creating anything (a SQLite file that does not
    exist stays so).
    """
    from sqlalchemy import create_engine, inspect, text

    if _dialect(url) == "sqlite" and not _sqlite_file(url).exists():
        return None
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            if not tables & set(_INVENTORY_TABLES):
                return None
            n = {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() if t in tables else 0 for t in _INVENTORY_TABLES}
    except Exception as e:  # whatever the driver raises: the message names the database
        from fleetctl.store import redact_url

        raise StoreError(f"cannot read {redact_url(url)}: {str(getattr(e, 'orig', None) or e).splitlines()[0]}") from e
    finally:
        engine.dispose()
    if not any(n.values()):
        return None
    return Counts(sites=n["site"], servers=n["server"])


# -- backup ----------------------------------------------------------------------------------------


def _pg_env_and_dsn(url: str) -> tuple[dict[str, str], str]:
    """A libpq connection string for the client programs; the password goes in the environment, never in argv."""
    u = _url(url)
    env = dict(os.environ)
    if u.password:
        env["PGPASSWORD"] = str(u.password)
    dsn = u.set(drivername="postgresql", password=None).render_as_string(hide_password=False)
    return env, dsn


def _temp_beside(path: Path, what: str) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.{what}-", dir=path.parent)
    os.close(fd)
    return Path(name)


def backup(url: str, dest: Path, *, force: bool = False) -> Backup:
    """Write the database at ``url`` to ``dest``; return what was written.

    Raises:
        InputError: ``dest`` exists (without ``force``) or its folder does not.
        StoreError: there is no database, or the backend's tools failed.
    """
    dialect = _dialect(url)
    if dest.exists() and not force:
        raise InputError("exists; give --force to overwrite it", location=str(dest))
    if not dest.parent.is_dir():
        raise InputError("no such folder", location=str(dest.parent))
    tmp = _temp_beside(dest, "backup")
    try:
        if dialect == "sqlite":
            _sqlite_backup(_sqlite_file(url), tmp)
        else:
            env, dsn = _pg_env_and_dsn(url)
            _run([_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges", f"--file={tmp}", dsn], env=env)
        tmp.chmod(0o600)  # the inventory is nobody else's business (it holds references, not secrets)
        result = read_backup(tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return Backup(dest, result.dialect, result.revision)


def _sqlite_backup(source: Path, tmp: Path) -> None:
    if not source.exists():
        raise StoreError(f"no database at {source}", exit_code=EXIT_USAGE)
    src = sqlite3.connect(source, timeout=30)
    try:
        dst = sqlite3.connect(tmp)
        try:
            # One step (pages=-1): one read transaction, a consistent snapshot;
            # in WAL mode writers go on meanwhile.
            src.backup(dst)
            # A self-contained file: no -wal beside it to lose.
            dst.execute("PRAGMA journal_mode=DELETE")
            ok = dst.execute("PRAGMA quick_check").fetchone()
            if not ok or ok[0] != "ok":
                raise StoreError(f"the backup of {source} fails SQLite's check: {ok[0] if ok else '?'}")
        finally:
            dst.close()
    except sqlite3.Error as e:
        raise StoreError(f"cannot back up {source}: {e}") from e
    finally:
        src.close()


# -- restore ---------------------------------------------------------------------------------------


def restore(url: str, path: Path, *, yes: bool = False) -> Backup:
    """Replace the database at ``url`` with the backup ``path``, atomically; migrate it to this fleetctl's schema.

    Raises:
        InputError: not a backup, of the other backend, of a newer schema, or
            the inventory is not empty and ``yes`` was not given.
        StoreError: the database is in use, or the backend's tools failed.
    """
    dialect = _dialect(url)
    kind = backup_kind(path)
    if kind != dialect:
        raise InputError(
            f"a {kind} backup cannot be restored into a {dialect} database"
            f" ({redact_url(url)}); restore it into a {kind} one, then move the inventory with export and import",
            location=str(path),
        )
    info = read_backup(path)
    check_revision_known(info.revision, f"backup {path}")
    if dialect == "postgresql":
        _check_dump(path, str(info.revision))
    held = counts(url)
    if held is not None and not yes:
        raise InputError(f"{redact_url(url)} holds an inventory ({held}); give --yes to replace it with the backup {path}")
    if dialect == "sqlite":
        _sqlite_restore(path, _sqlite_file(url), revision=str(info.revision))
    else:
        _pg_restore(url, path, str(info.revision))
    return info


def _refuse_if_in_use(url: str) -> None:
    """Another fleetctl process working on the database (a live lock holder, a running sweep): no restore under it."""
    from sqlalchemy import create_engine

    engine = create_engine(url)
    try:
        holders = live_holders(engine)
    finally:
        engine.dispose()
    if holders:
        more = f" (and {len(holders) - 1} more)" if len(holders) > 1 else ""
        raise StoreError(
            f"another fleetctl process holds {redact_url(url)} ({holders[0]}){more}: let it finish before restoring;"
            " nothing was restored (a lock left by a process that is gone: fleetctl server unlock NAME --force)",
            exit_code=EXIT_USAGE,
        )


def _check_sqlite_copy(copy: Path, backup_file: Path, revision: str) -> None:
    """Refuse (exit 2) the restored copy of ``backup_file`` when it is damaged or lacks part of its revision's schema.

    ``integrity_check`` reads every page (``quick_check`` skips the indexes'
    agreement with their tables): a restore is rare, and the copy is what the
    inventory will be.
    """
    try:
        db = sqlite3.connect(copy)
        try:
            found = [str(r[0]) for r in db.execute("PRAGMA integrity_check(3)")]
            names = [str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            have = {t: frozenset(str(c[0]) for c in db.execute("SELECT name FROM pragma_table_info(?)", (t,))) for t in names}
        finally:
            db.close()
    except sqlite3.OperationalError:
        raise  # the copy's own file (a full disk): not the backup's fault
    except sqlite3.DatabaseError as e:
        found = [str(e)]
    if found != ["ok"]:
        raise InputError(f"damaged: SQLite's integrity check fails ({found[0]}); nothing was restored", location=str(backup_file))
    missing = _first_missing(expected_schema(revision), have)
    if missing:
        raise _refuse_missing(backup_file, revision, missing)


def _sqlite_restore(backup_file: Path, target: Path, *, revision: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        _refuse_if_in_use(f"sqlite:///{target}")
    tmp = _temp_beside(target, "restore")
    try:
        src = sqlite3.connect(f"file:{backup_file}?mode=ro&immutable=1", uri=True)
        dst = sqlite3.connect(tmp)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")
        finally:
            dst.close()
            src.close()
        _check_sqlite_copy(tmp, backup_file, revision)
        if revision != HEAD:
            _migrate_file(tmp)
        if target.exists():
            shutil.copymode(target, tmp)  # the database keeps its permissions
        reset_engines()  # this process's own connections to the old file
        _swap(tmp, target)
    except sqlite3.Error as e:
        raise StoreError(f"cannot restore into {target}: {e}") from e
    finally:
        tmp.unlink(missing_ok=True)
        for suffix in ("-wal", "-shm", "-journal"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def _migrate_file(path: Path) -> None:
    """Bring a restored (older) SQLite file to this fleetctl's schema before it replaces anything."""
    from alembic import command

    # The file is ours alone until it is swapped in: no lock to take, and the
    # reservations inside it are the backup's, not processes working on it.
    engine = _make_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    finally:
        engine.dispose()
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode=DELETE")
    finally:
        db.close()


def _swap(tmp: Path, target: Path) -> None:
    """Put ``tmp`` in place of ``target`` while no other connection has it open.

    Leaving WAL mode needs the only connection to the file, which is how we
    know no other process reads or writes it (and it merges and removes the
    -wal file, which must not be replayed onto the new file). The exclusive
    lock held across the rename keeps a newcomer out until it is done.
    """
    if not target.exists():
        os.replace(tmp, target)
        return
    live = sqlite3.connect(target, timeout=2, isolation_level=None)
    try:
        try:
            mode = live.execute("PRAGMA journal_mode=DELETE").fetchone()
        except sqlite3.OperationalError as e:
            raise StoreError(f"{target} is open in another process (a running fleetctl, an exporter?): stop it, then restore",
                             exit_code=EXIT_USAGE) from e  # fmt: skip
        if not mode or str(mode[0]).lower() != "delete":
            raise StoreError(f"{target} is open in another process (a running fleetctl, an exporter?): stop it, then restore",
                             exit_code=EXIT_USAGE)  # fmt: skip
        live.execute("BEGIN EXCLUSIVE")
        os.replace(tmp, target)
        for suffix in ("-wal", "-shm"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        live.execute("ROLLBACK")
    finally:
        live.close()


def _check_dump(path: Path, revision: str) -> None:
    """Refuse (exit 2) a dump whose table of contents cannot be read or lacks a table of its revision's schema."""
    tables = _read_dump(path, _pgdump_tables)
    for table in sorted(expected_schema(revision)):
        if table not in tables:
            raise _refuse_missing(path, revision, f"table {table}")


# The error the schema check inside the restore's transaction raises (below), told from psql's other errors by this.
_CHECK_MARK = "fleetctl-restore-check"


def _schema_check_sql(revision: str) -> str:
    """SQL that fails the restore's transaction when a table or column of ``revision``'s schema is not there.

    The dump's script sets an empty search_path: every name is qualified.
    """
    want = expected_schema(revision)
    rows = ", ".join(f"('{t}', '{c}')" for t in sorted(want) for c in sorted(want[t]))
    return f"""
DO $fleetctl$
DECLARE missing text;
BEGIN
  SELECT 'table ' || w.t INTO missing FROM (VALUES {rows}) AS w(t, c)
   WHERE NOT EXISTS (SELECT 1 FROM information_schema.tables i WHERE i.table_schema = 'public' AND i.table_name = w.t)
   ORDER BY w.t LIMIT 1;
  IF missing IS NULL THEN
    SELECT 'column ' || w.t || '.' || w.c INTO missing FROM (VALUES {rows}) AS w(t, c)
     WHERE NOT EXISTS (SELECT 1 FROM information_schema.columns i
                        WHERE i.table_schema = 'public' AND i.table_name = w.t AND i.column_name = w.c)
     ORDER BY w.t, w.c LIMIT 1;
  END IF;
  IF missing IS NOT NULL THEN
    RAISE EXCEPTION '{_CHECK_MARK}: %', missing;
  END IF;
END
$fleetctl$;
"""


def _pg_restore(url: str, path: Path, revision: str) -> None:
    """Drop every table and recreate them from the dump, in one transaction (psql --single-transaction).

    The dump is read whole first (pg_restore decompresses every table's data:
    a damaged block fails here, before the database is touched), and the
    transaction ends with the schema check, so a dump lacking a column rolls
    back to the database as it was.
    """
    from sqlalchemy import create_engine, inspect

    _refuse_if_in_use(url)
    pg_restore, psql = _tool("pg_restore"), _tool("psql")
    script = _read_dump(path, lambda p: _run([pg_restore, "--no-owner", "--no-privileges", "--file=-", str(p)]))
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            insp = inspect(conn)
            tables = insp.get_table_names()
            sequences = insp.get_sequence_names()
    finally:
        engine.dispose()
    drops = [f'DROP TABLE IF EXISTS public."{t}" CASCADE;' for t in tables]
    drops += [f'DROP SEQUENCE IF EXISTS public."{s}" CASCADE;' for s in sequences]
    env, dsn = _pg_env_and_dsn(url)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="fleetctl-restore-", encoding="utf-8") as f:
        f.write("\n".join(drops) + "\n" + script + _schema_check_sql(revision))
        f.flush()
        reset_engines()
        try:
            _run([psql, "--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--single-transaction", f"--file={f.name}", dsn], env=env)
        except StoreError as e:
            if _CHECK_MARK in str(e):
                missing = str(e).split(f"{_CHECK_MARK}: ", 1)[1].strip()
                raise _refuse_missing(path, revision, missing) from e
            if re.search(r"psql:[^:]*:\d+: ERROR:", str(e)):  # a statement of the dump failed: rolled back, the dump's fault
                raise InputError(f"does not restore: {str(e).split('ERROR:', 1)[1].strip()}; nothing was restored",
                                 location=str(path)) from e  # fmt: skip
            raise
    # An older backup: migrated now, under the migration lock (get_engine does it).
    reset_engines()
    get_engine(url)
