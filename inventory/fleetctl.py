#!/usr/bin/env python3
"""Ansible dynamic inventory: the fleet, read from fleetctl's store.

    ansible-inventory -i inventory/fleetctl.py --graph
    ansible-playbook  -i inventory/fleetctl.py site.yml
    inventory/fleetctl.py --list | --host NAME

The store is the one the ``fleetctl`` command uses: ``$FLEETCTL_DB`` (a path
to a SQLite file or a SQLAlchemy URL), else ``fleetctl.db`` in the user's data
folder. Groups and host variables: docs/ansible.md.

Ansible runs this file with whatever ``python3`` is first on PATH, which need
not have fleetctl installed. So fleetctl is found, in this order:

1. importable by the Python running this file;
2. the repository's virtual environment, ``<repo>/.venv/bin/python``
   (this file runs again under it);
3. a ``fleetctl`` command on PATH (``fleetctl inventory ansible --list``).

Otherwise it prints one line saying what to do, and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
# Set when this file runs itself again under the repository's venv, so that a
# venv without fleetctl falls through to the next way instead of looping.
REEXEC_ENV = "FLEETCTL_INVENTORY_REEXEC"
PROG = "fleetctl.py"


def _fail(message: str) -> None:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    sys.exit(1)


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description="Ansible dynamic inventory from fleetctl's store.")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--list", action="store_true", help="every group and host, with host variables in _meta")
    g.add_argument("--host", metavar="NAME", help="one host's variables")
    return p.parse_args(argv)


def _import_fleetctl() -> bool:
    # Python puts this file's folder first on sys.path, and this file is named
    # fleetctl.py: `import fleetctl` would import this very script. Drop it.
    sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != HERE]
    sys.modules.pop("fleetctl", None)
    try:
        import fleetctl.inventory.ansible  # noqa: F401
    except ImportError:
        return False
    return True


def _in_venv() -> bool:
    # Compare prefixes, not interpreters: a venv's python is a symlink to the
    # same binary as the system one.
    try:
        return Path(sys.prefix).resolve() == (REPO / ".venv").resolve()
    except OSError:
        return False


def _from_library(args: argparse.Namespace) -> None:
    from fleetctl.errors import FleetError
    from fleetctl.inventory.ansible import ansible_inventory, host_vars

    try:
        data = host_vars(args.host) if args.host else ansible_inventory()
    except FleetError as e:
        _fail(str(e))
    except Exception as e:
        if type(e).__module__.startswith("sqlalchemy"):
            # The database could not be read (gone, locked, refused): one line.
            orig = getattr(e, "orig", None) or e
            _fail(f"database: {str(orig).splitlines()[0]}")
        raise
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _from_command(fleetctl: str, args: argparse.Namespace) -> None:
    argv = [fleetctl, "inventory", "ansible"] + (["--host", args.host] if args.host else ["--list"])
    try:
        done = subprocess.run(argv, check=False)
    except OSError as e:
        _fail(f"cannot run {fleetctl}: {e.strerror}")
    sys.exit(done.returncode)


def main(argv: list[str] | None = None) -> None:
    args = _parse(sys.argv[1:] if argv is None else argv)
    if _import_fleetctl():
        _from_library(args)
        return
    if VENV_PYTHON.exists() and not _in_venv() and not os.environ.get(REEXEC_ENV):
        env = dict(os.environ, **{REEXEC_ENV: "1"})
        os.execve(str(VENV_PYTHON), [str(VENV_PYTHON), str(Path(__file__).resolve()), *sys.argv[1:]], env)
    command = shutil.which("fleetctl")
    if command:
        _from_command(command, args)
    if _in_venv() or os.environ.get(REEXEC_ENV):
        tried = f"the repository's venv ({VENV_PYTHON}) cannot import it"
    else:  # a venv that exists was tried above: execve does not return
        tried = f"{sys.executable} cannot import it, there is no {VENV_PYTHON}"
    _fail(
        f"cannot find fleetctl: {tried}, and there is no fleetctl "
        "command on PATH; run `make venv` in the repository, or install fleetctl"
    )


if __name__ == "__main__":
    main()
