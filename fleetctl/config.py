"""Where fleetctl keeps its state, resolved from the environment.

Kept free of heavy imports: `fleetctl --help` goes through here.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_DB = "FLEETCTL_DB"
ENV_DATA = "FLEETCTL_DATA_DIR"


def _shown(raw: str) -> str:
    """A setting's value for a message: a long one is cut."""
    return raw if len(raw) <= 200 else raw[:197] + "..."


def data_dir() -> Path:
    """The user's data folder for fleetctl (XDG), or ``FLEETCTL_DATA_DIR``."""
    explicit = os.environ.get(ENV_DATA)
    if explicit:
        return Path(explicit).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("fleetctl", appauthor=False))


# A path that does not exist yet names a new SQLite file only with one of these
# endings: `FLEETCTL_DB=garbage` (or a typo of a variable's value) would
# otherwise create an empty database in the working folder, and show an empty fleet.
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def check_database_setting(raw: str, *, source: str = ENV_DB) -> str:
    """``raw`` (a URL, or a path to a SQLite file) as a SQLAlchemy URL, checked.

    A value without ``://`` is a path: an existing file, or a new one whose
    name ends in .db, .sqlite or .sqlite3 (its folder is created on first
    use). ``source`` names the setting in the message (``FLEETCTL_DB``, ``--db``).

    Raises:
        InputError: the value is neither a URL nor such a path.
    """
    if "://" in raw:
        return raw
    path = Path(raw).expanduser()
    shown = f"{source} {_shown(raw)}" if source.startswith("-") else f"{source}={_shown(raw)}"
    problem = None
    if path.is_dir():
        problem = "is a folder, not a database file; give a path ending in .db, or a URL"
    elif not path.exists() and path.suffix.lower() not in SQLITE_SUFFIXES:
        problem = "no such database file; give a path ending in .db to create one, or a URL"
    if problem:
        from fleetctl.errors import InputError

        raise InputError(f"{shown}: {problem}")
    return f"sqlite:///{path.resolve()}"


def database_url() -> str:
    """The SQLAlchemy URL of the inventory.

    ``FLEETCTL_DB`` may be a URL (``sqlite:///...``, ``postgresql+psycopg://...``)
    or a path to a SQLite file (see ``check_database_setting``); unset, it is
    ``fleetctl.db`` in the data folder.
    """
    raw = os.environ.get(ENV_DB, "").strip()
    if raw:
        return check_database_setting(raw)
    return f"sqlite:///{(data_dir() / 'fleetctl.db').resolve()}"


# --- numbers from the environment ----------------------------------------------------
#
# Read where they enter, once, with a message naming the variable: a value that
# is not a number, or one that makes no sense (-1, 0, nan, inf), stops the
# command with exit 2 instead of failing later on every server.


def _env_raw(name: str) -> str | None:
    raw = os.environ.get(name, "").strip()
    return raw or None


def env_seconds(name: str, *, maximum: float = 86400.0) -> float | None:
    """A number of seconds > 0 (and at most ``maximum``) from the variable ``name``; None when unset or empty.

    Raises:
        InputError: the value is not a finite number in that range.
    """
    raw = _env_raw(name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= maximum:  # false for nan too
        from fleetctl.errors import InputError

        raise InputError(f"{name}={_shown(raw)}: must be a number of seconds > 0 (at most {maximum:g})")
    return value


def env_count(name: str, *, minimum: int = 0, maximum: int, what: str) -> int | None:
    """A whole number in ``minimum..maximum`` from the variable ``name``; None when unset or empty.

    ``what`` names the unit in the message ("retries").

    Raises:
        InputError: the value is not a whole number in that range.
    """
    raw = _env_raw(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if not minimum <= value <= maximum:
        from fleetctl.errors import InputError

        raise InputError(f"{name}={_shown(raw)}: must be a whole number of {what}, {minimum}..{maximum}")
    return value


ENV_BMC_TIMEOUT = "FLEETCTL_BMC_TIMEOUT"
ENV_BMC_RETRIES = "FLEETCTL_BMC_RETRIES"
ENV_BMC_AUTH = "FLEETCTL_BMC_AUTH"
#: How the Redfish driver logs in to a BMC: a session (the default), or HTTP Basic on every request (docs/bmc.md).
BMC_AUTH_MODES = ("session", "basic")


def bmc_auth() -> str | None:
    """The BMC authentication ``$FLEETCTL_BMC_AUTH`` chooses (one of :data:`BMC_AUTH_MODES`); None when unset.

    Raises:
        InputError: another value (checked before any BMC is contacted, not once per BMC).
    """
    raw = _env_raw(ENV_BMC_AUTH)
    if raw is None:
        return None
    if raw.lower() not in BMC_AUTH_MODES:
        from fleetctl.errors import InputError

        raise InputError(f"{ENV_BMC_AUTH}={_shown(raw)}: must be one of {', '.join(BMC_AUTH_MODES)}")
    return raw.lower()


def bmc_limits() -> dict[str, float | int]:
    """Per-request ``timeout`` and ``retries`` for the BMC (and switch) drivers, from the environment.

    Only the variables that are set are returned; the driver's defaults hold for the others.
    """
    out: dict[str, float | int] = {}
    timeout = env_seconds(ENV_BMC_TIMEOUT)
    if timeout is not None:
        out["timeout"] = timeout
    retries = env_count(ENV_BMC_RETRIES, maximum=10, what="retries")
    if retries is not None:
        out["retries"] = retries
    bmc_auth()  # the driver reads it per client; a bad value stops the command here, before the first BMC
    return out


# --- the scale-out engine (Temporal) -------------------------------------------------

ENV_TEMPORAL = "FLEETCTL_TEMPORAL"
ENV_TEMPORAL_NAMESPACE = "FLEETCTL_TEMPORAL_NAMESPACE"


def temporal_address() -> str | None:
    """``HOST:PORT`` of the Temporal frontend when the scale-out engine is configured; None: the embedded engine.

    ``FLEETCTL_TEMPORAL`` sets it; empty or unset, work runs in process (the default).
    """
    raw = os.environ.get(ENV_TEMPORAL, "").strip()
    return raw or None


def temporal_namespace() -> str:
    """The Temporal namespace (``FLEETCTL_TEMPORAL_NAMESPACE``; ``default``): one per environment in production."""
    return os.environ.get(ENV_TEMPORAL_NAMESPACE, "").strip() or "default"
