"""Where fleetctl keeps its state, resolved from the environment.

Kept free of heavy imports: `fleetctl --help` goes through here.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_DB = "FLEETCTL_DB"
ENV_DATA = "FLEETCTL_DATA_DIR"


def data_dir() -> Path:
    """The user's data folder for fleetctl (XDG), or ``FLEETCTL_DATA_DIR``."""
    explicit = os.environ.get(ENV_DATA)
    if explicit:
        return Path(explicit).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("fleetctl", appauthor=False))


def database_url() -> str:
    """The SQLAlchemy URL of the inventory.

    ``FLEETCTL_DB`` may be a URL (``sqlite:///...``, ``postgresql+psycopg://...``)
    or a plain path to a SQLite file; unset, it is ``fleetctl.db`` in the data
    folder.
    """
    raw = os.environ.get(ENV_DB, "").strip()
    if raw and "://" in raw:
        return raw
    path = Path(raw).expanduser() if raw else data_dir() / "fleetctl.db"
    return f"sqlite:///{path.resolve()}"


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
