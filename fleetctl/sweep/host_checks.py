"""The host checks (``sweep --level host``): accelerators as the OS sees them.

They read ``reading.host`` (:class:`~fleetctl.sweep.host.HostReading`), set
only for servers whose OS should answer; without it they say nothing.

A reading burn-in also judges (retired pages, pages pending retirement,
uncorrected ECC errors, temperature, the PCIe link, Xids) is judged by the
same rule on the same criteria: ``fleetctl.burnin.criteria`` (``judge_*``)
over ``criteria.yaml`` or the site's copy (``$FLEETCTL_BURNIN_CRITERIA``), for
the server's board kind and hardware model. A rule's fail is critical here,
its degraded a warning, its note nothing. With the bundled file: 63 or more
retired pages, or an uncorrected ECC error, is critical (DOMAIN.md); 85 C or
more a warning, 100 C or more critical; a GPU's link narrower than it can be
critical; Xid 79 (fallen off the bus) and the memory Xids critical, any other
Xid a warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fleetctl.burnin.criteria import Criteria, Judgement, current
from fleetctl.sweep.collect import ServerExpect, ServerReading
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


@check("accel.host_boards", kind="server", severity=C, reads=("gpfn3-smi list", "/dev/mnc2p*", "nvidia-smi --query-gpu"),
       level="host")  # fmt: skip
def host_boards(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """The OS sees every board the model holds (tool listing and device nodes)."""
    h = r.host
    if h is None or h.error or not e.board_count:
        return
    want = e.board_count
    # burn-in's "missing" (a board the inventory has that the host does not list), by the same severity
    status = STATUS_OF.get(criteria_of(e).severity_of("missing"))
    if status is None:
        return
    if h.mncore is not None and len(h.mncore) < want:
        yield problem(status, f"gpfn3-smi lists {len(h.mncore)} of {want} boards", "gpfn3-smi", listed=[d.name for d in h.mncore])
    if h.device_nodes is not None and e.board_kind in ("mncore2", "mncore") and len(h.device_nodes) < want:
        yield problem(status, f"{len(h.device_nodes)} of {want} device nodes present", "device nodes", nodes=h.device_nodes)
    if h.gpus is not None and len(h.gpus) < want:
        yield problem(status, f"nvidia-smi lists {len(h.gpus)} of {want} GPUs", "nvidia-smi", serials=[g.serial for g in h.gpus])


def _gpu(g: object) -> str:
    return f"GPU {getattr(g, 'index', '?')}"


@check("gpu.memory", kind="server", severity=C, reads=("nvidia-smi --query-gpu ecc.errors, retired_pages",), level="host")
def gpu_memory(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Retired pages, uncorrected ECC errors and pages pending retirement, by burn-in's criteria (one finding per GPU)."""
    h = r.host
    if h is None or not h.gpus:
        return
    crit = criteria_of(e)
    for g in h.gpus:
        single, double = g.retired_pages_single_bit, g.retired_pages_double_bit
        retired = None if single is None and double is None else (single or 0) + (double or 0)  # as burn-in counts them
        status, found = _worst([crit.judge_retired_pages(retired), crit.judge_uncorrected_errors(g.ecc_uncorrected_volatile_total),
                                crit.judge_retired_pending(g.retired_pages_pending)])  # fmt: skip
        if status is not None:
            yield problem(status, f"{_gpu(g)} ({g.serial}): " + "; ".join(j.message for j in found), _gpu(g),
                          **_evidence(found, serial=g.serial, retired=retired, retired_double_bit=double))  # fmt: skip


@check("gpu.temperature", kind="server", severity=C, reads=("nvidia-smi --query-gpu temperature.gpu",), level="host")
def gpu_temperature(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each GPU below burn-in's temperature limits (bundled: a warning at 85 C, critical at 100 C)."""
    h = r.host
    if h is None or not h.gpus:
        return
    crit = criteria_of(e)
    for g in h.gpus:
        status, found = _worst([crit.judge_temperature(g.temperature_gpu_c)])
        if status is not None:
            yield problem(status, f"{_gpu(g)} ({g.serial}) at {g.temperature_gpu_c:g} C: {found[0].message}", _gpu(g),
                          **_evidence(found, temperature_c=g.temperature_gpu_c))  # fmt: skip


@check("gpu.pcie", kind="server", severity=C, reads=("nvidia-smi --query-gpu pcie.link.*",), level="host")
def gpu_pcie(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each GPU's link at its capability, as the OS sees it (for GPUs its width: an idle GPU lowers its generation)."""
    h = r.host
    if h is None or not h.gpus:
        return
    crit = criteria_of(e)
    for g in h.gpus:
        status, found = _worst([crit.judge_link(g.pcie_link_gen_current, g.pcie_link_gen_max, g.pcie_link_width_current,
                                                g.pcie_link_width_max)])  # fmt: skip
        if status is not None:
            yield problem(status, f"{_gpu(g)} ({g.serial}) {found[0].message}", _gpu(g), **_evidence(found))


@check("gpu.xid", kind="server", severity=C, reads=("dmesg (NVRM: Xid)",), level="host")
def gpu_xid(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """No Xid in the kernel log (burn-in's ``xid_critical``: 79 fell off the bus, the memory Xids ...: critical; others: a warning)."""
    h = r.host
    if h is None or not h.xids:
        return
    crit = criteria_of(e)
    by_pci: dict[str, list[Any]] = {}
    for x in h.xids:
        by_pci.setdefault(x.pci, []).append(x)
    for pci, xs in sorted(by_pci.items()):
        codes = sorted({x.xid for x in xs})
        status, found = _worst([crit.judge_xid(code, f"Xid {code}") for code in codes])
        if status is not None:
            yield problem(status, f"Xid {', '.join(map(str, codes))} on {pci}: {xs[-1].message}", pci, xids=codes,
                          criteria=sorted({j.criterion for j in found}))  # fmt: skip
