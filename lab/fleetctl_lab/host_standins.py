"""Stand-ins for what a provisioned host runs, as shell scripts.

The provisioning playbooks (``playbooks/``) reach the package manager, the
accelerator tools, ``sysctl`` and ``kubeadm`` only through variables
(``playbooks/README.md``, "In a lab"), so a lab host points them at these
harmless scripts. Each generator returns the text of a ``/bin/sh`` script;
paths are baked in, so a script works the same whether it is run over the
lab's SSH or by ``ansible_connection: local``.

The contracts, as the playbooks use them:

- ``fake-pkg install STATE LOG PKG...``: records ``PKG...`` as one line of
  LOG and marks each package installed (a file ``STATE/<pkg>``);
  ``fake-pkg query STATE PKG...`` prints ``<pkg> installed`` for each
  installed one; ``fake-pkg update LOG`` appends ``update`` to LOG.
- ``gpfn3-smi list``: one line per board, ``<index>: <device name>``
  (``0: mnc2p27s0``), the format the public MN-Core SDK documentation
  shows, read from the device folder at run time, so a missing device node
  is a missing board. ``reset <dev>`` / ``clear <dev>`` take an index or a
  name; ``reset`` breaks a board's lock in the semaphore folder, ``clear``
  refuses a locked board.
- ``nvidia-smi -L``: ``GPU <i>: <model> (UUID: GPU-...)`` for each GPU whose
  ``nvidia<slot-index>`` node is in the device folder; ``--query-gpu=...
  --format=csv[,noheader][,nounits]`` and ``-q -x`` shaped like the recorded
  real outputs.
- ``dcgmi diag -r 1|2|3|4 -j`` (the older "DCGM GPU Diagnostic" JSON),
  ``gpu-burn [-d] [-tc] [-i N] [SECONDS]``, ``dmesg`` (Xid lines), and the
  MN-Core burn-in program ``mncore.yaml`` assumes (``mncore-burnin --device
  DEV --seconds S``, one result line per board).

The accelerator stand-ins are Python (see "accelerator tools" below): they
read the host's ``boards.json`` at run time, so a board's fault
(:data:`BOARD_FAULTS`) can be changed while the host runs. docs/lab.md
("Accelerator stand-ins and board faults") tables the tools and the faults.
- ``root/sys/bus/pci/devices/<pci address>/{current,max}_link_{speed,width}``:
  each board's PCIe link as the kernel shows it, rewritten with ``boards.json``
  (:func:`write_boards`), so ``degraded_link`` shows there too.
- ``sysctl ARGS``: appends ``sysctl ARGS`` to a calls log.
- ``kubeadm join ENDPOINT ...``: appends ``kubeadm join ENDPOINT`` to a calls
  log and writes ``<root>/etc/kubernetes/kubelet.conf``, as a real join
  does, so a second run skips the join.

``fleetctl_drivers.accel.mncore.parse_gpfn3_list`` reads what the stand-in
prints (tests/unit/lab/test_hosts.py runs one through the other).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import stat
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

FAKE_PKG = """#!/bin/sh
# fake-pkg install STATE LOG PKG... | query STATE PKG... | update LOG
cmd=$1; shift
case $cmd in
  install) state=$1 log=$2; shift 2
           mkdir -p "$state"
           echo "$*" >> "$log"
           for p in "$@"; do touch "$state/$p"; done ;;
  query)   state=$1; shift
           for p in "$@"; do [ -e "$state/$p" ] && echo "$p installed"; done; exit 0 ;;
  update)  echo update >> "$1" ;;
  *)       echo "usage: fake-pkg install STATE LOG PKG... | query STATE PKG... | update LOG" >&2; exit 2 ;;
esac
"""


def accel_config(dev_dir: Path | str, *, boards_file: Path | str | None = None, boards: list[dict[str, Any]] | None = None,
                 semaphore_dir: Path | str | None = None, calls_log: Path | str | None = None) -> dict[str, Any]:  # fmt: skip
    """What an accelerator stand-in is baked with: the device folder, the board state file (or the
    boards inline, all healthy, when there is none), the MN-Core semaphore folder, the calls log."""
    dev = Path(dev_dir)
    return {
        "dev": str(dev),
        "boards_file": None if boards_file is None else str(boards_file),
        "boards": list(boards or []),
        "semaphore_dir": str(semaphore_dir) if semaphore_dir else str(dev.parent / "opt/mncore_shared_semaphore"),
        "calls_log": None if calls_log is None else str(calls_log),
    }


def gpfn3_smi(dev_dir: Path | str, **kw: Any) -> str:
    """``gpfn3-smi list | reset <dev> | clear <dev>`` over the ``mnc2p*`` nodes present in ``dev_dir`` at run time
    (``kw``: :func:`accel_config`'s)."""
    return tool_script("gpfn3-smi", accel_config(dev_dir, **kw))


def _inline_gpus(gpus: Iterable[tuple[int, str, str]]) -> list[dict[str, Any]]:
    return [board_record(kind="gpu", device=f"nvidia{n}", serial=f"LAB{n:010d}", model=model, uuid=uuid, slot=n,
                         pci_address=f"0000:{(0x10 + n * 0x10) & 0xFF:02x}:00.0") for n, model, uuid in gpus]  # fmt: skip


def nvidia_smi(dev_dir: Path | str, gpus: Iterable[tuple[int, str, str]] = (), **kw: Any) -> str:
    """``nvidia-smi`` (``-L``, ``--query-gpu``, ``-q -x``) over the GPUs whose ``nvidia<n>`` node exists.

    Without a ``boards_file`` the GPUs are ``gpus`` = (node index, model, UUID), all healthy.
    """
    if kw.get("boards_file") is None:
        kw["boards"] = _inline_gpus(gpus)
    return tool_script("nvidia-smi", accel_config(dev_dir, **kw))


def dcgmi(dev_dir: Path | str, **kw: Any) -> str:
    """``dcgmi diag -r 1|2|3|4 -j`` over the GPUs present."""
    return tool_script("dcgmi", accel_config(dev_dir, **kw))


def gpu_burn(dev_dir: Path | str, **kw: Any) -> str:
    """``gpu-burn [-d] [-tc] [-i N] [SECONDS]`` over the GPUs present."""
    return tool_script("gpu-burn", accel_config(dev_dir, **kw))


def mncore_burnin(dev_dir: Path | str, **kw: Any) -> str:
    """The assumed MN-Core burn-in program: ``--device DEV [--device DEV ...] --seconds S``."""
    return tool_script("mncore-burnin", accel_config(dev_dir, **kw))


def dmesg(dev_dir: Path | str, **kw: Any) -> str:
    """``dmesg``: an Xid 79 line per GPU with the ``xid`` fault."""
    return tool_script("dmesg", accel_config(dev_dir, **kw))


def sysctl(calls_log: Path | str) -> str:
    """Records ``sysctl ARGS`` in ``calls_log``; changes nothing."""
    return f"""#!/bin/sh
echo "sysctl $*" >> {shlex.quote(str(calls_log))}
"""


def kubeadm(calls_log: Path | str, root: Path | str, joins: Path | str | None = None, name: str = "") -> str:
    """``kubeadm join``: records the join and leaves what a joined node has (its kubelet.conf); with ``joins``, a file
    named as the host there, by which the lab's Kubernetes stand-in (``lab k8s up --joined-only``) registers its node."""
    log, kube = shlex.quote(str(calls_log)), shlex.quote(f"{root}/etc/kubernetes")
    mark = f"mkdir -p {shlex.quote(str(joins))} && date -u +%FT%TZ > {shlex.quote(f'{joins}/{name}')}\n" if joins and name else ""
    return f"""#!/bin/sh
[ "$1" = join ] || {{ echo "lab kubeadm: only join" >&2; exit 2; }}
echo "kubeadm join $2" >> {log}
mkdir -p {kube} && echo joined > {kube}/kubelet.conf
{mark}"""


def write_script(path: Path, text: str) -> str:
    """Write an executable script; returns its path as a string."""
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


# --- accelerator tools, per-board faults ------------------------------------------------
#
# The accelerator stand-ins are small Python scripts run with the lab's own
# interpreter (``sys.executable``, ``-I -S``: no site-packages, stdlib only):
# each loads this file by its path and calls :func:`run_tool` with the paths
# baked into it, so it reads the board state (``boards.json``) at run time.
# This module therefore imports nothing beyond the standard library.

BOARD_FAULTS: dict[str, str] = {
    "healthy": "nothing wrong",
    "slow": "workloads run at half speed (GPU: power capped to 150 W, gpu-burn Gflop/s halved, dcgmi r3 Targeted Stress fails; "
            "MN-Core: burn-in throughput halved)",
    "hot": "runs hot (GPU: 92 C, thermal clock events, dcgmi r3 Targeted Power fails, gpu-burn temps 97 C; "
           "MN-Core: burn-in at 97 C, throughput x0.7)",
    "memory_errors": "ECC errors and retired pages (GPU: 1523 corrected, 64+1 retired pages, pending retirement, "
                     "dcgmi r1 Page Retirement fails; MN-Core: burn-in checksum wrong, FAIL)",
    "degraded_link": "PCIe link below its capability, two generations and half the lanes down (GPU: gen 3 of 5, x8 of x16; "
                     "dcgmi r2 PCIe fails; every board: the sysfs link files)",
    "checksum": "wrong results (MN-Core: burn-in checksum wrong, FAIL; GPU: gpu-burn errors and FAULTY, dcgmi r2 GPU Memory fails)",
    "vanish": "the device node disappears when a workload starts (gpu-burn, dcgmi r2+, the MN-Core burn-in)",
    "hang": "the workload never ends (gpu-burn, dcgmi r2+, the MN-Core burn-in) until killed",
    "xid": "GPU only: an Xid 79 (fallen off the bus) in dmesg, nvidia-smi reads '[GPU is lost]', gpu-burn DIED/FAULTY, "
           "dcgmi r2 PCIe fails with DCGM_FR_XID_ERROR",
}
BOARDS_FILE = "boards.json"
TIME_SCALE_ENV = "FLEETCTL_LAB_TIME_SCALE"
LAB_DRIVER_VERSION = "550.54.15"  # lab value; any driver would do
LAB_CUDA_VERSION = "12.4"
# ASSUMPTION (lab values, nothing public): what the MN-Core burn-in prints for a
# healthy board. The checksum is the same for every healthy board (same workload).
MNCORE_THROUGHPUT = 393.2
MNCORE_UNIT = "TFLOPS"
MNCORE_CHECKSUM = "0x5eedc0de"
MNCORE_BAD_CHECKSUM = "0x5eedbad0"
GPU_BURN_GFLOPS = 24000.0  # per GPU, floats; -d (doubles) halves it
# DCGM levels: the tests each adds (legacy "DCGM GPU Diagnostic" names) and its real duration (s).
DCGM_LEVELS: dict[int, tuple[float, list[tuple[str, list[str]]]]] = {
    1: (2.0, [("Deployment", ["Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
                              "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"])]),
    2: (120.0, [("Integration", ["PCIe"]), ("Hardware", ["GPU Memory"])]),
    3: (900.0, [("Hardware", ["Diagnostic"]), ("Stress", ["Targeted Stress", "Targeted Power", "Memory Bandwidth"])]),
    4: (2700.0, [("Hardware", ["Memtest", "Pulse Test"])]),
}  # fmt: skip
# fault -> (level from which it shows, test, DCGM error id, error category, severity, message).
# Ids are dcgm_errors.h's; categories/severities dcgmErrorCategory_t / dcgmErrorSeverity_t.
# ASSUMPTION: the message wording (DCGM's own wording differs per version).
DCGM_FAULTS: dict[str, tuple[int, str, int, int, int, str]] = {
    "memory_errors": (1, "Page Retirement/Row Remap", 7, 10, 2, "65 total retired pages exceeded the maximum of 63 on GPU {i}."),
    "degraded_link": (2, "PCIe", 46, 13, 4, "GPU {i}: the PCIe link width x{w} is below the maximum x{mw}."),
    "xid": (2, "PCIe", 101, 5, 2, "Detected XID 79 for GPU {i}: GPU has fallen off the bus."),
    "vanish": (2, "PCIe", 20, 15, 2, "GPU {i} disappeared: the GPUs in /dev and the GPUs NVML sees differ."),
    "checksum": (2, "GPU Memory", 58, 10, 2, "GPU {i}: the memory test found data that does not match what was written."),
    "hot": (3, "Targeted Power", 42, 9, 4, "Temperature 97 of GPU {i} exceeded the maximum allowed temperature 87."),
    "slow": (3, "Targeted Stress", 50, 1, 4, "GPU {i}: 11800 Gflop/s is below the target stress level of 18000 Gflop/s."),
}  # fmt: skip
DCGM_ERROR_NAMES = {7: "DCGM_FR_RETIRED_PAGES_LIMIT", 20: "DCGM_FR_DEVICE_COUNT_MISMATCH", 42: "DCGM_FR_TEMP_VIOLATION",
                    46: "DCGM_FR_PCIE_WIDTH", 50: "DCGM_FR_STRESS_LEVEL", 58: "DCGM_FR_MEMORY_MISMATCH", 101: "DCGM_FR_XID_ERROR"}
GPU_LOST = "[GPU is lost]"


class ToolError(Exception):
    """A stand-in refuses its arguments or its state: ``message`` on stderr, exit ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.message, self.code = message, code


def tool_script(tool: str, config: dict[str, Any]) -> str:
    """A stand-in script: this file's :func:`run_tool` for ``tool`` with ``config`` (paths, boards)."""
    here = str(Path(__file__).resolve())
    return f"""#!{sys.executable} -IS
# Lab stand-in for {tool}: fleetctl_lab/host_standins.py (run_tool) with the paths below.
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("fleetctl_lab_host_standins", {here!r})
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
sys.exit(mod.run_tool({tool!r}, json.loads({json.dumps(config)!r}), sys.argv[1:]))
"""


def board_record(*, kind: str, device: str, serial: str, model: str, pci_address: str, slot: int = 0, uuid: str = "",
                 pcie_gen: int = 5, max_lanes: int = 16, firmware: dict[str, str] | None = None,
                 fault: str = "healthy") -> dict[str, Any]:  # fmt: skip
    """One board of ``boards.json``."""
    return {"slot": slot, "kind": kind, "device": device, "serial": serial, "model": model, "uuid": uuid,
            "pci_address": pci_address, "pcie_gen": pcie_gen, "max_lanes": max_lanes, "firmware": dict(firmware or {}),
            "fault": fault}  # fmt: skip


def write_boards(path: Path, server: str, boards: list[dict[str, Any]], *, time_scale: float = 1.0) -> None:
    """Write ``boards.json`` (atomically: a stand-in may be reading it)."""
    for b in boards:
        if b["fault"] not in BOARD_FAULTS or (b["fault"] == "xid" and b["kind"] != "gpu"):
            raise ValueError(f"board {b['device']}: fault {b['fault']!r} is not one of {sorted(BOARD_FAULTS)} (xid: GPUs only)")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"server": server, "time_scale": time_scale, "boards": boards}, indent=1) + "\n")
    os.replace(tmp, path)
    # The link is hardware state the kernel shows without any tool, so it follows the fault here,
    # where every fault change passes, rather than in a stand-in that might never run.
    write_sysfs_links(sysfs_pci_dir(path), boards)


# --- sysfs: each board's PCIe link ---------------------------------------------------------
#
# On a real host the MN-Core link is read from sysfs (no public MN-Core tool shows it), so the
# lab writes the four files the kernel shows per PCI function under the host's root, beside
# ``root/dev/``, in the kernel's format (drivers/pci/pci-sysfs.c: ``PCIE_SPEED2STR`` + "\n";
# the width as "%u\n").

SYSFS_PCI_DIR = "root/sys/bus/pci/devices"  # relative to the folder of boards.json (the host folder)
SYSFS_LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
# PCIe generation -> what the kernel prints in *_link_speed (since Linux 4.17 with " PCIe").
PCIE_GEN_SPEED: dict[int, str] = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
                                  5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}  # fmt: skip


def sysfs_pci_dir(boards_file: Path) -> Path:
    """The host's ``/sys/bus/pci/devices`` folder, derived from its ``boards.json`` path."""
    return Path(boards_file).parent / SYSFS_PCI_DIR


def board_link(b: dict[str, Any]) -> tuple[int, int, int, int]:
    """(current gen, current width, max gen, max width) of board ``b``, its fault applied.

    ``degraded_link`` trains two generations and half the lanes down: the values nvidia-smi's
    stand-in reports for the fault (``_gpu_state``), so a GPU's sysfs and nvidia-smi agree
    (tests/unit/lab/test_sysfs_links.py holds them together).
    """
    gen, lanes = int(b.get("pcie_gen") or 5), int(b.get("max_lanes") or 16)
    if b.get("fault") == "degraded_link":
        return max(1, gen - 2), max(1, lanes // 2), gen, lanes
    return gen, lanes, gen, lanes


def write_sysfs_links(pci_dir: Path, boards: list[dict[str, Any]]) -> None:
    """Write ``<pci_dir>/<pci_address>/{current,max}_link_{speed,width}`` for every board.

    Each file is replaced atomically (a driver may be reading it while a fault is set); a file
    whose text is unchanged is left alone.
    """
    for b in boards:
        gen, width, max_gen, max_width = board_link(b)
        values = (PCIE_GEN_SPEED.get(gen, "Unknown"), str(width), PCIE_GEN_SPEED.get(max_gen, "Unknown"), str(max_width))
        folder = Path(pci_dir) / b["pci_address"]
        folder.mkdir(parents=True, exist_ok=True)
        for name, value in zip(SYSFS_LINK_FILES, values, strict=True):
            target = folder / name
            text = value + "\n"
            with contextlib.suppress(OSError):
                if target.read_text() == text:
                    continue
            tmp = folder / f".{name}.tmp"
            tmp.write_text(text)
            os.replace(tmp, target)


def set_board_fault(path: Path, board: str, fault: str) -> None:
    """Set the fault of one board of ``boards.json`` (by device name, serial or slot); read by the next run of a stand-in.

    The board's sysfs link files (:func:`write_sysfs_links`) follow at once.
    """
    doc = json.loads(path.read_text())
    hits = [b for b in doc["boards"] if board in (b["device"], b["serial"], str(b["slot"]))]
    if len(hits) != 1:
        raise ValueError(f"{path}: {len(hits)} boards match {board!r}")
    hits[0]["fault"] = fault
    write_boards(path, doc["server"], doc["boards"], time_scale=float(doc.get("time_scale", 1.0)))


def run_tool(tool: str, config: dict[str, Any], argv: list[str]) -> int:
    """Entry point of every accelerator stand-in script; returns the exit status."""
    tools: dict[str, Callable[[_Host, list[str]], int]] = {
        "nvidia-smi": _nvidia_smi, "dcgmi": _dcgmi, "gpu-burn": _gpu_burn, "gpfn3-smi": _gpfn3_smi,
        "mncore-burnin": _mncore_burnin, "dmesg": _dmesg, "amd-smi": _amd_smi, "rvs": _rvs,
    }  # fmt: skip
    try:
        return tools[tool](_Host(config), argv)
    except ToolError as e:
        sys.stdout.flush()
        print(e.message, file=sys.stderr)
        return e.code
    except BrokenPipeError:
        return 141


class _Host:
    """The host as a stand-in sees it at run time: device folder, boards (with faults), time scale."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.dev = Path(config["dev"])
        self.calls_log = config.get("calls_log")
        doc: dict[str, Any] = {"boards": config.get("boards", []), "time_scale": 1.0}
        if config.get("boards_file"):
            try:
                doc = json.loads(Path(config["boards_file"]).read_text())
            except (OSError, ValueError) as e:
                raise ToolError(f"lab: cannot read the board state {config['boards_file']}: {e}", 3) from e
        self.boards: list[dict[str, Any]] = doc.get("boards", [])
        for b in self.boards:
            if b.get("fault", "healthy") not in BOARD_FAULTS:
                raise ToolError(f"lab: board {b.get('device')}: unknown fault {b.get('fault')!r}", 3)
        env = os.environ.get(TIME_SCALE_ENV)
        try:
            self.time_scale = float(env) if env else float(doc.get("time_scale", 1.0))
        except ValueError as e:
            raise ToolError(f"lab: {TIME_SCALE_ENV}={env!r} is not a number", 3) from e

    def present(self, kind: str) -> list[dict[str, Any]]:
        """The boards of ``kind`` whose device node exists, in slot order."""
        return [b for b in sorted(self.boards, key=lambda b: b["slot"]) if b["kind"] == kind and (self.dev / b["device"]).exists()]

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds * self.time_scale)

    def vanish(self, boards: list[dict[str, Any]]) -> None:
        """The ``vanish`` boards among ``boards`` fall off the bus: their device nodes go."""
        for b in boards:
            if b["fault"] == "vanish":
                with contextlib.suppress(FileNotFoundError):
                    (self.dev / b["device"]).unlink()

    def log_call(self, line: str) -> None:
        if self.calls_log:
            with open(self.calls_log, "a") as fh:
                fh.write(line + "\n")


def _hang() -> int:
    sys.stdout.flush()
    while True:
        time.sleep(3600)


# --- nvidia-smi -------------------------------------------------------------------------


def _nvidia_bus_id(b: dict[str, Any]) -> str:
    """``0000:3b:00.0`` -> ``00000000:3B:00.0``, as nvidia-smi writes it."""
    dom, rest = b["pci_address"].split(":", 1)
    return f"{int(dom, 16):08X}:{rest.upper()}"


def _gpu_state(b: dict[str, Any], index: int) -> dict[str, Any]:
    """What nvidia-smi reads from GPU ``b`` (index ``index`` among the GPUs present), its fault applied."""
    f = b["fault"]
    gen, lanes = int(b.get("pcie_gen") or 5), int(b.get("max_lanes") or 16)
    s: dict[str, Any] = {
        "index": index, "name": b["model"], "uuid": b["uuid"], "serial": b["serial"], "bus_id": _nvidia_bus_id(b),
        "minor": int(b["device"].removeprefix("nvidia") or 0), "vbios": b.get("firmware", {}).get("vbios", "96.00.74.00.01"),
        "temp": 34, "mem_temp": 40, "power": 71.15, "limit": 350.0, "sm": 345, "mem": 2619, "max_sm": 1980,
        "mem_total": 81559, "mem_used": 0, "util": 0, "ecc_corr": 0, "ecc_unc": 0, "ecc_corr_agg": 0, "ecc_unc_agg": 0,
        "sbe": 0, "dbe": 0, "pending": "No", "rr_corr": 0, "rr_unc": 0, "rr_pending": "No", "rr_failure": "No",
        "gen": gen, "gen_max": gen, "width": lanes, "width_max": lanes, "replay": 0, "events": 0x1, "lost": False,
    }  # fmt: skip
    if f == "hot":
        s.update(temp=92, mem_temp=95, sm=1005, events=0x60)  # sw + hw thermal slowdown
    elif f == "slow":
        s.update(limit=150.0, events=0x4)  # sw power cap
    elif f == "memory_errors":
        s.update(ecc_corr=1523, ecc_corr_agg=20711, ecc_unc_agg=1, sbe=64, dbe=1, pending="Yes", rr_corr=3, rr_unc=1, rr_pending="Yes")
    elif f == "degraded_link":
        s.update(gen=max(1, gen - 2), width=max(1, lanes // 2), replay=4117)
    elif f == "xid":
        s["lost"] = True
    return s


# --query-gpu field -> (header name, unit, state key or formatter). Aliases as
# ``nvidia-smi --help-query-gpu`` lists them print under the first name.
_Q_ALIAS = {"gpu_name": "name", "gpu_serial": "serial", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id", "clocks.sm": "clocks.current.sm",
            "clocks.gr": "clocks.current.graphics", "clocks.mem": "clocks.current.memory",
            "retired_pages.sbe": "retired_pages.single_bit_ecc.count",
            "retired_pages.dbe": "retired_pages.double_bit.count", "clocks_throttle_reasons.active": "clocks_event_reasons.active",
            "gpu.power.requested_limit": "power.limit", "gpu.power.current_limit": "enforced.power.limit"}  # fmt: skip
# Fields whose value is not read from the GPU (a lost GPU still prints them).
_Q_STATIC = {"index", "name", "uuid", "serial", "pci.bus_id", "driver_version", "vbios_version", "timestamp", "count",
             "pcie.link.gen.max", "pcie.link.width.max", "power.limit", "enforced.power.limit", "clocks.max.sm",
             "memory.total"}  # fmt: skip


def _q_fields(s: dict[str, Any], count: int, now: str) -> dict[str, tuple[str | None, str]]:
    """Every supported field -> (unit, value as printed with units)."""
    w = "{:.2f} W".format
    return {
        "timestamp": (None, now), "driver_version": (None, LAB_DRIVER_VERSION), "count": (None, str(count)),
        "index": (None, str(s["index"])), "name": (None, s["name"]), "uuid": (None, s["uuid"]), "serial": (None, s["serial"]),
        "pci.bus_id": (None, s["bus_id"]), "vbios_version": (None, s["vbios"]), "pstate": (None, "P0"),
        "temperature.gpu": (None, str(s["temp"])), "temperature.memory": (None, str(s["mem_temp"])),
        "power.draw": ("W", w(s["power"])), "power.limit": ("W", w(s["limit"])), "enforced.power.limit": ("W", w(s["limit"])),
        "clocks.current.sm": ("MHz", f"{s['sm']} MHz"), "clocks.current.graphics": ("MHz", f"{s['sm']} MHz"),
        "clocks.current.memory": ("MHz", f"{s['mem']} MHz"), "clocks.max.sm": ("MHz", f"{s['max_sm']} MHz"),
        "memory.total": ("MiB", f"{s['mem_total']} MiB"), "memory.used": ("MiB", f"{s['mem_used']} MiB"),
        "utilization.gpu": ("%", f"{s['util']} %"), "ecc.mode.current": (None, "Enabled"),
        "ecc.errors.corrected.volatile.total": (None, str(s["ecc_corr"])),
        "ecc.errors.uncorrected.volatile.total": (None, str(s["ecc_unc"])),
        "ecc.errors.corrected.aggregate.total": (None, str(s["ecc_corr_agg"])),
        "ecc.errors.uncorrected.aggregate.total": (None, str(s["ecc_unc_agg"])),
        "retired_pages.single_bit_ecc.count": (None, str(s["sbe"])), "retired_pages.double_bit.count": (None, str(s["dbe"])),
        "retired_pages.pending": (None, s["pending"]), "remapped_rows.correctable": (None, str(s["rr_corr"])),
        "remapped_rows.uncorrectable": (None, str(s["rr_unc"])), "remapped_rows.pending": (None, s["rr_pending"]),
        "remapped_rows.failure": (None, s["rr_failure"]), "pcie.link.gen.current": (None, str(s["gen"])),
        "pcie.link.gen.max": (None, str(s["gen_max"])), "pcie.link.width.current": (None, str(s["width"])),
        "pcie.link.width.max": (None, str(s["width_max"])), "clocks_event_reasons.active": (None, f"0x{s['events']:016X}"),
        "mig.mode.current": (None, "Disabled"),
    }  # fmt: skip


_SAMPLE_GPU = board_record(kind="gpu", device="nvidia0", serial="", model="", pci_address="0000:00:00.0")
QUERY_GPU_FIELDS = (*_q_fields(_gpu_state(_SAMPLE_GPU, 0), 0, ""), *_Q_ALIAS)  # every field the stand-in answers


def _timestamp() -> str:
    t = time.time()
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def _nvidia_smi(host: _Host, argv: list[str]) -> int:
    gpus = host.present("gpu")
    if argv == ["-L"]:
        for i, b in enumerate(gpus):
            print(f"GPU {i}: {b['model']} (UUID: {b['uuid']})")
        return 0
    if not gpus and argv and argv[0] != "-h":
        raise ToolError("No devices were found", 6)
    if sorted(argv) == ["-q", "-x"] or argv == ["-x", "-q"]:
        sys.stdout.write(_smi_xml(gpus))
        return 0
    query = [a.split("=", 1)[1] for a in argv if a.startswith("--query-gpu=")]
    fmt = [a.split("=", 1)[1] for a in argv if a.startswith("--format=")]
    if len(query) != 1 or len(argv) != 1 + len(fmt):
        raise ToolError("lab nvidia-smi: -L | -q -x | --query-gpu=<fields> --format=csv[,noheader][,nounits]", 2)
    if not fmt:
        # ASSUMPTION: the wording; nvidia-smi refuses a query without --format.
        raise ToolError('"--format" option must be specified with "--query-gpu"\n', 2)
    opts = [o.strip() for o in fmt[0].split(",")]
    if opts[0] != "csv" or any(o not in ("noheader", "nounits") for o in opts[1:]):
        raise ToolError(f'"{fmt[0]}" is not a valid format.\n', 2)  # ASSUMPTION: the wording
    names = [n.strip() for n in query[0].split(",")]
    now = _timestamp()
    for n in names:
        if _Q_ALIAS.get(n, n) not in _q_fields(_gpu_state(gpus[0], 0), len(gpus), now):
            # ASSUMPTION: the wording (no capture of this error): nvidia-smi names the field and exits 2.
            raise ToolError(f'Field "{n}" is not a valid field to query.\n', 2)
    lines = []
    if "noheader" not in opts:
        head = []
        for n in names:
            canon = _Q_ALIAS.get(n, n)
            unit = _q_fields(_gpu_state(gpus[0], 0), len(gpus), now)[canon][0]
            head.append(f"{canon} [{unit}]" if unit else canon)
        lines.append(", ".join(head))
    for i, b in enumerate(gpus):
        s = _gpu_state(b, i)
        table = _q_fields(s, len(gpus), now)
        row = []
        for n in names:
            canon = _Q_ALIAS.get(n, n)
            unit, value = table[canon]
            if s["lost"] and canon not in _Q_STATIC:
                value = GPU_LOST
            elif unit and "nounits" in opts:
                value = value.removesuffix(f" {unit}")
            row.append(value)
        lines.append(", ".join(row))
    print("\n".join(lines))
    return 0


def _smi_xml(gpus: list[dict[str, Any]]) -> str:
    """``nvidia-smi -q -x`` in the DTD v12 shape (the A100 recording), the elements fleetctl reads and a few around them."""
    from xml.sax.saxutils import escape

    out = ['<?xml version="1.0" ?>', '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">', "<nvidia_smi_log>",
           f"\t<timestamp>{time.strftime('%a %b %d %H:%M:%S %Y')}</timestamp>", f"\t<driver_version>{LAB_DRIVER_VERSION}</driver_version>",
           f"\t<cuda_version>{LAB_CUDA_VERSION}</cuda_version>", f"\t<attached_gpus>{len(gpus)}</attached_gpus>"]  # fmt: skip

    def el(depth: int, tag: str, value: Any = None, children: list[str] | None = None) -> list[str]:
        pad = "\t" * depth
        if children is None:
            return [f"{pad}<{tag}>{escape(str(value))}</{tag}>"]
        return [f"{pad}<{tag}>", *children, f"{pad}</{tag}>"]

    for i, b in enumerate(gpus):
        s = _gpu_state(b, i)

        def m(value: Any, unit: str = "", s: dict[str, Any] = s) -> str:  # a value read from the GPU
            return "GPU is lost" if s["lost"] else f"{value}{unit}"

        ecc = {k: el(4, tag, m(s[key])) for k, (tag, key) in {
            "sc": ("sram_correctable", "ecc_corr"), "su": ("sram_uncorrectable", "ecc_unc"),
            "asc": ("sram_correctable", "ecc_corr_agg"), "asu": ("sram_uncorrectable", "ecc_unc_agg")}.items()}  # fmt: skip
        zero = el(4, "dram_correctable", m(0)) + el(4, "dram_uncorrectable", m(0))
        g = [f'\t<gpu id="{s["bus_id"]}">']
        g += el(2, "product_name", s["name"]) + el(2, "product_brand", "NVIDIA")
        g += el(2, "mig_mode", children=el(3, "current_mig", "Disabled") + el(3, "pending_mig", "Disabled"))
        g += el(2, "serial", s["serial"]) + el(2, "uuid", s["uuid"]) + el(2, "minor_number", s["minor"])
        g += el(2, "vbios_version", s["vbios"])
        link = el(4, "pcie_gen", children=el(5, "max_link_gen", s["gen_max"]) + el(5, "current_link_gen", m(s["gen"])))
        widths = el(5, "max_link_width", f"{s['width_max']}x") + el(5, "current_link_width", m(s["width"], "x"))
        link += el(4, "link_widths", children=widths)
        g += el(2, "pci", children=el(3, "pci_bus_id", s["bus_id"]) + el(3, "pci_gpu_link_info", children=link)
                + el(3, "replay_counter", m(s["replay"])))  # fmt: skip
        g += el(2, "performance_state", "P0")
        g += el(2, "fb_memory_usage", children=el(3, "total", f"{s['mem_total']} MiB") + el(3, "used", m(s["mem_used"], " MiB")))
        g += el(2, "utilization", children=el(3, "gpu_util", m(s["util"], " %")))
        g += el(2, "ecc_mode", children=el(3, "current_ecc", "Enabled") + el(3, "pending_ecc", "Enabled"))
        g += el(2, "ecc_errors", children=el(3, "volatile", children=ecc["sc"] + ecc["su"] + zero)
                + el(3, "aggregate", children=ecc["asc"] + ecc["asu"] + zero))  # fmt: skip
        g += el(2, "retired_pages", children=el(3, "multiple_single_bit_retirement", children=el(4, "retired_count", m(s["sbe"])))
                + el(3, "double_bit_retirement", children=el(4, "retired_count", m(s["dbe"])))
                + el(3, "pending_blacklist", m(s["pending"])) + el(3, "pending_retirement", m(s["pending"])))  # fmt: skip
        g += el(2, "remapped_rows", children=el(3, "remapped_row_corr", m(s["rr_corr"])) + el(3, "remapped_row_unc", m(s["rr_unc"]))
                + el(3, "remapped_row_pending", m(s["rr_pending"])) + el(3, "remapped_row_failure", m(s["rr_failure"])))  # fmt: skip
        g += el(2, "temperature", children=el(3, "gpu_temp", m(s["temp"], " C")) + el(3, "gpu_temp_max_threshold", "92 C")
                + el(3, "gpu_temp_slow_threshold", "89 C") + el(3, "gpu_temp_max_gpu_threshold", "87 C")
                + el(3, "memory_temp", m(s["mem_temp"], " C")) + el(3, "gpu_temp_max_mem_threshold", "95 C"))  # fmt: skip
        g += el(2, "gpu_power_readings", children=el(3, "power_state", "P0") + el(3, "power_draw", m(f"{s['power']:.2f}", " W"))
                + el(3, "current_power_limit", f"{s['limit']:.2f} W") + el(3, "default_power_limit", "350.00 W"))  # fmt: skip
        clocks = el(3, "graphics_clock", m(s["sm"], " MHz")) + el(3, "sm_clock", m(s["sm"], " MHz"))
        clocks += el(3, "mem_clock", m(s["mem"], " MHz"))
        g += el(2, "clocks", children=clocks)
        g += el(2, "max_clocks", children=el(3, "graphics_clock", f"{s['max_sm']} MHz") + el(3, "sm_clock", f"{s['max_sm']} MHz"))
        g.append("\t</gpu>")
        out += g
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


# --- dcgmi diag -------------------------------------------------------------------------


def _dcgmi(host: _Host, argv: list[str]) -> int:
    args = list(argv)
    level: int | None = None
    as_json = False
    if not args or args.pop(0) != "diag":
        raise ToolError("lab dcgmi: only `dcgmi diag -r 1|2|3|4 -j`", 2)
    while args:
        a = args.pop(0)
        if a in ("-r", "--run") and args:
            v = args.pop(0)
            if v not in ("1", "2", "3", "4"):
                # ASSUMPTION: the wording (dcgmi also takes test names; the lab only levels).
                raise ToolError(f"Error: invalid run level or test name '{v}'; the lab takes 1, 2, 3 or 4", 2)
            level = int(v)
        elif a in ("-j", "--json"):
            as_json = True
        else:
            raise ToolError(f"lab dcgmi diag: unknown argument {a!r} (usage: dcgmi diag -r 1|2|3|4 -j)", 2)
    if level is None or not as_json:
        raise ToolError("lab dcgmi diag: -r 1|2|3|4 and -j are required", 2)
    gpus = host.present("gpu")
    if not gpus:
        print(json.dumps({"DCGM GPU Diagnostic": {"runtime_error": "No GPUs found to run the diagnostic on (DCGM_FR_EMPTY_GPU_LIST)"}}))
        return 1
    if level >= 2:
        if any(b["fault"] == "hang" for b in gpus):
            return _hang()
        host.vanish(gpus)
    host.sleep(DCGM_LEVELS[level][0])
    cats: dict[str, list[dict[str, Any]]] = {}
    failed = False
    for lv in range(1, level + 1):
        for cat, tests in DCGM_LEVELS[lv][1]:
            for test in tests:
                fails = {}
                for i, b in enumerate(gpus):
                    hit = DCGM_FAULTS.get(b["fault"])
                    if hit is not None and hit[0] <= level and hit[1] == test:
                        fails[i] = hit
                per_gpu = lv >= 2 or bool(fails)
                results: list[dict[str, Any]] = []
                for i in range(len(gpus)) if per_gpu else [-1]:
                    r: dict[str, Any] = {"status": "Pass"} if i < 0 else {"gpu_ids": str(i), "status": "Pass"}
                    if i in fails:
                        _, _, eid, cat_id, sev, msg = fails[i]
                        st = _gpu_state(gpus[i], i)
                        r.update(status="Fail", warnings=[{"warning": msg.format(i=i, w=st["width"], mw=st["width_max"]), "error_id": eid,
                                                           "error_category": cat_id, "error_severity": sev}])  # fmt: skip
                        failed = True
                    elif test == "GPU Memory":
                        r["info"] = f"GPU {i} Allocated 83214385152 bytes (97.3%)"
                    results.append(r)
                cats.setdefault(cat, []).append({"name": test, "results": results})
    doc = {"DCGM GPU Diagnostic": {"test_categories": [{"category": c, "tests": t} for c, t in cats.items()]}}
    print(json.dumps(doc, indent="\t"))
    # ASSUMPTION: a diagnostic that ran and found a failure exits non-zero; the verdict is in the JSON either way.
    return 1 if failed else 0


# --- gpu-burn ---------------------------------------------------------------------------


def _gpu_burn(host: _Host, argv: list[str]) -> int:
    seconds, doubles, only = 10.0, False, None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "-d":
            doubles = True
        elif a == "-tc":
            pass
        elif a == "-i" and args and args[0].isdigit():
            only = int(args.pop(0))
        elif a.replace(".", "", 1).isdigit() and not args:
            seconds = float(a)
        else:
            # ASSUMPTION: the wording; gpu-burn prints its usage and exits non-zero.
            raise ToolError(f"gpu-burn: bad argument {a!r}\nUsage: gpu-burn [-d] [-tc] [-i N] [SECONDS]", 1)
    gpus = host.present("gpu")
    if only is not None:
        gpus = gpus[only : only + 1]
    if not gpus:
        raise ToolError("No CUDA devices", 1)  # ASSUMPTION: the wording
    for i, b in enumerate(gpus):
        print(f"GPU {i}: {b['model']} (UUID: {b['uuid']})")
    sys.stdout.flush()
    if any(b["fault"] == "hang" for b in gpus):
        print(f"\r0.0%  proc'd: {' - '.join('0 (0 Gflop/s)' for _ in gpus)}   errors: {' - '.join('0' for _ in gpus)}   ", end="")
        return _hang()
    host.vanish(gpus)
    base = GPU_BURN_GFLOPS / (2 if doubles else 1)
    steps = 10
    done = [0] * len(gpus)
    for k in range(1, steps + 1):
        host.sleep(seconds / steps)
        procd, errs, temps = [], [], []
        for i, b in enumerate(gpus):
            f = b["fault"]
            dead = f == "vanish" or (f == "xid" and k > steps // 2)
            if not dead:
                done[i] += 858
            g = base * (0.5 if f == "slow" else 0.7 if f == "hot" else 1.0)
            procd.append(f"{done[i]} ({0 if dead else round(g)} Gflop/s)")
            n = 3 * k if f == "checksum" else 0
            errs.append(f"{n} (DIED!)" if dead else str(n))
            temps.append(f"{min(97, 88 + k) if f == 'hot' else min(65, 40 + 3 * k)} C")
        print(f"\r{100.0 * k / steps:.1f}%  proc'd: {' - '.join(procd)}   errors: {' - '.join(errs)}   temps: {' - '.join(temps)} ", end="")
        if k % 2 == 0:
            print(f"\n\tSummary at:   {time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n")
        sys.stdout.flush()
    print("\nKilling processes.. done\n")
    print(f"Tested {len(gpus)} GPUs:")
    for i, b in enumerate(gpus):
        print(f"\tGPU {i}: {'FAULTY' if b['fault'] in ('checksum', 'vanish', 'xid') else 'OK'}")
    return 0  # gpu-burn exits 0 even when a GPU is FAULTY


# --- dmesg ------------------------------------------------------------------------------


def _dmesg(host: _Host, argv: list[str]) -> int:
    """The kernel log: an Xid 79 line for each ``xid`` GPU (from its boot), nothing else."""
    for n, b in enumerate(b for b in sorted(host.boards, key=lambda b: b["slot"]) if b["kind"] == "gpu" and b["fault"] == "xid"):
        dom, bus, rest = b["pci_address"].split(":")
        print(f"[  {812.4 + n:10.6f}] NVRM: Xid (PCI:{dom}:{bus}:{rest.split('.')[0]}): 79, pid='<unknown>', name=<unknown>, "
              "GPU has fallen off the bus.")  # fmt: skip
    return 0


# --- gpfn3-smi and the MN-Core burn-in ----------------------------------------------------


def _mn_listing(host: _Host) -> list[str]:
    return sorted(p.name for p in host.dev.glob("mnc2p*")) if host.dev.is_dir() else []


def _lock_of(host: _Host, device: str) -> Path:
    return Path(host.config["semaphore_dir"]) / device


def _gpfn3_smi(host: _Host, argv: list[str]) -> int:
    listing = _mn_listing(host)
    if argv == ["list"]:
        for i, name in enumerate(listing):
            print(f"{i}: {name}")
        return 0
    if len(argv) < 2 or argv[0] not in ("reset", "clear") or (argv[0] == "reset" and len(argv) != 2):
        raise ToolError("usage: gpfn3-smi list | reset <device> | clear <device> [-pattern P -seed S]", 2)
    cmd, want, extra = argv[0], argv[1], argv[2:]
    if extra and (len(extra) % 2 or any(k not in ("-pattern", "-seed") for k in extra[::2])):
        raise ToolError("usage: gpfn3-smi clear <device> [-pattern P -seed S]", 2)
    name = listing[int(want)] if want.isdigit() and int(want) < len(listing) else want
    if name not in listing:
        raise ToolError(f"gpfn3-smi: no such device: {want}", 1)  # ASSUMPTION: the wording and status
    lock = _lock_of(host, name)
    if lock.exists():
        holder = lock.read_text().strip() or "?"
        if cmd == "clear":
            # ASSUMPTION: clear refuses a locked board (public: only reset breaks a lock).
            raise ToolError(f"gpfn3-smi: {name} is in use (locked by {holder}); not cleared", 1)
        lock.unlink()
        print(f"gpfn3-smi: {name} was locked by {holder}: the lock is broken, its work is lost", file=sys.stderr)
    host.log_call(f"gpfn3-smi {cmd} {name}" + (" " + " ".join(extra) if extra else ""))
    return 0


def _mncore_burnin(host: _Host, argv: list[str]) -> int:
    devices: list[str] = []
    seconds: float | None = None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--device" and args:
            devices.append(args.pop(0))
        elif a == "--seconds" and args and args[0].replace(".", "", 1).isdigit():
            seconds = float(args.pop(0))
        else:
            raise ToolError(f"mncore-burnin: bad argument {a!r}\nusage: mncore-burnin --device DEV [--device DEV ...] --seconds S", 2)
    if not devices or seconds is None:
        raise ToolError("usage: mncore-burnin --device DEV [--device DEV ...] --seconds S", 2)
    by_name = {b["device"]: b for b in host.boards if b["kind"] == "mncore2"}
    boards = []
    for d in devices:
        if not (host.dev / d).exists():
            raise ToolError(f"mncore-burnin: {d}: no such device", 1)
        boards.append(by_name.get(d) or board_record(kind="mncore2", device=d, serial="", model="MN-Core 2", pci_address=""))
    sem = Path(host.config["semaphore_dir"])
    for b in boards:
        lock = sem / b["device"]
        if lock.exists():
            raise ToolError(f"mncore-burnin: {b['device']} is in use (locked by {lock.read_text().strip() or '?'})", 1)
    sem.mkdir(parents=True, exist_ok=True)
    for b in boards:
        (sem / b["device"]).write_text(f"mncore-burnin pid {os.getpid()}\n")
    if any(b["fault"] == "hang" for b in boards):
        for b in boards:
            print(f"{b['device']}: progress 0% temperature 45 C")
        return _hang()  # the locks stay: a stale lock once it is killed, as with a real program
    host.vanish(boards)
    lost: set[str] = set()
    steps = 4
    for k in range(1, steps + 1):
        host.sleep(seconds / steps)
        for b in boards:
            if b["device"] in lost:
                continue
            if b["fault"] == "vanish":
                lost.add(b["device"])
                print(f"mncore-burnin: {b['device']}: device lost ({host.dev / b['device']} is gone)", file=sys.stderr)
                continue
            temp = min(97, 85 + 3 * k) if b["fault"] == "hot" else min(70, 45 + 6 * k)
            print(f"{b['device']}: progress {100 * k // steps}% temperature {temp} C")
        sys.stdout.flush()
    ok = True
    for b in boards:
        (sem / b["device"]).unlink(missing_ok=True)
        if b["device"] in lost:
            ok = False
            continue
        f = b["fault"]
        tp = MNCORE_THROUGHPUT * (0.5 if f == "slow" else 0.7 if f == "hot" else 1.0)
        bad = f in ("checksum", "memory_errors")
        ok = ok and not bad
        print(f"{b['device']}: throughput {tp:.1f} {MNCORE_UNIT} checksum {MNCORE_BAD_CHECKSUM if bad else MNCORE_CHECKSUM} "
              f"{'FAIL' if bad else 'PASS'}")  # fmt: skip
    return 0 if ok else 1


# --- amd-smi and the ROCm Validation Suite (AMD Instinct) -----------------------------------
#
# The shapes are those of the recordings in tests/data/accel/amd (SOURCES.md): amd-smi's list form
# (amd-smi 24.x, ROCm 6: a JSON list of GPUs, values as {"value", "unit"}, "N/A" where a GPU has no
# figure), and RVS's GST lines and summary table. An MI300X has no edge sensor: "N/A", as on a real one.

AMD_KIND = "amd-instinct"
AMD_RVS_GFLOPS = 100000.0  # lab value per GPU; the driver's criteria take it as the golden figure
AMD_RVS_ACTION = "fleetctl-burnin-gst"  # the action name of the configuration the driver writes (amd.yaml)
_AMD_GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def amd_smi(dev_dir: Path | str, **kw: Any) -> str:
    """``amd-smi list|static|metric|bad-pages|process --json`` and ``reset --gpureset -g N`` over the AMD GPUs whose
    device node is present (``kw``: :func:`accel_config`'s)."""
    return tool_script("amd-smi", accel_config(dev_dir, **kw))


def rvs(dev_dir: Path | str, **kw: Any) -> str:
    """``rvs -c CONF``: the GST module on the AMD GPUs present, for the configuration's ``duration`` (ms)."""
    return tool_script("rvs", accel_config(dev_dir, **kw))


def amd_kfd_id(b: dict[str, Any]) -> int:
    """RVS's id of a GPU (the KFD's gpu_id: a number per GPU, like 42583 in the recording), stable per serial."""
    import zlib

    return 1000 + zlib.crc32(b["serial"].encode()) % 60000


def _amd_state(b: dict[str, Any]) -> dict[str, Any]:
    """What amd-smi reads from AMD GPU ``b``, its fault applied."""
    gen, width, max_gen, max_width = board_link(b)
    s: dict[str, Any] = {"hotspot": 46, "mem": 41, "power": 142, "gen": gen, "width": width, "max_gen": max_gen, "max_width": max_width,
                         "ecc_corr": 0, "ecc_unc": 0, "retired": 0, "pending": 0}  # fmt: skip
    f = b["fault"]
    if f == "hot":
        s.update(hotspot=92, mem=95)
    elif f == "slow":
        s.update(power=300)
    elif f == "memory_errors":
        s.update(ecc_corr=1523, ecc_unc=1, retired=65, pending=1)
    return s


def _vu(value: Any, unit: str) -> dict[str, Any]:
    return {"value": value, "unit": unit}


def _pages(n: int, base: int, status: str) -> Any:
    """Bad pages as amd-smi prints them: the not-found string, one page as an object, or a list."""
    pages = [{"page_address": base + i * 4096, "page_size": 4096, "status": status} for i in range(n)]
    return "No bad pages found." if not pages else pages[0] if len(pages) == 1 else pages


def _amd_smi(host: _Host, argv: list[str]) -> int:
    args = [a for a in argv if a != "--json"]
    if not args:
        raise ToolError("usage: amd-smi list|static|metric|bad-pages|process --json | reset --gpureset -g N", 2)
    cmd, opts = args[0], args[1:]
    gpus = host.present(AMD_KIND)
    if cmd == "reset":
        if opts[:1] != ["--gpureset"] or len(opts) != 3 or opts[1] != "-g" or not opts[2].isdigit():
            raise ToolError("lab amd-smi: reset --gpureset -g N", 2)
        i = int(opts[2])
        if i >= len(gpus):
            raise ToolError(f"amd-smi: GPU {i} not found", 2)  # ASSUMPTION: the wording and status
        host.log_call(f"amd-smi reset --gpureset -g {i}")
        print(f"GPU: {i}\n    RESET: Successfully reset GPU {i}")  # ASSUMPTION: the wording
        return 0
    if "--json" not in argv:
        raise ToolError("lab amd-smi: only --json output is served", 2)
    groups = {"--power": "power", "-p": "power", "--temperature": "temperature", "-t": "temperature"}
    if cmd not in ("list", "static", "metric", "bad-pages", "process") or any(o not in groups for o in opts):
        raise ToolError(f"lab amd-smi: {cmd} {' '.join(opts)}: not served", 2)
    out: list[dict[str, Any]] = []
    for i, b in enumerate(gpus):
        s = _amd_state(b)
        if cmd == "list":
            out.append({"gpu": i, "bdf": b["pci_address"], "uuid": b["uuid"], "kfd_id": amd_kfd_id(b), "node_id": i + 2, "partition_id": 0})
        elif cmd == "static":
            out.append({"gpu": i,
                        "asic": {"market_name": b["model"], "vendor_id": "0x1002", "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
                                 "subvendor_id": "0x1002", "device_id": "0x74a1", "rev_id": "0x00",
                                 "asic_serial": f"0x{amd_kfd_id(b):016X}", "oam_id": b["slot"]},
                        "bus": {"bdf": b["pci_address"], "max_pcie_width": s["max_width"],
                                "max_pcie_speed": _vu(_AMD_GEN_GTS[s["max_gen"]], "GT/s"),
                                "pcie_interface_version": f"Gen {s['max_gen']}", "slot_type": "OAM"},
                        "board": {"model_number": "N/A", "product_serial": b["serial"], "fru_id": "N/A", "product_name": b["model"],
                                  "manufacturer_name": "AMD"},
                        "vbios": {"version": b.get("firmware", {}).get("vbios", "N/A")}})  # fmt: skip
        elif cmd == "metric":
            g: dict[str, Any] = {"gpu": i}
            want = {groups[o] for o in opts} or {"power", "temperature", "pcie", "ecc"}
            if "power" in want:
                g["power"] = {"socket_power": _vu(s["power"], "W"), "gfx_voltage": "N/A", "soc_voltage": "N/A", "mem_voltage": "N/A",
                              "throttle_status": "UNTHROTTLED", "power_management": "ENABLED"}  # fmt: skip
            if "temperature" in want:
                g["temperature"] = {"edge": "N/A", "hotspot": _vu(s["hotspot"], "C"), "mem": _vu(s["mem"], "C")}
            if "pcie" in want:
                g["pcie"] = {"width": s["width"], "speed": _vu(_AMD_GEN_GTS[s["gen"]], "GT/s"), "bandwidth": "N/A", "replay_count": 0}
            if "ecc" in want:
                g["ecc"] = {"total_correctable_count": s["ecc_corr"], "total_uncorrectable_count": s["ecc_unc"], "total_deferred_count": 0,
                            "cache_correctable_count": 0, "cache_uncorrectable_count": 0}  # fmt: skip
            out.append(g)
        elif cmd == "bad-pages":
            out.append({"gpu": i, "retired": _pages(s["retired"], 1 << 20, "RESERVED"), "pending": _pages(s["pending"], 1 << 30, "PENDING"),
                        "un_res": "No bad pages found."})  # fmt: skip
        else:
            out.append({"gpu": i, "process_list": [{"process_info": "No running processes detected"}]})
    print(json.dumps(out, indent=4))
    return 0


def _rvs(host: _Host, argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "-c":
        raise ToolError("lab rvs: -c CONF", 2)
    try:
        conf = Path(argv[1]).read_text()
    except OSError as e:
        raise ToolError(f"rvs: cannot read {argv[1]}: {e}", 1) from e  # ASSUMPTION: the wording
    ms = next((int(ln.split(":", 1)[1]) for ln in conf.splitlines() if ln.strip().startswith("duration:")), 10000)
    gpus = host.present(AMD_KIND)
    t0 = time.monotonic()

    def ts() -> str:
        return f"[RESULT] [{301995.0 + time.monotonic() - t0:.6f}]"

    print(f"{ts()} Action name :{AMD_RVS_ACTION}\n{ts()} Module name :gst")
    if any(b["fault"] == "hang" for b in gpus):
        for b in gpus:
            print(f"{ts()} [{AMD_RVS_ACTION}] [GPU:: {amd_kfd_id(b)}] Start of GPU ramp up")
        return _hang()
    host.vanish(gpus)
    steps = 4
    best: dict[int, float] = {}
    for k in range(1, steps + 1):
        host.sleep(ms / 1000 / steps)
        for b in gpus:
            if b["fault"] == "vanish":
                continue
            f = b["fault"]
            gflops = AMD_RVS_GFLOPS * (0.5 if f == "slow" else 0.7 if f == "hot" else 1.0) * (0.97 + 0.01 * k)
            best[amd_kfd_id(b)] = max(best.get(amd_kfd_id(b), 0.0), gflops)
            print(f"{ts()} [{AMD_RVS_ACTION}] [GPU:: {amd_kfd_id(b)}] GFLOPS {gflops:.0f}")
        sys.stdout.flush()
    ok = True
    for b in gpus:
        if b["fault"] == "vanish":
            print(f"[ERROR ] [{AMD_RVS_ACTION}] [GPU:: {amd_kfd_id(b)}] hipDeviceSynchronize failed", file=sys.stderr)  # ASSUMPTION
            ok = False
            continue
        met = b["fault"] != "checksum"
        ok = ok and met
        print(f"{ts()} [{AMD_RVS_ACTION}] [GPU:: {amd_kfd_id(b)}] GFLOPS {best[amd_kfd_id(b)]:.0f} Target GFLOPS: 0 "
              f"met: {'TRUE' if met else 'FALSE'}")
    # The summary table (RVS 1.6): a row of "<model> - <id>" cells, then "<index> - <node> - <bdf>", two GPUs a row.
    bar = "+" + "-" * 69 + "+"
    print("\n+" + "=" * 69 + "+\n|" + "ROCm Validation Suite (RVS) Summary".center(69) + "|\n+" + "=" * 69 + "+")
    for n in range(0, len(gpus), 2):
        pair = list(enumerate(gpus))[n : n + 2]
        print("| " + " | ".join(f"{b['model']} - {amd_kfd_id(b)}".ljust(32) for _, b in pair) + " |")
        print("| " + " | ".join(f"{i} - {i + 2} - {b['pci_address']}".ljust(32) for i, b in pair) + " |")
        print(bar)
    print(f"| {'Action Name'.ljust(32)} | {'Module'.ljust(14)} | {'Result'.ljust(15)} |")
    print(f"| {AMD_RVS_ACTION.ljust(32)} | {'GST'.ljust(14)} | {('PASS' if ok else 'FAIL').ljust(15)} |")
    print(bar)
    return 0 if ok else 1
