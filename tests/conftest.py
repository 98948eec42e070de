"""Shared fixtures: a fresh inventory on SQLite and on a real PostgreSQL.

PostgreSQL: ``FLEETCTL_TEST_PG`` names a server URL with rights to create
databases (default: root over the local socket, as `scripts/services.sh`
sets up). Each test gets its own database cloned from a migrated template,
so tests never see each other's data. Without a reachable server the
PostgreSQL variants skip and say why.
"""

from __future__ import annotations

import io
import os
import sys
import uuid
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "inventory"
SHARED = Path(os.environ.get("FLEETCTL_SHARED", REPO.parent / "shared"))

# The example site's management network (switches at 10.201.x.x; its BMCs
# have names under .example, which never resolve). No test may send it a
# packet: a command run on the example fleet instead of a lab's database
# must fail here, loudly, instead of reaching for a private address.
_GUARDED_NET = "10.201."


def _no_packets_to_the_example_fleet(event: str, args: tuple) -> None:  # type: ignore[type-arg]
    if event in ("socket.connect", "socket.sendto") and args:
        address = args[-1]
        if isinstance(address, tuple) and address and str(address[0]).startswith(_GUARDED_NET):
            raise PermissionError(f"test guard: a packet to the example site's address {address[0]} (use the lab's database)")


sys.addaudithook(_no_packets_to_the_example_fleet)

PG_ADMIN_DEFAULT = "postgresql+psycopg://root@/postgres?host=/var/run/postgresql"
_pg_state: dict[str, object] = {}


def _pg_admin():  # type: ignore[no-untyped-def]
    """An autocommit engine on the admin database, or a reason to skip."""
    if "engine" in _pg_state or "skip" in _pg_state:
        return _pg_state.get("engine"), _pg_state.get("skip")
    from sqlalchemy import create_engine, text

    url = os.environ.get("FLEETCTL_TEST_PG", PG_ADMIN_DEFAULT)
    try:
        engine = create_engine(url, isolation_level="AUTOCOMMIT")
        with engine.connect() as c:
            c.execute(text("SELECT 1"))
    except Exception as e:  # noqa: BLE001 - no server, no driver, no rights: the PostgreSQL tests skip and say why
        _pg_state["skip"] = f"PostgreSQL not reachable at FLEETCTL_TEST_PG ({type(e).__name__}); run scripts/services.sh as root"
        return None, _pg_state["skip"]
    _pg_state["engine"] = engine
    _pg_state["url"] = url
    template = f"fleetctl_tpl_{uuid.uuid4().hex[:8]}"
    with engine.connect() as c:
        c.execute(text(f'CREATE DATABASE "{template}"'))
    from fleetctl.store import get_engine, reset_engines

    get_engine(_db_url(url, template))  # migrate the template once
    reset_engines()
    _pg_state["template"] = template
    return engine, None


def _db_url(admin_url: str, name: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def pytest_sessionfinish(session, exitstatus):  # type: ignore[no-untyped-def]
    engine = _pg_state.get("engine")
    if engine is None:
        return
    from sqlalchemy import text

    from fleetctl.store import reset_engines

    reset_engines()
    with engine.connect() as c:  # type: ignore[attr-defined]
        for name in _pg_state.get("created", []):  # type: ignore[union-attr]
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        c.execute(text(f'DROP DATABASE IF EXISTS "{_pg_state["template"]}" WITH (FORCE)'))


def new_pg_database() -> str:
    engine, skip = _pg_admin()
    if engine is None:
        pytest.skip(str(skip))
    from sqlalchemy import text

    name = f"fleetctl_t_{uuid.uuid4().hex[:10]}"
    with engine.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{_pg_state["template"]}"'))
    _pg_state.setdefault("created", []).append(name)  # type: ignore[union-attr]
    return _db_url(str(_pg_state["url"]), name)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Every test gets its own data folder and never touches the user's."""
    monkeypatch.setenv("FLEETCTL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("FLEETCTL_DB", str(tmp_path / "fleet.db"))
    monkeypatch.setenv("FLEETCTL_ACTOR", "tester@ci")
    # An operator's own secrets config (cmd:NAME) is never read by a test: one that needs it writes its own.
    monkeypatch.setenv("FLEETCTL_SECRETS_CONFIG", str(tmp_path / "no-secrets-config.toml"))
    from fleetctl.store import reset_engines

    reset_engines()
    yield
    reset_engines()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """A fresh, migrated inventory on each backend; FLEETCTL_DB points at it."""
    url = f"sqlite:///{tmp_path / 'inv.db'}" if request.param == "sqlite" else new_pg_database()
    monkeypatch.setenv("FLEETCTL_DB", url)
    return url


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_cli(*args: str) -> Result:
    """Run `fleetctl ARGS` in-process through the real entry point (error mapping included)."""
    from fleetctl.cli import state
    from fleetctl.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    old_argv = sys.argv
    sys.argv = ["fleetctl", *args]
    state.debug = False
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = old_argv
    return Result(code, out.getvalue(), err.getvalue())


@pytest.fixture
def cli():  # type: ignore[no-untyped-def]
    return run_cli



@pytest.fixture
def lab_db_args(db_url):  # type: ignore[no-untyped-def]
    """`lab up` arguments that put the lab's fleet on the same backend as the test's inventory."""
    return [] if db_url.startswith("sqlite") else ["--lab-db", new_pg_database()]


@pytest.fixture
def example_loaded(db_url, cli):  # type: ignore[no-untyped-def]
    """The example site imported."""
    r = cli("inventory", "import", str(EXAMPLE))
    assert r.code == 0, r.err
    return db_url
