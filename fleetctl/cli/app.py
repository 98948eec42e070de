"""The `fleetctl` command: wires the sub-apps and maps errors to exit codes.

Only typer is imported at start-up; each command imports what it needs, so
``fleetctl --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from fleetctl.cli import state as cli_state
from fleetctl.cli.common import non_empty

# The engines' liveness checks (fleetctl.holders): any command may judge a lock a Temporal run holds, and this costs
# no SDK import (the check imports it when first asked).
from fleetctl.scaleout import liveness as _liveness  # noqa: F401

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from typer._click import Command, Context, HelpFormatter


class _Commands(MutableMapping[str, "Command"]):
    """The root group's commands by name: the names come from the tables below
    (and the plugin entry points), a command is built on first lookup.

    Typer's own suggestions ("Did you mean 'server'?") read the names from
    here, so they cost no import either.
    """

    def __init__(self) -> None:
        self._built: dict[str, Command] = {}

    def _names(self) -> list[str]:
        return [*VERBS, *NOUNS, *_plugins()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in VERBS or name in NOUNS or name in _plugins())

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            command = _build(name)
            if command is None:
                raise KeyError(name)
            self._built[name] = command
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]


class _Interrupted(BaseException):
    """Ctrl-C (or SIGTERM, turned into it) that stopped a command, on its way to :func:`main`.

    typer 0.2x turns a KeyboardInterrupt into ``Exit(130)`` and returns 130 in silence, so :func:`main` could not
    tell it from a command's own ``Exit(130)`` (burn-in detached), and an interrupted command said nothing.
    """


class LazyGroup(TyperGroup):
    """The root group: lists the nouns, verbs and plugins from their tables and
    builds a sub-app only when the command line invokes it.

    Typer builds every command's parameters (evaluating each annotation) before
    it runs any; with sixty commands that was most of `fleetctl --help`'s time.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _Commands()

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:
            raise _Interrupted from e

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        """The Commands section from the tables: no sub-app is imported for it."""
        rows = [*VERBS.items(), *NOUNS.items(), *((name, _plugin_help(ep)) for name, ep in _plugins().items())]
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            # The short line exactly as click would cut the command's own help.
            formatter.write_dl([(name, TyperCommand(name, help=text).get_short_help_str(limit)) for name, text in rows])


app = typer.Typer(
    name="fleetctl",
    help="Bare-metal fleet provisioning and inventory.",
    cls=LazyGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


@app.callback()
def root(
    debug: Annotated[bool, typer.Option("--debug", help="Show a traceback on errors.")] = False,
    database: Annotated[
        str | None,
        # An empty --db is refused, not read as "no --db" (which fell back to $FLEETCTL_DB: another fleet).
        typer.Option("--db", help="Database path or URL (default: $FLEETCTL_DB or the user data folder).", callback=non_empty),
    ] = None,
) -> None:
    cli_state.debug = debug
    if database:
        from fleetctl.config import check_database_setting

        check_database_setting(database.strip(), source="--db")  # named as typed, not as FLEETCTL_DB
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
    "sweep": "The health sweep over BMCs and switches: run it, list runs, show findings, diff.",
    "finding": "Acknowledge known problems found by the sweep.",
    "burnin": "Burn in accelerator boards (--kind mncore2|gpu): a verdict per board, RMA for failing ones; runs and the report.",
    "db": "The database: location and migrations.",
    "k8s": "The servers as Kubernetes nodes: Ready, cordon, taints, pods and budgets, accelerators advertised.",
}


# Verbs that stand alone (`fleetctl provision rack-12`): module (its `command`) and help line.
VERBS: dict[str, str] = {
    "provision": "Bring servers from cabled to ready: firmware, BIOS, VLANs, OS, runtime, check.",
    "report": "The latest sweep as one self-contained HTML page: racks by health, findings, changes, firmware, plots.",
    "exporter": "Serve the latest sweep on /metrics for Prometheus (reads the store, never the fleet).",
    "worker": "Run a Temporal worker for a site (the scale-out engine): its servers' work runs on its site's workers.",
    "discover": "Find BMCs (ranges, DHCP leases, SSDP), place them from the switches, propose site-file entries (read only).",
}


# Sub-apps other distributions add (the lab: `fleetctl lab`), by entry point:
# the core names none of their modules.
PLUGIN_GROUP = "fleetctl.cli"


@functools.cache
def _plugins() -> dict[str, EntryPoint]:
    """{noun: entry point} of the installed CLI plugins, sorted; a name taken twice, or one of ours, is refused.

    Read only when a command line needs them (`--help`, a name that is not one
    of ours), and once per process.
    """
    from importlib.metadata import entry_points

    from fleetctl.errors import FleetError

    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=PLUGIN_GROUP):
        if ep.name in NOUNS or ep.name in VERBS or ep.name in found:
            raise FleetError(f"CLI plugin {ep.name!r} ({ep.value}) clashes with a command of that name", exit_code=3)
        found[ep.name] = ep
    return dict(sorted(found.items()))


def _plugin_help(ep: EntryPoint) -> str:
    """A plugin's line in `fleetctl --help`: its distribution's summary (the module is not imported for it)."""
    return (ep.dist.metadata["Summary"] if ep.dist is not None else None) or ""


def _build(name: str) -> Command | None:
    """The click command for one noun, verb or plugin, built as `app.add_typer` would; None for an unknown name."""
    import importlib

    holder = typer.Typer(rich_markup_mode=app.rich_markup_mode, pretty_exceptions_short=app.pretty_exceptions_short)
    if name in VERBS:
        holder.command(name, help=VERBS[name])(importlib.import_module(f"fleetctl.cli.{name}").command)
    elif name in NOUNS:
        holder.add_typer(importlib.import_module(f"fleetctl.cli.{name}").app, name=name, help=NOUNS[name])
    elif name in _plugins():
        sub = _plugins()[name].load()
        holder.add_typer(sub, name=name, help=(sub.info.help or "").strip() or None)
    else:
        return None
    return typer.main.get_group(holder).commands[name]


# errno values of a write the system refused (disk or quota full, read-only, file too large, I/O error).
_WRITE_FAILURES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO})


def _fail(message: str, code: int) -> None:
    from fleetctl.cli.output import console

    # One line, always: a driver's message may span lines (psycopg adds a
    # hint line), and a long path must not be wrapped at the console width.
    message = " ".join(part.strip() for part in message.splitlines() if part.strip())
    console(stderr=True).print(f"[bold red]error:[/] {message}", markup=True, highlight=False, soft_wrap=True)
    sys.exit(code)


def main() -> None:
    import signal
    import threading

    from fleetctl.errors import FleetError

    cli_state.fleet = None  # main() may run more than once in a process (tests)
    # SIGTERM (`fleetctl jobs cancel`, systemd, kill) stops every command as Ctrl-C does: its `finally` blocks
    # close the journal (the job `interrupted`) and release the locks, where the default action would kill the
    # process mid-write and leave both to be recovered later. Commands with their own handling (the worker, the
    # exporter) install theirs over it. Only the main thread may set a handler (tests call main() elsewhere too).
    from fleetctl.cli.common import sigterm_as_ctrl_c

    previous = signal.signal(signal.SIGTERM, sigterm_as_ctrl_c) if threading.current_thread() is threading.main_thread() else None
    # click's exceptions, wherever this typer takes click from (typer 0.2x carries its own copy).
    click_exc = sys.modules[typer.BadParameter.__module__]
    no_args_help = getattr(click_exc, "NoArgsIsHelpError", ())
    try:
        # Not standalone: click would print a usage error as four lines (usage, a hint, a blank, the error);
        # fleetctl's errors are one line each, so scripts and logs can take the first line as the reason.
        code = app(prog_name="fleetctl", standalone_mode=False)
        if isinstance(code, int) and code:  # typer.Exit(N) comes back as N
            sys.exit(code)
    except no_args_help as e:  # `fleetctl power`: a group without its command shows its help, as click does
        e.show()
        sys.exit(e.exit_code)
    except click_exc.UsageError as e:
        from rich.markup import escape

        where = e.ctx.command_path if e.ctx is not None else "fleetctl"
        _fail(escape(f"{where}: {e.format_message()} (see '{where} --help')"), e.exit_code)
    except click_exc.ClickException as e:  # a file option that cannot be opened, and the like
        from rich.markup import escape

        _fail(escape(e.format_message()), e.exit_code)
    except typer.Abort:  # (click.Abort under older typer: the same class) a confirmation declined, or end of input at a prompt
        _fail("aborted", 1)
    except FleetError as e:
        if cli_state.debug:
            raise
        from rich.markup import escape

        _fail(escape(str(e)), e.exit_code)
    except (KeyboardInterrupt, _Interrupted):
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
        if isinstance(e, OSError) and e.errno in _WRITE_FAILURES:
            # A file a command writes (a report, a backup) that the system refused part-way: the destination passed
            # its checks (cli/common.py output_file) and the disk filled or went read-only. Not a bug of ours.
            where = f"{e.filename}: " if e.filename else ""
            _fail(escape(f"{where}cannot write: {e.strerror or e}"), 2)
        if type(e).__module__.startswith("sqlalchemy"):
            # The database itself failed (locked, gone, refused): not a bug of ours.
            from fleetctl.errors import EXIT_STORE

            orig = getattr(e, "orig", None) or e
            _fail(escape(f"database: {str(orig).splitlines()[0]}"), EXIT_STORE)
        _fail(escape(f"internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)"), 3)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def entry() -> None:
    """The console script: :func:`main`, then out, skipping the interpreter's teardown once Temporal's SDK was loaded.

    The SDK's Rust core keeps threads of its own; tearing the interpreter down
    under them now and then aborts the process ("Fatal Python error:
    PyGILState_Release", temporalio/sdk-python#300) after the command has
    done and said everything, turning its exit code into SIGABRT. Tests call
    :func:`main` in process and never reach this.
    """
    try:
        main()
        code = 0
    except SystemExit as e:
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    if "temporalio.bridge" in sys.modules:
        import logging

        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
