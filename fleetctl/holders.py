"""Who acts and who holds: the audit log's actor, the holder of a lock or a run, and whether that holder still runs.

A lock (a server's reservation), a job's owner and a run's pid name their
holder; a dead holder's leftovers are recovered by asking whether it runs. A
process of this host is asked about directly (:mod:`fleetctl.procs`). A run on
an engine that outlives its processes (Temporal: ``user:temporal:WORKFLOW``) is
asked about through the checker that engine registers
(:func:`register_liveness`), so this module, the store and the locks below the
engines know none of them. A holder nobody here can judge is unknown (None),
never gone: only a holder known gone has its locks broken.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

from fleetctl.errors import FleetError
from fleetctl.procs import pid_alive

# The engine whose runs hold locks as ``user:temporal:WORKFLOW`` (the key it registers its checker under).
TEMPORAL = "temporal"
TEMPORAL_MARK = f":{TEMPORAL}:"

# Whether an engine's run still runs, by the run's id: True, False (closed: its locks may be recovered),
# None (cannot tell here).
LivenessCheck = Callable[[str], bool | None]

_CHECKS: dict[str, LivenessCheck] = {}


def register_liveness(engine: str, check: LivenessCheck) -> None:
    """Register how to ask whether a run of ``engine`` still runs; done by the engine's package when it is loaded.

    Registering the same function again is harmless (a module loaded twice, a reload); another one for the same
    engine is refused: two answers to "is this run alive" would let one break a lock the other holds.

    Raises:
        FleetError: another check is already registered for ``engine``.
    """
    known = _CHECKS.get(engine)
    if known is not None and (known.__module__, known.__qualname__) != (check.__module__, check.__qualname__):
        raise FleetError(f"a liveness check for engine {engine!r} is already registered ({known.__module__}.{known.__qualname__})")
    _CHECKS[engine] = check


def unregister_liveness(engine: str) -> None:
    """Forget ``engine``'s check (tests); its runs are then unknown, never gone."""
    _CHECKS.pop(engine, None)


def liveness_engines() -> list[str]:
    """The engines with a registered check, sorted."""
    return sorted(_CHECKS)


def actor() -> str:
    """Who is acting, for the audit log."""
    explicit = os.environ.get("FLEETCTL_ACTOR")
    if explicit:
        return explicit
    import getpass  # (not for `fleetctl --help`, whose wiring imports this module)

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login variable and no passwd entry (KeyError before 3.13, OSError since)
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: ``user:host:pid`` in the reservation column, or ``user:temporal:WORKFLOW`` for a run on Temporal.

    ``host`` and ``pid`` are None when the stored value is not of either form
    (a lock taken by hand): such a holder is never taken for gone. A run on
    Temporal outlives the worker process that locked for it: its holder is
    its parent workflow, gone once Temporal says that workflow is closed.
    """

    user: str
    host: str | None = None
    pid: int | None = None
    workflow: str | None = None

    @classmethod
    def parse(cls, value: str) -> Holder:
        user, mark, workflow = value.partition(TEMPORAL_MARK)
        if mark and workflow and not workflow.isdigit():  # (a job id after the mark: an older form, never taken for gone)
            return cls(user, workflow=workflow)
        parts = value.rsplit(":", 2)
        if len(parts) == 3 and parts[2].isdigit() and str(int(parts[2])) == parts[2] and parts[1] != TEMPORAL:
            return cls(parts[0], parts[1], int(parts[2]))
        return cls(value)

    @classmethod
    def of_workflow(cls, user: str, workflow: str | None) -> Holder:
        """A run on Temporal, held by its parent workflow (an activity's ``workflow_id``, never None in a workflow)."""
        if not workflow or workflow.isdigit():
            raise FleetError(f"a run on Temporal is held by its workflow's id, not {workflow!r}")
        return cls(user, workflow=workflow)

    @classmethod
    def me(cls) -> Holder:
        """This process."""
        return cls(actor(), socket.gethostname(), os.getpid())

    def alive(self) -> bool | None:
        """Whether the process (or workflow) holding the lock still runs (None: another host, an engine whose
        check is not registered in this process, or unknown)."""
        if self.workflow is not None:
            check = _CHECKS.get(TEMPORAL)
            return None if check is None else check(self.workflow)
        if self.host is None or self.pid is None or self.host != socket.gethostname():
            return None
        return pid_alive(self.pid)

    def __str__(self) -> str:
        if self.workflow is not None:
            return f"{self.user}{TEMPORAL_MARK}{self.workflow}"
        return self.user if self.host is None else f"{self.user}:{self.host}:{self.pid}"
