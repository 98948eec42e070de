"""`fleetctl db`: where the inventory lives, its schema version, backup and restore."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fleetctl.cli.common import a_path, output_file

app = typer.Typer(no_args_is_help=True)


@app.command("upgrade")
def upgrade() -> None:
    """Apply pending schema migrations (also done automatically on first use).

    Refused (exit 2) while another fleetctl process works on the database.
    """
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


@app.command("backup")
def backup(
    file: Annotated[Path, typer.Argument(help="Where to write the backup.", parser=output_file)],
    force: Annotated[bool, typer.Option("--force", help="Overwrite FILE if it exists.")] = False,
) -> None:
    """Back up the whole database to FILE, consistent while other processes write.

    SQLite: a SQLite file (the online backup API). PostgreSQL: pg_dump's
    custom format (pg_dump on PATH). See docs/operations.md.
    """
    from fleetctl.config import database_url
    from fleetctl.store import backup as bk
    from fleetctl.store import redact_url

    url = database_url()
    written = bk.backup(url, file, force=force)
    held = bk.counts(url)
    typer.echo(f"backup of {redact_url(url)} ({held or 'empty'}) written to {written.path}"
               f" ({written.dialect}, schema revision {written.revision}, {written.path.stat().st_size:,} bytes)")  # fmt: skip


@app.command("restore")
def restore(
    file: Annotated[Path, typer.Argument(help="A backup written by `fleetctl db backup`.", parser=a_path)],
    yes: Annotated[bool, typer.Option("--yes", help="Replace an inventory that is not empty.")] = False,
) -> None:
    """Replace the database with the backup FILE, atomically.

    Refuses (exit 2, nothing changed) a backup of a newer schema, one of the
    other backend, one that is damaged or lacks a table or column of its
    schema revision, and (without --yes) a database that holds an inventory;
    an older backup is migrated.
    """
    from fleetctl.config import database_url
    from fleetctl.store import backup as bk
    from fleetctl.store import redact_url

    url = database_url()
    restored = bk.restore(url, file, yes=yes)
    typer.echo(f"restored {file} (schema revision {restored.revision}) into {redact_url(url)}: {bk.counts(url) or 'empty'}")
