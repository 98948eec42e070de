"""The board state table (fleetctl/lifecycle/boards.py): its moves, its refusals, its writers, its audit, its races.

On SQLite and PostgreSQL (the example site imported). Every writer of a
board's state (`board set --state`, burn-in's verdicts, a failed flash of a
board) is shown going through ``move_board``; two writers that read the same
state cannot both move the board from it.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
from sqlalchemy import event, insert, select, update

from fleetctl.errors import InvalidTransition
from fleetctl.lifecycle import boards
from fleetctl.lifecycle.boards import TRANSITIONS, allowed, move_board, next_states
from fleetctl.lifecycle.states import BoardState as B

SERVER = "mn-tyo1-r12-01"  # the example's MN-Core server with boards MN2B-01012010..13 in slots 0..3
SERIALS = ["MN2B-01012010", "MN2B-01012011", "MN2B-01012012", "MN2B-01012013"]

# The moves the code makes, written out once more as the specification of the table.
EXPECTED = {
    (B.OK, B.SUSPECT), (B.OK, B.FAILED), (B.OK, B.RMA),
    (B.SUSPECT, B.OK), (B.SUSPECT, B.FAILED), (B.SUSPECT, B.RMA),
    (B.FAILED, B.OK), (B.FAILED, B.SUSPECT), (B.FAILED, B.RMA),
    (B.UNKNOWN, B.OK), (B.UNKNOWN, B.SUSPECT), (B.UNKNOWN, B.FAILED), (B.UNKNOWN, B.RMA),
    (B.RMA, B.OK),
}  # fmt: skip


def _engine() -> Any:
    from fleetctl.store import get_engine

    return get_engine()


def _board(serial: str) -> tuple[int, str]:
    from fleetctl.store import tables as T

    with _engine().connect() as c:
        row = c.execute(select(T.accelerator_board.c.id, T.accelerator_board.c.state).where(T.accelerator_board.c.serial == serial)).one()
    return row.id, row.state


def _put(serial: str, state: str) -> None:
    """Test setup only: a board in a given state without a move (as an old database may hold it)."""
    from fleetctl.store import tables as T

    with _engine().begin() as c:
        c.execute(update(T.accelerator_board).where(T.accelerator_board.c.serial == serial).values(state=state))


def _events(serial: str, action: str = "board.state") -> list[Any]:
    from fleetctl.store import tables as T

    e = T.event.c
    with _engine().connect() as c:
        return list(c.execute(select(e.actor, e.detail, e.reason).where(e.action == action, e.object_name == serial).order_by(e.id)))


def _open_rma(serial: str) -> None:
    from fleetctl.store import tables as T

    board_id, _ = _board(serial)
    with _engine().begin() as c:
        c.execute(insert(T.board_rma).values(board_id=board_id, serial=serial, kind="mncore2", server=SERVER, slot=0, source="burnin:1",
                                             reason="checksum", evidence={}, actor="tester@ci", opened_at=_now()))  # fmt: skip


def _now() -> Any:
    from fleetctl.models.base import utcnow

    return utcnow()


# --- the table --------------------------------------------------------------------------


def test_the_table_lists_the_moves_the_code_makes_each_with_why() -> None:
    assert set(TRANSITIONS) == EXPECTED
    assert all(isinstance(why, str) and len(why) > 20 for why in TRANSITIONS.values())
    assert not any(b == B.UNKNOWN for (_, b) in TRANSITIONS)  # unknown is where a site file starts a board, no more
    assert next_states("rma") == ["ok"] and next_states("bogus") == []
    assert allowed("ok", "suspect") and not allowed("rma", "failed") and not allowed("ok", "melted")


def test_every_listed_move_is_made_and_audited(example_loaded) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.store import immediate

    serial = SERIALS[0]
    board_id, _ = _board(serial)
    for a, b in sorted(TRANSITIONS):
        _put(serial, a)
        with immediate(_engine()) as c:
            assert move_board(c, board_id, b, actor="tester@ci", reason=f"test {a}-{b}") == a
        assert _board(serial)[1] == b
        last = _events(serial)[-1]
        assert (last.actor, last.detail, last.reason) == ("tester@ci", f"{a} -> {b}", f"test {a}-{b}")
    assert len(_events(serial)) == len(TRANSITIONS)


def test_every_other_move_is_refused_and_changes_nothing(example_loaded) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.store import immediate

    serial = SERIALS[0]
    board_id, _ = _board(serial)
    refused = [(a, b) for a, b in itertools.product(B, B) if a != b and (a, b) not in TRANSITIONS]
    assert len(refused) == 6
    for a, b in refused:
        _put(serial, a)
        with pytest.raises(InvalidTransition, match="not in the board transition table"), immediate(_engine()) as c:
            move_board(c, board_id, b, actor="tester@ci", reason="x")
        assert _board(serial)[1] == a
    with pytest.raises(InvalidTransition, match="not a board state"), immediate(_engine()) as c:
        move_board(c, board_id, "melted", actor="tester@ci", reason="x")
    assert _events(serial) == []
    # The same state is no move: nothing written.
    with immediate(_engine()) as c:
        assert move_board(c, board_id, B.RMA, actor="tester@ci", reason="x") == "rma"
    assert _events(serial) == []


def test_a_board_leaves_rma_only_once_its_entry_is_closed(example_loaded, cli) -> None:  # type: ignore[no-untyped-def]
    serial = SERIALS[1]
    _put(serial, "rma")
    _open_rma(serial)
    r = cli("board", "set", serial, "--state", "ok", "--reason", "back")
    assert r.code == 2 and "RMA entry is open" in r.err and "board rma close" in r.err, r.err
    assert _board(serial)[1] == "rma"
    assert cli("board", "rma", "close", serial, "--reason", "cleared: not faulty").code == 0
    r = cli("board", "set", serial, "--state", "ok", "--reason", "not faulty")
    assert r.code == 0 and "rma -> ok" in r.out, r.out + r.err
    assert [e.detail for e in _events(serial)] == ["rma -> ok"]


# --- the writers ------------------------------------------------------------------------


@pytest.fixture
def spy(monkeypatch) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    """Every call of move_board: (board id, wanted). The writers import it where they use it, so this sees them."""
    calls: list[tuple[int, str]] = []
    real = boards.move_board

    def spying(conn: Any, board_id: int, wanted: str, **kw: Any) -> str:
        calls.append((board_id, str(wanted)))
        return real(conn, board_id, wanted, **kw)

    monkeypatch.setattr(boards, "move_board", spying)
    return calls


def test_board_set_goes_through_the_table(example_loaded, cli, spy) -> None:  # type: ignore[no-untyped-def]
    serial = SERIALS[0]
    board_id, _ = _board(serial)
    r = cli("board", "set", serial, "--state", "unknown", "--reason", "who knows")
    assert r.code == 2 and "ok -> unknown is refused: not in the board transition table" in r.err, r.err
    r = cli("board", "set", serial, "--state", "unknown", "--dry-run")  # a dry run is refused as the move would be
    assert r.code == 2 and "not in the board transition table" in r.err, r.err
    assert cli("board", "set", serial, "--state", "rma", "--dry-run").code == 0
    assert _board(serial)[1] == "ok" and _events(serial) == []
    r = cli("board", "set", serial, "--state", "rma", "--reason", "sent back")
    assert r.code == 0 and "ok -> rma" in r.out
    r = cli("board", "set", serial, "--state", "suspect", "--reason", "x")
    assert r.code == 2 and "from rma: ok" in r.err, r.err
    r = cli("board", "set", serial, "--state", "suspect", "--reason", "data fix", "--force")
    assert r.code == 0 and "rma -> suspect" in r.out
    assert cli("board", "set", serial, "--state", "suspect").out.strip() == f"board {serial}: already suspect, nothing done"
    assert [(e.detail, e.reason) for e in _events(serial)] == [
        ("ok -> rma", "sent back"),
        ("rma -> suspect (forced: not in the board transition table)", "data fix"),
    ]
    assert _board(serial)[1] == "suspect"
    assert spy == [(board_id, w) for w in ("unknown", "unknown", "rma", "rma", "suspect", "suspect", "suspect")]


def test_burnin_verdicts_go_through_the_table(example_loaded, spy) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.burnin.engine import BoardResult, _record
    from fleetctl.models.burnin import BurninRun

    with _engine().begin() as c:
        run_id = c.execute(insert(BurninRun.__table__).values(
            started_at=_now(), state="running", kind="mncore", level="quick", duration_s=1.0, selector=SERVER, actor="tester@ci",
            host="h", pid=1, servers=[SERVER], counts={})).inserted_primary_key[0]  # fmt: skip
    _put(SERIALS[3], "rma")
    _open_rma(SERIALS[3])  # failed an earlier burn-in; its entry is still open
    fail = [{"criterion": "checksum", "severity": "fail", "message": "wrong results", "evidence": {}}]
    verdicts = ["pass", "degraded", "fail", "pass"]
    results = [BoardResult(SERVER, s, f"mnc{i}", i, v, fail if v != "pass" else [], {})
               for i, (s, v) in enumerate(zip(SERIALS, verdicts, strict=True))]  # fmt: skip
    assert _record(_engine(), run_id, SERVER, "mn-server-2", results, actor="tester@ci", started=_now()) is not None

    assert [_board(s)[1] for s in SERIALS] == ["ok", "suspect", "rma", "rma"]
    assert [e.detail.split(";")[0] for e in _events(SERIALS[1])] == ["ok -> suspect"]
    assert [e.detail.split(";")[0] for e in _events(SERIALS[2])] == ["ok -> rma"]
    assert all(e.reason == f"burnin:{run_id}" for s in SERIALS[1:3] for e in _events(s))
    assert _events(SERIALS[0]) == [] and _events(SERIALS[3]) == []  # ok stays ok; rma with its entry open stays rma
    stays = _events(SERIALS[3], "board.burnin")[0].detail
    assert "pass" in stays and "state stays rma" in stays and "RMA entry is open" in stays, stays
    ids = [_board(s)[0] for s in SERIALS]
    assert spy == [(ids[0], "ok"), (ids[1], "suspect"), (ids[2], "rma"), (ids[3], "ok")]


def test_a_failed_flash_fails_its_board_through_the_table(example_loaded, spy) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.workflows.firmware_campaign import Flash, record_failure

    def flash(slot: int) -> Flash:
        return Flash(id=f"mncore2_slot{slot}_mncore2-board", key="mncore2-board", before="0.9.7", wanted="1.0.0", uri=None,
                     image="mncore2-board-1.0.0.bin", action="update")  # fmt: skip

    _put(SERIALS[1], "rma")
    note = record_failure(_engine(), SERVER, flash(0), {"task": "failed"}, actor="tester@ci", job_id=7)
    assert f"board {SERIALS[0]} failed" in note
    note = record_failure(_engine(), SERVER, flash(1), {"task": "failed"}, actor="tester@ci", job_id=7)
    assert f"board {SERIALS[1]} stays rma" in note
    assert [_board(s)[1] for s in SERIALS[:2]] == ["failed", "rma"]
    (e,) = _events(SERIALS[0])
    assert e.detail.startswith("ok -> failed; ") and '"job": 7' in e.detail and e.reason.startswith("firmware update of mncore2_slot0")
    assert _events(SERIALS[1]) == []
    assert "state stays rma" in _events(SERIALS[1], "firmware.failed")[0].detail
    assert spy == [(_board(SERIALS[0])[0], "failed"), (_board(SERIALS[1])[0], "failed")]


# --- races ------------------------------------------------------------------------------


def test_two_writers_from_one_state_one_wins(example_loaded) -> None:  # type: ignore[no-untyped-def]
    """Two writers that both read ``ok`` and decide: one moves the board, the other is refused and writes nothing."""
    from fleetctl.store import immediate

    serial = SERIALS[2]
    board_id, state = _board(serial)
    assert state == "ok"
    start = threading.Barrier(2)
    out: dict[str, str] = {}

    def writer(wanted: str) -> None:
        start.wait()
        try:
            with immediate(_engine()) as c:
                move_board(c, board_id, wanted, actor=f"writer-{wanted}", reason="race", expected=state)
            out[wanted] = "moved"
        except InvalidTransition as e:
            out[wanted] = str(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in ("suspect", "failed")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [w for w, o in out.items() if o == "moved"]
    assert len(winners) == 1, out
    (loser,) = set(out) - set(winners)
    assert "someone else moved it" in out[loser], out
    assert _board(serial)[1] == winners[0]
    assert [(e.actor, e.detail) for e in _events(serial)] == [(f"writer-{winners[0]}", f"ok -> {winners[0]}")]


def test_the_update_is_a_compare_and_set(example_loaded) -> None:  # type: ignore[no-untyped-def]
    """On PostgreSQL two writers not queued by a lock: B reads ``ok`` while A's move waits to commit; B's update then finds no row."""
    if not example_loaded.startswith("postgresql"):
        pytest.skip("on SQLite every writer holds the one write lock (BEGIN IMMEDIATE) from its read to its commit")
    serial = SERIALS[3]
    board_id, _ = _board(serial)
    engine = _engine()
    reached = threading.Event()
    out: dict[str, str] = {}

    def writer_b() -> None:
        with engine.connect() as c:

            def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
                if statement.lstrip().upper().startswith("UPDATE ACCELERATOR_BOARD"):
                    reached.set()

            event.listen(c, "before_cursor_execute", seen)
            try:
                with c.begin():
                    move_board(c, board_id, "failed", actor="b", reason="race")
                out["b"] = "moved"
            except InvalidTransition as e:
                out["b"] = str(e)

    with engine.connect() as a:
        tx = a.begin()
        move_board(a, board_id, "suspect", actor="a", reason="race")  # A holds the row, not yet committed
        t = threading.Thread(target=writer_b)
        t.start()
        assert reached.wait(60), "writer B never reached its update"
        tx.commit()
    t.join()
    assert "changed state while we moved it" in out["b"], out
    assert _board(serial)[1] == "suspect"
    assert [(e.actor, e.detail) for e in _events(serial)] == [("a", "ok -> suspect")]
