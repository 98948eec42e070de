"""The `fleetctl` command: wires the sub-apps and maps errors to exit codes.

Only typer is imported at start-up; each command imports what it needs, so
``fleetctl --help`` stays fast.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

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


# The nouns, in the order `fleetctl --help` lists them: module and help line.
NOUNS: dict[str, str] = {
    "site": "Sites (datacenters, halls).",
    "rack": "Racks and their elevation.",
    "server": "Servers.",
    "board": "Accelerator boards (MN-Core, GPU).",
    "switch": "Switches and their ports.",
    "inventory": "Import and export site files; the Ansible inventory.",
    "events": "The audit log.",
    "jobs": "The journal: every run, server by server.",
    "power": "Power state and control through the BMCs.",
    "boot": "Boot override: PXE, CD, HDD, a UEFI target.",
    "media": "Virtual media: insert and eject ISOs.",
    "bios": "BIOS attributes: read, stage, apply, verify.",
    "firmware": "Firmware versions against the baseline.",
    "db": "The database: location and migrations.",
}


# Verbs that stand alone (`fleetctl provision rack-12`): module (its `command`) and help line.
VERBS: dict[str, str] = {
    "provision": "Bring servers from cabled to ready: firmware, BIOS, VLANs, OS, runtime, check.",
}


# Sub-apps other distributions add (the lab: `fleetctl lab`), by entry point:
# the core names none of their modules.
PLUGIN_GROUP = "fleetctl.cli"


def _plugins() -> dict[str, object]:
    """{noun: entry point} of the installed CLI plugins, sorted; a name taken twice, or one of ours, is refused."""
    from importlib.metadata import entry_points

    from fleetctl.errors import FleetError

    found: dict[str, object] = {}
    for ep in entry_points(group=PLUGIN_GROUP):
        if ep.name in NOUNS or ep.name in VERBS or ep.name in found:
            raise FleetError(f"CLI plugin {ep.name!r} ({ep.value}) clashes with a command of that name", exit_code=3)
        found[ep.name] = ep
    return dict(sorted(found.items()))


def _register(argv: list[str]) -> None:
    """Add the sub-apps: only the one the command line names, when it names one.

    Typer builds every command's parameters before it runs any; with sixty
    commands that was a third of a `server list`'s time.
    """
    import importlib

    wanted = next((a for a in argv if not a.startswith("-")), None)
    names = [wanted] if wanted in NOUNS else ([] if wanted in VERBS else list(NOUNS))
    present = {g.name for g in app.registered_groups}  # main() may run more than once in a process (tests)
    for name in names:
        if name in present:
            continue
        module = importlib.import_module(f"fleetctl.cli.{name}")
        app.add_typer(module.app, name=name, help=NOUNS[name])
    plugins = _plugins()
    for name, ep in plugins.items():
        if name in present or (wanted is not None and wanted != name and (wanted in NOUNS or wanted in VERBS or wanted in plugins)):
            continue
        sub = ep.load()  # type: ignore[attr-defined]
        app.add_typer(sub, name=name, help=(sub.info.help or "").strip() or None)
    verbs = {c.name for c in app.registered_commands}
    for name in [wanted] if wanted in VERBS else ([] if wanted in NOUNS else list(VERBS)):
        if name not in verbs:
            module = importlib.import_module(f"fleetctl.cli.{name}")
            app.command(name, help=VERBS[name])(module.command)


def _fail(message: str, code: int) -> None:
    from fleetctl.cli.output import console

    # One line, always: a driver's message may span lines (psycopg adds a
    # hint line), and a long path must not be wrapped at the console width.
    message = " ".join(part.strip() for part in message.splitlines() if part.strip())
    console(stderr=True).print(f"[bold red]error:[/] {message}", markup=True, highlight=False, soft_wrap=True)
    sys.exit(code)


def main() -> None:
    from fleetctl.errors import FleetError

    # --db takes a value: skip it when looking for the noun.
    args = sys.argv[1:]
    words = [a for i, a in enumerate(args) if not (i > 0 and args[i - 1] == "--db")]
    _register(words)
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
