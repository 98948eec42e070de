"""The host checks (``sweep --level host``): accelerators as the OS sees them.

They read ``reading.host`` (:class:`~fleetctl.sweep.host.HostReading`), set
only for servers whose OS should answer; without it they say nothing.
Thresholds follow DOMAIN.md's anchors: 63 or more retired pages fail a GPU;
an uncorrected ECC error or an Xid that means the GPU fell off the bus is
critical.
"""

from __future__ import annotations

from collections.abc import Iterator

from fleetctl.sweep.collect import ServerExpect, ServerReading
from fleetctl.sweep.model import Problem, Status, problem
from fleetctl.sweep.registry import check

C, W, U = Status.CRITICAL, Status.WARNING, Status.UNKNOWN

RETIRED_PAGES_FAIL = 63
GPU_TEMP_WARNING_C = 85
# Xids that mean the GPU or its memory is gone or broken (NVIDIA's Xid catalogue), the rest a warning.
CRITICAL_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120})


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
    if h.mncore is not None and len(h.mncore) < want:
        yield problem(C, f"gpfn3-smi lists {len(h.mncore)} of {want} boards", "gpfn3-smi", listed=[d.name for d in h.mncore])
    if h.device_nodes is not None and e.board_kind in ("mncore2", "mncore") and len(h.device_nodes) < want:
        yield problem(C, f"{len(h.device_nodes)} of {want} device nodes present", "device nodes", nodes=h.device_nodes)
    if h.gpus is not None and len(h.gpus) < want:
        yield problem(C, f"nvidia-smi lists {len(h.gpus)} of {want} GPUs", "nvidia-smi", serials=[g.serial for g in h.gpus])


def _gpu(g: object) -> str:
    return f"GPU {getattr(g, 'index', '?')}"


@check("gpu.memory", kind="server", severity=C, reads=("nvidia-smi --query-gpu ecc.errors, retired_pages",), level="host")
def gpu_memory(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """No uncorrected ECC error; fewer than 63 retired pages; none pending retirement."""
    h = r.host
    for g in (h.gpus or []) if h else []:
        retired = (g.retired_pages_single_bit or 0) + (g.retired_pages_double_bit or 0)
        ev = {"serial": g.serial, "ecc_uncorrected": g.ecc_uncorrected_volatile_total, "retired": retired,
              "retired_double_bit": g.retired_pages_double_bit, "retired_pending": g.retired_pages_pending}  # fmt: skip
        if retired >= RETIRED_PAGES_FAIL:
            yield problem(C, f"{_gpu(g)} ({g.serial}): {retired} retired pages (fails at {RETIRED_PAGES_FAIL})", _gpu(g), **ev)
        elif g.ecc_uncorrected_volatile_total:
            yield problem(C, f"{_gpu(g)} ({g.serial}): {g.ecc_uncorrected_volatile_total} uncorrected ECC errors", _gpu(g), **ev)
        elif g.retired_pages_pending:
            yield problem(W, f"{_gpu(g)} ({g.serial}): pages pending retirement (a reset retires them)", _gpu(g), **ev)


@check("gpu.temperature", kind="server", severity=W, reads=("nvidia-smi --query-gpu temperature.gpu",), level="host")
def gpu_temperature(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each GPU below 85 C."""
    h = r.host
    for g in (h.gpus or []) if h else []:
        if g.temperature_gpu_c is not None and g.temperature_gpu_c >= GPU_TEMP_WARNING_C:
            yield problem(W, f"{_gpu(g)} ({g.serial}) at {g.temperature_gpu_c} C", _gpu(g), temperature_c=g.temperature_gpu_c)


@check("gpu.pcie", kind="server", severity=W, reads=("nvidia-smi --query-gpu pcie.link.*",), level="host")
def gpu_pcie(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each GPU's link at its maximum generation and width, as the OS sees it."""
    h = r.host
    for g in (h.gpus or []) if h else []:
        gen, mgen, w, mw = g.pcie_link_gen_current, g.pcie_link_gen_max, g.pcie_link_width_current, g.pcie_link_width_max
        if (gen and mgen and gen < mgen) or (w and mw and w < mw):
            yield problem(W, f"{_gpu(g)} ({g.serial}) PCIe Gen{gen} x{w} of Gen{mgen} x{mw}", _gpu(g), link_gen=gen, link_width=w,
                          max_link_gen=mgen, max_link_width=mw)  # fmt: skip


@check("gpu.xid", kind="server", severity=W, reads=("dmesg (NVRM: Xid)",), level="host")
def gpu_xid(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """No Xid error in the kernel log (79: fell off the bus, 48/63/64/94/95: memory, and others: critical)."""
    h = r.host
    by_pci: dict[str, list[object]] = {}
    for x in (h.xids or []) if h else []:
        by_pci.setdefault(x.pci, []).append(x)
    for pci, xs in sorted(by_pci.items()):
        codes = sorted({x.xid for x in xs})  # type: ignore[attr-defined]
        status = C if CRITICAL_XIDS & set(codes) else W
        yield problem(status, f"Xid {', '.join(map(str, codes))} on {pci}: {xs[-1].message}", pci, xids=codes)  # type: ignore[attr-defined]
