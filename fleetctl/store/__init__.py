"""The store: the engine, sessions, and the schema kept at the latest migration.

SQLite (WAL, foreign keys on, a busy timeout so that several processes can
share the file) is the embedded default; PostgreSQL runs the same code. The
engine is built lazily, on first use, never at import.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetctl.config import database_url
from fleetctl.errors import EXIT_STORE, StoreError

# The reservation's format (user:host:pid, user:temporal:WORKFLOW) has one definition, below the store.
from fleetctl.holders import Holder

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine
    from sqlmodel import Session

# The newest migration; `ensure_schema` compares it with alembic_version with
# one query, so the common case never imports Alembic.
HEAD = "0011"

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    # WAL makes NORMAL durable against process crashes; only an OS crash can
    # lose the last transaction, never corrupt the file.
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def get_engine(url: str | None = None) -> Engine:
    """The engine for ``url`` (default: from the environment), schema up to date."""
    url = url or database_url()
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _make_engine(url)
            ensure_schema(engine)
            _engines[url] = engine
    return engine


def _make_engine(url: str) -> Engine:
    from sqlalchemy import create_engine, event

    if url.startswith("sqlite"):
        path = url.split(":///", 1)[1] if ":///" in url else ""
        if path and path != ":memory:":
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create the folder of the database {path}: {e.strerror}") from e
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)

        # pysqlite's own transaction handling cannot say BEGIN IMMEDIATE; take
        # it over, as SQLAlchemy's documentation recommends.
        @event.listens_for(engine, "connect")
        def _no_pysqlite_begin(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            dbapi_conn.isolation_level = None

        @event.listens_for(engine, "begin")
        def _begin(conn):  # type: ignore[no-untyped-def]
            immediate = conn.get_execution_options().get("fleetctl_immediate")
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine
    try:
        return create_engine(url, pool_pre_ping=True)
    except Exception as e:  # a bad URL or a missing DBAPI driver
        raise StoreError(f"cannot use database {redact_url(url)}: {e}") from e


def redact_url(url: str) -> str:
    """The URL with any password masked, for messages."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - whatever the URL, a message about it must not fail
        return "<unparseable database URL>"


def current_revision(engine: Engine) -> str | None:
    from sqlalchemy import inspect, text

    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def ensure_schema(engine: Engine) -> None:
    """Apply pending migrations, so first use needs no setup step."""
    from sqlalchemy.exc import OperationalError

    try:
        rev = current_revision(engine)
    except OperationalError as e:
        raise StoreError(f"cannot open database {redact_url(str(engine.url))}: {e.orig}", exit_code=EXIT_STORE) from e
    if rev != HEAD:
        upgrade(engine)


def check_revision_known(revision: str | None, where: str) -> None:
    """Refuse a schema newer than this fleetctl's (revisions are numbered ``0001``, ``0002`` ...)."""
    if revision is not None and revision > HEAD:
        raise StoreError(f"{where} is at schema revision {revision}, newer than this fleetctl's ({HEAD}): upgrade fleetctl", exit_code=2)


# Any fixed number: the PostgreSQL advisory lock two migrations queue on.
_MIGRATION_LOCK = 7461232


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the schema, refusing while another fleetctl process works on the database.

    The migration runs in one transaction that first takes the database's
    migration lock (SQLite: BEGIN IMMEDIATE, the one writer lock, which in WAL
    mode is what BEGIN EXCLUSIVE takes; PostgreSQL: an advisory lock), so two
    migrations never run at once: the second waits, then finds nothing to do.
    """
    from alembic import command
    from sqlalchemy import text

    check_revision_known(current_revision(engine), redact_url(str(engine.url)))
    refuse_if_in_use(engine)
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn = conn.execution_options(fleetctl_immediate=True)
        with conn.begin():
            if engine.dialect.name == "postgresql":
                conn.execute(text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"))
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)


def live_holders(engine: Engine) -> list[str]:
    """Other fleetctl processes working on this database: a live lock holder, a running job, sweep or burn-in.

    A lock (the server's reservation) whose process runs on this host, or
    that was taken on another host (whose processes cannot be seen from
    here, and which `server unlock --force` clears once it is known gone); a
    job, sweep or burn-in run marked running whose process is alive on this
    host (one of another host may be a leftover nothing here can clear).
    This process itself is not counted for runs, but a reservation it holds is
    (a migration under its own workflow is as bad as under another's). Reads
    whatever tables the schema at its current revision has.
    """
    import os
    import socket

    from sqlalchemy import inspect, text

    found: list[str] = []
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        if "server" in tables and "reservation" in {c["name"] for c in inspect(conn).get_columns("server")}:
            for name, value, purpose in conn.execute(
                text("SELECT name, reservation, reserved_for FROM server WHERE reservation IS NOT NULL ORDER BY name")
            ):
                holder = Holder.parse(value)
                alive = holder.alive()
                if alive or (alive is None and holder.host is not None):
                    where = "" if alive else f" on host {holder.host}"
                    found.append(f"pid {holder.pid}{where}, user {holder.user}, locks {name} for {purpose}")
        if "job" in tables:
            import json

            # A job names its process in args["owner"] (user:host:pid, fleetctl.workflows.journal).
            for job_id, kind, args in conn.execute(text("SELECT id, kind, args FROM job WHERE state = 'running' ORDER BY id")):
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        continue
                owner = args.get("owner") if isinstance(args, dict) else None
                if not isinstance(owner, str):
                    continue
                holder = Holder.parse(owner)
                if holder.pid == os.getpid() and holder.host == socket.gethostname():
                    continue
                if holder.alive():
                    found.append(f"pid {holder.pid}, user {holder.user}, job {job_id} ({kind}) running")
        for kind in ("sweep_run", "burnin_run"):
            if kind not in tables:
                continue
            for run_id, host, pid in conn.execute(text(f"SELECT id, host, pid FROM {kind} WHERE state = 'running' ORDER BY id")):
                if not pid or (pid == os.getpid() and host == socket.gethostname()):
                    continue
                if Holder("?", host, pid).alive():
                    found.append(f"pid {pid}, {kind.replace('_', ' ')} {run_id} running")
    return found


def refuse_if_in_use(engine: Engine) -> None:
    """Raise (exit 2) when another fleetctl process works on the database: a migration must not run under it."""
    holders = live_holders(engine)
    if holders:
        more = f" (and {len(holders) - 1} more)" if len(holders) > 1 else ""
        raise StoreError(
            f"another fleetctl process holds {redact_url(str(engine.url))} ({holders[0]}){more}: let it finish before migrating"
            " (a lock left by a process that is gone: fleetctl server unlock NAME --force)",
            exit_code=2,
        )


def alembic_config():  # type: ignore[no-untyped-def]
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    return cfg


@contextmanager
def session(url: str | None = None) -> Iterator[Session]:
    """A session in one transaction: committed on success, rolled back on error."""
    from sqlmodel import Session

    with Session(get_engine(url), expire_on_commit=False) as s:
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise


def reset_engines() -> None:
    """Forget cached engines (tests switch databases)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


# Any fixed number (not the migration's, not write_transaction's): the PostgreSQL advisory lock short writers queue on.
_SHORT_WRITE_LOCK = 7461233


@contextmanager
def immediate(engine: Any) -> Iterator[Connection]:
    """A short write transaction on one row or a few (journal, state, locks).

    On SQLite it starts with BEGIN IMMEDIATE: a deferred transaction that
    reads and then writes fails at once ("database is locked", no busy wait)
    when another process wrote in between, which several provisioning
    processes do all the time. On PostgreSQL it first takes a transaction's
    advisory lock, so these short writers also run one at a time: a
    read-then-write (a sweep replacing a target's open findings and cursor)
    would otherwise race another process's and fail on a duplicate key, as
    two sweeps over one server did. Inventory-wide writers
    (:func:`write_transaction`) and migrations queue on locks of their own.
    """
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn = conn.execution_options(fleetctl_immediate=True)
        with conn.begin():
            if engine.dialect.name == "postgresql":
                from sqlalchemy import text

                conn.execute(text(f"SELECT pg_advisory_xact_lock({_SHORT_WRITE_LOCK})"))
            yield conn


@contextmanager
def write_transaction(url: str | None = None) -> Iterator[Connection]:
    """A connection in a transaction that will write the inventory.

    On SQLite it starts with BEGIN IMMEDIATE, so that two writers queue on the
    busy timeout instead of one failing when it upgrades its read lock; on
    PostgreSQL an advisory lock serialises inventory-wide writers the same way.
    """
    engine = get_engine(url)
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn = conn.execution_options(fleetctl_immediate=True)
        with conn.begin():
            if engine.dialect.name == "postgresql":
                from sqlalchemy import text

                conn.execute(text("SELECT pg_advisory_xact_lock(7461231)"))
            yield conn
