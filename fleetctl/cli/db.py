"""`fleetctl db`: where the inventory lives and its schema version."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True)


@app.command("upgrade")
def upgrade() -> None:
    """Apply pending schema migrations (also done automatically on first use)."""
    from fleetctl.store import HEAD, current_revision, get_engine, redact_url

    engine = get_engine()  # migrates on first use
    typer.echo(f"{redact_url(str(engine.url))}: schema at revision {current_revision(engine)} (head {HEAD})")


@app.command("info")
def info() -> None:
    """Show the database URL (password hidden) and schema revision."""
    from fleetctl.store import current_revision, get_engine, redact_url

    engine = get_engine()
    typer.echo(f"url: {redact_url(str(engine.url))}")
    typer.echo(f"dialect: {engine.dialect.name}")
    typer.echo(f"revision: {current_revision(engine)}")
