"""The host checks (``sweep --level host``): accelerators as the OS sees them.

They read ``reading.host`` (:class:`~fleetctl.sweep.host.HostReading`), set
only for servers whose OS should answer; without it they say nothing. What
they judge is vendor-neutral (:class:`~fleetctl.interfaces.accel.BoardReading`,
:class:`~fleetctl.interfaces.accel.BoardEvent`), given by the driver of the
server's board kind, so a kind a new driver brings is judged with no edit
here; findings name the tool the driver says listed the boards. (The check
names ``gpu.*`` are kept as they were first published: they judge any kind's
boards.)

A reading burn-in also judges (retired pages, pages pending retirement,
uncorrected ECC errors, temperature, the PCIe link, Xids) is judged by the
same rule on the same criteria: ``fleetctl.burnin.criteria`` (``judge_*``)
over ``criteria.yaml`` or the site's copy (``$FLEETCTL_BURNIN_CRITERIA``), for
the server's board kind and hardware model (the kind's driver ships the
defaults). A rule's fail is critical here, its degraded a warning, its note
nothing. With the GPU driver's defaults: 63 or more retired pages, or an
uncorrected ECC error, is critical (DOMAIN.md); 85 C or more a warning,
100 C or more critical; a link narrower than it can be critical; Xid 79
(fallen off the bus) and the memory Xids critical, any other Xid a warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fleetctl.burnin.criteria import Criteria, Judgement, current
from fleetctl.interfaces.accel import BoardEvent, BoardReading
from fleetctl.sweep.collect import ServerExpect, ServerReading
from fleetctl.sweep.host import HostReading
from fleetctl.sweep.model import Problem, Status, problem
from fleetctl.sweep.registry import check

C, W, U = Status.CRITICAL, Status.WARNING, Status.UNKNOWN

#: A rule's verdict as a sweep status (a note is no finding).
STATUS_OF = {"fail": C, "degraded": W}


def criteria_of(e: ServerExpect) -> Criteria:
    """The criteria the server's boards are judged by: those the sweep was given, else the ones in force (burn-in's)."""
    if e.criteria is not None:
        return e.criteria
    return current().for_board(e.board_kind or "", e.model)


def _worst(judged: list[Judgement | None]) -> tuple[Status | None, list[Judgement]]:
    """The sweep status of the worst judgement (None: nothing to report) and the judgements that count."""
    found = [j for j in judged if j is not None and j.severity in STATUS_OF]
    if not found:
        return None, []
    return (C if any(STATUS_OF[j.severity] == C for j in found) else W), found


def _evidence(found: list[Judgement], **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict(more)
    for j in found:
        out.update(j.evidence)
    out["criteria"] = [j.criterion for j in found]
    return out


@check("host.reachable", kind="server", severity=C, reads=("SSH to the installed OS",), cost="1 SSH session", level="host")
def host_reachable(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """A server that should run its OS (ready, in service, maintenance) answers over SSH."""
    h = r.host
    if h is None:
        return
    if h.error:
        yield problem(C, h.error)
    for part, why in sorted(h.errors.items()):
        yield problem(U, f"{part} could not be read: {why}", part)


def _tool(h: HostReading) -> str:
    return h.tool or "the host tool"


@check("accel.host_boards", kind="server", severity=C, reads=("the board kind's tool listing", "the boards' device nodes"),
       level="host")  # fmt: skip
def host_boards(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """The OS sees every board the model holds (the tool's listing, and the device nodes of a kind that has them)."""
    h = r.host
    if h is None or h.error or not e.board_count:
        return
    want = e.board_count
    # burn-in's "missing" (a board the inventory has that the host does not list), by the same severity
    status = STATUS_OF.get(criteria_of(e).severity_of("missing"))
    if status is None:
        return
    if h.boards is not None and len(h.boards) < want:
        yield problem(status, f"{_tool(h)} lists {len(h.boards)} of {want} boards", _tool(h), listed=[b.device for b in h.boards],
                      serials=[b.serial for b in h.boards])  # fmt: skip
    if h.device_nodes is not None and len(h.device_nodes) < want:  # only a driver whose kind has device nodes reads them
        yield problem(status, f"{len(h.device_nodes)} of {want} device nodes present", "device nodes", nodes=h.device_nodes)


def _board(b: BoardReading) -> str:
    return f"{b.device} ({b.serial})" if b.serial else b.device


@check("gpu.memory", kind="server", severity=C, reads=("each board's retired pages and ECC counters",), level="host")
def gpu_memory(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Retired pages, uncorrected ECC errors and pages pending retirement, by burn-in's criteria (one finding per board)."""
    h = r.host
    if h is None or not h.boards:
        return
    crit = criteria_of(e)
    for b in h.boards:
        status, found = _worst([crit.judge_retired_pages(b.retired_pages), crit.judge_uncorrected_errors(b.ecc_uncorrected),
                                crit.judge_retired_pending(b.retired_pages_pending)])  # fmt: skip
        if status is not None:
            yield problem(status, f"{_board(b)}: " + "; ".join(j.message for j in found), b.device,
                          **_evidence(found, serial=b.serial, retired=b.retired_pages, **b.extra))  # fmt: skip


@check("gpu.temperature", kind="server", severity=C, reads=("each board's temperature",), level="host")
def gpu_temperature(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each board below burn-in's temperature limits (GPUs: a warning at 85 C, critical at 100 C)."""
    h = r.host
    if h is None or not h.boards:
        return
    crit = criteria_of(e)
    for b in h.boards:
        status, found = _worst([crit.judge_temperature(b.temp_c)])
        if status is not None:
            yield problem(status, f"{_board(b)} at {b.temp_c:g} C: {found[0].message}", b.device,
                          **_evidence(found, temperature_c=b.temp_c))  # fmt: skip


@check("gpu.pcie", kind="server", severity=C, reads=("each board's PCIe link, now and at most",), level="host")
def gpu_pcie(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each board's link at its capability, as the OS sees it (where the criteria say so, its width only: an idle GPU
    lowers its generation)."""
    h = r.host
    if h is None or not h.boards:
        return
    crit = criteria_of(e)
    for b in h.boards:
        status, found = _worst([crit.judge_link(b.link_gen, b.link_gen_max, b.link_width, b.link_width_max)])
        if status is not None:
            yield problem(status, f"{_board(b)} {found[0].message}", b.device, **_evidence(found))


@check("gpu.xid", kind="server", severity=C, reads=("the kernel's events about the boards (NVIDIA: Xid lines)",), level="host")
def gpu_xid(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """No event about a board in the kernel log (burn-in's ``xid``/``xid_other``: codes of ``xid_critical``, or those the
    driver calls critical, are critical; others a warning). One finding per board the events name."""
    h = r.host
    if h is None or not h.events:
        return
    crit = criteria_of(e)
    by_board: dict[str, list[BoardEvent]] = {}
    for ev in h.events:
        by_board.setdefault(ev.where, []).append(ev)
    for where, evs in sorted(by_board.items()):
        judged = [crit.judge_event(ev) for ev in evs]
        status, found = _worst(list(judged))
        if status is not None:
            codes = sorted({ev.code for ev in evs if ev.code is not None})
            yield problem(status, f"{len(evs)} event{'s' if len(evs) > 1 else ''} on {where or 'the host'}: {evs[-1].message}",
                          where or "host", xids=codes, criteria=sorted({j.criterion for j in found}))  # fmt: skip
