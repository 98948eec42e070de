"""The server lifecycle: one table of transitions, and moving along it.

Every transition is written down here once, with why it exists. The current
state, the target state and the last error are stored on the server row;
every move is an Event with who and why. A move is a compare-and-set on the
state column, so two processes cannot both move one server.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, update

from fleetctl.errors import InvalidTransition, NotFound
from fleetctl.lifecycle.states import ServerState as S

# (from, to): why this move exists. Anything not here is refused.
TRANSITIONS: dict[tuple[S, S], str] = {
    (S.REGISTERED, S.INSPECTED): "the BMC answered and matches the inventory",
    (S.INSPECTED, S.INSPECTED): "re-inspected",
    (S.INSPECTED, S.PREPARING): "provisioning starts: firmware, BIOS, switch ports",
    (S.REGISTERED, S.PREPARING): "provisioning starts on a server inspected in the same run",
    (S.PREPARING, S.INSTALLING): "firmware and BIOS at the baseline; the OS install boots",
    (S.INSTALLING, S.CONFIGURING): "the installed OS came up; Ansible configures it",
    (S.CONFIGURING, S.VALIDATING): "configured; the accelerator quick check runs",
    (S.VALIDATING, S.READY): "the quick check passed",
    (S.READY, S.IN_SERVICE): "handed to users (Kubernetes schedules on it)",
    (S.READY, S.PREPARING): "reprovisioned before use",
    (S.IN_SERVICE, S.PREPARING): "reprovisioned (--reprovision, confirmed)",
    (S.IN_SERVICE, S.MAINTENANCE): "taken out of service by an operator",
    (S.READY, S.MAINTENANCE): "taken out before use",
    (S.MAINTENANCE, S.IN_SERVICE): "back in service after maintenance",
    (S.MAINTENANCE, S.PREPARING): "reprovisioned after maintenance",
    (S.MAINTENANCE, S.RMA): "hardware returned to the vendor",
    (S.FAILED, S.PREPARING): "retry after a failed workflow",
    (S.FAILED, S.MAINTENANCE): "an operator takes a failed server in hand",
    (S.FAILED, S.RMA): "a failed server goes back to the vendor",
    (S.RMA, S.REGISTERED): "the repaired or replaced hardware came back",
}
# A workflow step that fails moves its server to FAILED from any working state.
for _s in (S.REGISTERED, S.INSPECTED, S.PREPARING, S.INSTALLING, S.CONFIGURING, S.VALIDATING):
    TRANSITIONS[(_s, S.FAILED)] = "a workflow step failed; last_error says which and why"


def allowed(current: str, wanted: str) -> bool:
    try:
        return (S(current), S(wanted)) in TRANSITIONS
    except ValueError:
        return False


def next_states(current: str) -> list[str]:
    return sorted(str(b) for (a, b) in TRANSITIONS if a == current)


def move(
    conn: Any,
    name: str,
    wanted: str,
    *,
    actor: str,
    reason: str,
    expected: str | None = None,
    force: bool = False,
    error: str | None = None,
) -> str:
    """Move a server to ``wanted``; return the state it left.

    ``expected`` makes it a compare-and-set: the move happens only if the
    server is still in that state. ``force`` (an operator's `set-state
    --force`) allows a move the table does not list; it is audited as such.
    """
    from sqlalchemy import select

    from fleetctl.models.base import utcnow
    from fleetctl.store import tables as T

    try:
        S(wanted)
    except ValueError:
        raise InvalidTransition(f"{wanted!r} is not a lifecycle state ({', '.join(s.value for s in S)})") from None
    row = conn.execute(select(T.server.c.state).where(T.server.c.name == name)).first()
    if row is None:
        raise NotFound(f"no server named {name!r}")
    current = expected if expected is not None else row.state
    if row.state != current:
        raise InvalidTransition(f"{name} is {row.state}, not {current}: someone else moved it")
    if not force and not allowed(current, wanted):
        options = ", ".join(next_states(current)) or "none"
        raise InvalidTransition(f"{name}: {current} -> {wanted} is not a lifecycle transition (from {current}: {options})")
    values: dict[str, Any] = {"state": wanted, "updated_at": utcnow()}
    if wanted == S.FAILED:
        values["last_error"] = error
    elif error is None and wanted != current:
        values["last_error"] = None
    done = conn.execute(
        update(T.server).where(T.server.c.name == name, T.server.c.state == current).values(**values)
    ).rowcount
    if done != 1:
        raise InvalidTransition(f"{name} changed state while we moved it; nothing done")
    detail = f"{current} -> {wanted}" + (" (forced: not in the transition table)" if force and not allowed(current, wanted) else "")
    conn.execute(
        insert(T.event).values(at=utcnow(), actor=actor, action="server.state", object_kind="server",
                               object_name=name, detail=detail + (f"; {error}" if error else ""), reason=reason)  # fmt: skip
    )
    return current
