"""The `fleetctl` command: wires the sub-apps and maps errors to exit codes.

Only typer is imported at start-up; each command imports what it needs, so
``fleetctl --help`` stays fast.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from fleetctl.cli import bios, board, boot, db, events, firmware, inventory, jobs, lab, media, power, rack, server, site, switch
from fleetctl.cli import state as cli_state

app = typer.Typer(
    name="fleetctl",
    help="Bare-metal fleet provisioning and inventory.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


@app.callback()
def root(
    debug: Annotated[bool, typer.Option("--debug", help="Show a traceback on errors.")] = False,
    database: Annotated[
        str | None, typer.Option("--db", help="Database path or URL (default: $FLEETCTL_DB or the user data folder).")
    ] = None,
) -> None:
    cli_state.debug = debug
    if database:
        os.environ["FLEETCTL_DB"] = database


app.add_typer(site.app, name="site", help="Sites (datacenters, halls).")
app.add_typer(rack.app, name="rack", help="Racks and their elevation.")
app.add_typer(server.app, name="server", help="Servers.")
app.add_typer(board.app, name="board", help="Accelerator boards (MN-Core, GPU).")
app.add_typer(switch.app, name="switch", help="Switches and their ports.")
app.add_typer(inventory.app, name="inventory", help="Import and export site files; the Ansible inventory.")
app.add_typer(events.app, name="events", help="The audit log.")
app.add_typer(jobs.app, name="jobs", help="The journal: every run, server by server.")
app.add_typer(power.app, name="power", help="Power state and control through the BMCs.")
app.add_typer(boot.app, name="boot", help="Boot override: PXE, CD, HDD, a UEFI target.")
app.add_typer(media.app, name="media", help="Virtual media: insert and eject ISOs.")
app.add_typer(bios.app, name="bios", help="BIOS attributes: read, stage, apply, verify.")
app.add_typer(firmware.app, name="firmware", help="Firmware versions against the baseline.")
app.add_typer(lab.app, name="lab", help="The lab: simulated BMCs for the inventory.")
app.add_typer(db.app, name="db", help="The database: location and migrations.")


def _fail(message: str, code: int) -> None:
    from fleetctl.cli.output import console

    # One line, always: a driver's message may span lines (psycopg adds a
    # hint line), and a long path must not be wrapped at the console width.
    message = " ".join(part.strip() for part in message.splitlines() if part.strip())
    console(stderr=True).print(f"[bold red]error:[/] {message}", markup=True, highlight=False, soft_wrap=True)
    sys.exit(code)


def main() -> None:
    from fleetctl.errors import FleetError

    try:
        app(prog_name="fleetctl")
    except FleetError as e:
        if cli_state.debug:
            raise
        from rich.markup import escape

        _fail(escape(str(e)), e.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as e:
        if cli_state.debug:
            raise
        from rich.markup import escape

        if type(e).__module__.startswith("pydantic") and hasattr(e, "errors"):
            # An option that fails the site-file schema (`server add --bmc ftp://x`):
            # bad input, named by its field, not an internal error.
            first = e.errors()[0]
            loc = [str(p) for p in first["loc"]]
            # A single field is an option the operator typed: name it as such.
            where = f"--{loc[0].replace('_', '-')}" if len(loc) == 1 else ".".join(loc)
            msg = str(first["msg"]).removeprefix("Value error, ")
            _fail(escape(f"{where}: {msg}" if where else msg), 2)
        if type(e).__module__.startswith("sqlalchemy"):
            # The database itself failed (locked, gone, refused): not a bug of ours.
            orig = getattr(e, "orig", None) or e
            _fail(escape(f"database: {str(orig).splitlines()[0]}"), 1)
        _fail(escape(f"internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)"), 3)


if __name__ == "__main__":
    main()
