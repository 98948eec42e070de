"""Alembic environment: runs on the connection fleetctl hands it."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import fleetctl.models  # noqa: F401  (registers the tables)

target_metadata = SQLModel.metadata
connection = context.config.attributes.get("connection")

if connection is None:
    from fleetctl.store import get_engine

    with get_engine().connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
else:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
