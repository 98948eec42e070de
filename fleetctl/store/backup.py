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

The database holds credential references (``env:BMC_TYO1``), never the
secrets, and so does a backup.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fleetctl.errors import EXIT_USAGE, InputError, StoreError
from fleetctl.store import HEAD, _make_engine, alembic_config, check_revision_known, get_engine, redact_url, refuse_if_in_use, reset_engines

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

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
        raise StoreError(f"{Path(argv[0]).name} failed: {lines[0] if lines else f'exit {done.returncode}'}")
    return done.stdout


def _pgdump_revision(path: Path) -> str | None:
    """The alembic_version row inside a pg_dump custom-format file, read without restoring it."""
    out = _run([_tool("pg_restore"), "--data-only", "--table=alembic_version", "--file=-", str(path)])
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("COPY ") and "alembic_version" in line and i + 1 < len(lines) and lines[i + 1] != "\\.":
            return lines[i + 1].strip()
    return None


def read_backup(path: Path) -> Backup:
    """What ``path`` is: a fleetctl backup of either kind, with its revision.

    Raises:
        InputError: no such file, or not a backup fleetctl wrote.
    """
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", location=str(path)) from e
    if head.startswith(SQLITE_MAGIC):
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
    if head.startswith(PGDUMP_MAGIC):
        revision = _pgdump_revision(path)
        if revision is None:
            raise InputError("a pg_dump file, but not of a fleetctl inventory (no schema revision in it)", location=str(path))
        return Backup(path, "postgresql", revision)
    raise InputError("not a fleetctl backup (neither a SQLite file nor a pg_dump custom-format file)", location=str(path))


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
    info = read_backup(path)
    if info.dialect != dialect:
        raise InputError(
            f"a {info.dialect} backup cannot be restored into a {dialect} database"
            f" ({redact_url(url)}); restore it into a {info.dialect} one, then move the inventory with export and import",
            location=str(path),
        )
    check_revision_known(info.revision, f"backup {path}")
    held = counts(url)
    if held is not None and not yes:
        raise InputError(f"{redact_url(url)} holds an inventory ({held}); give --yes to replace it with the backup {path}")
    if dialect == "sqlite":
        _sqlite_restore(path, _sqlite_file(url), migrate=info.revision != HEAD)
    else:
        _pg_restore(url, path)
    return info


def _refuse_if_in_use(url: str) -> None:
    """Another fleetctl process working on the database (a live lock holder, a running sweep): no restore under it."""
    from sqlalchemy import create_engine

    engine = create_engine(url)
    try:
        refuse_if_in_use(engine)
    finally:
        engine.dispose()


def _sqlite_restore(backup_file: Path, target: Path, *, migrate: bool) -> None:
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
        if migrate:
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


def _pg_restore(url: str, path: Path) -> None:
    """Drop every table and recreate them from the dump, in one transaction (psql --single-transaction)."""
    from sqlalchemy import create_engine, inspect

    _refuse_if_in_use(url)
    pg_restore, psql = _tool("pg_restore"), _tool("psql")
    script = _run([pg_restore, "--no-owner", "--no-privileges", "--file=-", str(path)])
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
        f.write("\n".join(drops) + "\n" + script)
        f.flush()
        reset_engines()
        _run([psql, "--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--single-transaction", f"--file={f.name}", dsn], env=env)
    # An older backup: migrated now, under the migration lock (get_engine does it).
    reset_engines()
    get_engine(url)
