"""The one registry of checks: the built-in ones, and plugins.

A plugin distribution adds checks by naming a module in the entry-point group
``fleetctl.checks``; importing it registers its checks with :func:`check`::

    [project.entry-points."fleetctl.checks"]
    site_power = "mychecks.power"
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fleetctl.errors import FleetError
from fleetctl.sweep.model import CheckSpec, Problem, Status

_CHECKS: dict[str, CheckSpec] = {}
_loaded = False

BUILTIN_MODULES = (
    "fleetctl.sweep.server_checks", "fleetctl.sweep.switch_checks", "fleetctl.sweep.host_checks", "fleetctl.sweep.k8s_checks",
)  # fmt: skip
#: The checks each ``--level`` runs: bmc's alone, host's (SSH to the OS) or k8s's (the nodes, from their clusters) added.
LEVELS: dict[str, frozenset[str]] = {
    "bmc": frozenset({"bmc"}),
    "host": frozenset({"bmc", "host"}),
    "k8s": frozenset({"bmc", "k8s"}),
    "all": frozenset({"bmc", "host", "k8s"}),  # `fleetctl sweep checks` lists every one
}


def check(
    name: str, *, kind: str, severity: Status, reads: tuple[str, ...], cost: str = "0 requests", level: str = "bmc",
    needs: tuple[str, ...] | None = None,
) -> Callable[[Callable[[Any, Any], Iterable[Problem]]], Callable[[Any, Any], Iterable[Problem]]]:
    """Register ``fn(reading, expect) -> Iterable[Problem]`` as the check ``name``.

    ``reads`` says what it reads for people (``fleetctl sweep checks``); ``needs`` the same for the sweep, in
    the keys of :data:`fleetctl.sweep.collect.READ_KEYS` (a server check) so that a sweep reads only what
    its enabled checks judge. A check that names no ``needs`` gets every part read.
    """

    def register(fn: Callable[[Any, Any], Iterable[Problem]]) -> Callable[[Any, Any], Iterable[Problem]]:
        key = f"{kind}:{name}"
        if key in _CHECKS and _CHECKS[key].fn is not fn:
            raise FleetError(f"two checks named {name!r} for {kind}s ({_CHECKS[key].fn.__module__} and {fn.__module__})")
        doc = (fn.__doc__ or "").strip().splitlines()
        _CHECKS[key] = CheckSpec(name, kind, severity, reads, cost, level, doc[0] if doc else "", fn, needs)
        return fn

    return register


def _load() -> None:
    global _loaded
    if _loaded:
        return
    import importlib
    from importlib.metadata import entry_points

    for mod in BUILTIN_MODULES:
        importlib.import_module(mod)
    for ep in entry_points(group="fleetctl.checks"):
        try:
            ep.load()
        except Exception as e:
            raise FleetError(f"check plugin {ep.name} ({ep.value}) failed to load: {type(e).__name__}: {e}") from e
    _loaded = True


def checks(kind: str | None = None, level: str = "bmc") -> list[CheckSpec]:
    """The registered checks for a target kind, up to a level (``host`` includes ``bmc``)."""
    _load()
    levels = LEVELS.get(level, LEVELS["host"])
    return [c for c in _CHECKS.values() if (kind is None or c.kind == kind) and c.level in levels]
