"""The board states: one table of transitions, and moving a board along it.

The servers' table (``lifecycle/machine.py``) done again for accelerator
boards. Every change of ``accelerator_board.state`` goes through
:func:`move_board`: an operator's ``board set --state``, a burn-in verdict,
a failed flash of a board's firmware. A site file sets a board's state only
when it creates the board (as it does a server's); that is no transition, and
the import's own event records it.

A move is made inside the caller's transaction (the burn-in's results, the
RMA entry and the board's state commit together or not at all), is a
compare-and-set on the state column, so two writers cannot both move one
board from the state they read, and writes an Event (``board.state``) naming
the actor, the reason, the state left and the state entered.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, or_, select, update

from fleetctl.errors import InvalidTransition, NotFound
from fleetctl.lifecycle.states import BoardState as B
from fleetctl.models.base import utcnow
from fleetctl.store import tables as T

# (from, to): why this move exists and who makes it. Anything not here is refused.
# Burn-in maps its verdicts to states (pass: ok, degraded: suspect, fail: rma);
# the firmware campaign fails the board whose flash failed; an operator may
# make any move listed (`board set --state`). Nothing moves a board to
# ``unknown``: it is where a site file may start a board nobody checked yet.
TRANSITIONS: dict[tuple[B, B], str] = {
    (B.OK, B.SUSPECT): "burn-in judged it degraded, or an operator saw something (ECC errors, a hot board)",
    (B.OK, B.FAILED): "a firmware flash of the board failed (firmware campaign), or an operator says it failed",
    (B.OK, B.RMA): "burn-in failed it (an RMA entry is opened), or an operator sends it back",
    (B.SUSPECT, B.OK): "burn-in passed it, or an operator cleared the suspicion",
    (B.SUSPECT, B.FAILED): "a firmware flash of the suspect board failed",
    (B.SUSPECT, B.RMA): "burn-in confirmed it fails, or an operator sends it back",
    (B.FAILED, B.OK): "the failure is fixed (flashed again) and burn-in passed it, or an operator cleared it",
    (B.FAILED, B.SUSPECT): "burn-in after the failure: it works, but degraded",
    (B.FAILED, B.RMA): "burn-in failed it after the failure, or an operator sends it back",
    (B.UNKNOWN, B.OK): "its first burn-in passed (a batch that arrived), or an operator checked it",
    (B.UNKNOWN, B.SUSPECT): "its first burn-in judged it degraded",
    (B.UNKNOWN, B.FAILED): "a firmware flash of a board nobody had checked failed",
    (B.UNKNOWN, B.RMA): "its first burn-in failed it (an RMA entry is opened)",
    (B.RMA, B.OK): "back from the vendor repaired, or found not faulty; only once its RMA entry is closed",
}
# From rma nothing else: a board on its way back to the vendor is not judged
# again (a later burn-in that passes it leaves it rma while its entry is open).


def allowed(current: str, wanted: str) -> bool:
    """Whether ``current -> wanted`` is in the table (unknown state names are not)."""
    try:
        return (B(current), B(wanted)) in TRANSITIONS
    except ValueError:
        return False


def next_states(current: str) -> list[str]:
    """The states the table allows from ``current``, sorted."""
    return sorted(str(b) for (a, b) in TRANSITIONS if a == current)


def board_name(serial: str, position: int | None) -> str:
    """How a board is named in events and messages: its serial, or SERIAL/POSITION where boards share one."""
    return serial if position is None else f"{serial}/{position}"


def _open_rma(conn: Any, board_id: int, serial: str) -> bool:
    """Whether the board has an RMA entry not yet closed (shipped or cleared)."""
    r = T.board_rma.c
    mine = or_(r.board_id == board_id, (r.board_id.is_(None)) & (r.serial == serial))  # an entry of a board since re-added
    return conn.execute(select(r.id).where(mine, r.closed_at.is_(None)).limit(1)).first() is not None


def move_board(
    conn: Any,
    board_id: int,
    wanted: str,
    *,
    actor: str,
    reason: str | None,
    expected: str | None = None,
    force: bool = False,
    detail: str | None = None,
) -> str:
    """Move a board to ``wanted`` in the caller's transaction; return the state it left.

    Args:
        conn: a connection inside the caller's write transaction; nothing is committed here.
        board_id: the board's row id.
        wanted: a :class:`BoardState` value.
        actor: who moves it (``user@host``), for the event.
        reason: why, for the event.
        expected: the state the caller read and decided on; the move happens
            only if the board is still in it (compare-and-set). Without it,
            the state read here is the one compared.
        force: an operator's ``board set --force``: a move the table does not
            list is made all the same, and audited as forced.
        detail: evidence kept in the event after ``from -> to``.

    Returns:
        The state the board was in. A board already in ``wanted`` is not
        moved and no event is written.

    Raises:
        NotFound: no board has that id.
        InvalidTransition: ``wanted`` is not a board state; the board is not
            in ``expected`` or changed state while it was moved (someone else
            moved it: their move stands); the table has no such move; or it
            leaves ``rma`` while its RMA entry is open.
    """
    try:
        B(wanted)
    except ValueError:
        raise InvalidTransition(f"{wanted!r} is not a board state ({', '.join(s.value for s in B)})") from None
    bt = T.accelerator_board.c
    row = conn.execute(select(bt.serial, bt.position, bt.state).where(bt.id == board_id)).first()
    if row is None:
        raise NotFound(f"no board with id {board_id}")
    name = board_name(row.serial, row.position)
    current = expected if expected is not None else row.state
    if row.state != current:
        raise InvalidTransition(f"board {name} is {row.state}, not {current}: someone else moved it")
    if current == wanted:
        return current
    # Why the move is refused, and what the message adds: None when it is allowed.
    refused: tuple[str, str] | None = None
    if not allowed(current, wanted):
        refused = ("not in the board transition table", f"from {current}: {', '.join(next_states(current)) or 'none'}")
    elif current == B.RMA and _open_rma(conn, board_id, row.serial):
        refused = ("its RMA entry is open", f"close it first: `fleetctl board rma close {row.serial} --reason ...`")
    if refused is not None and not force:
        raise InvalidTransition(f"board {name}: {current} -> {wanted} is refused: {refused[0]} ({refused[1]})")
    done = conn.execute(update(T.accelerator_board).where(bt.id == board_id, bt.state == current).values(state=str(wanted))).rowcount
    if done != 1:
        raise InvalidTransition(f"board {name} changed state while we moved it; nothing done")
    text = f"{current} -> {wanted}" + (f" (forced: {refused[0]})" if refused else "")
    conn.execute(
        insert(T.event).values(
            at=utcnow(),
            actor=actor,
            action="board.state",
            object_kind="board",
            object_name=name,
            detail=text + (f"; {detail}" if detail else ""),
            reason=reason,
        )  # fmt: skip
    )
    return current
