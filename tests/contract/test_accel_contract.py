"""One accelerator contract, every registered accelerator driver (after NAPALM's shared getter tests).

The contract (``fleetctl_drivers.testing.accel``, shipped in the drivers
package so an out-of-tree driver runs the same one) runs for every driver the
``fleetctl.accel`` entry points register, found as the core finds them
(``fleetctl.plugins.accel_driver``), labelled by the first board kind each
serves:

- against every recorded tool output in ``shared/accel-outputs`` that a
  driver's read takes (:data:`RECORDINGS`; skipped, saying why, where the
  shared folder is absent), and against hosts whose every tool fails, prints
  garbage or nothing, passes the session's bound or never ends;
- against the lab's stand-in host of its kind (:data:`STANDINS`: the lab's
  ``HostSandbox`` with its stand-in tools, run on this machine through
  ``LocalHost``, time running 1000x faster): the read, every burn-in stage on
  healthy boards, and an inventory board the host lacks.

A driver registered without a row here fails
``test_every_registered_driver_has_a_row``; a file added to the shared folder
fails ``test_every_recorded_output_has_a_row`` until a row reads it or
:data:`NOT_READ` says why none does. Two rows run every burn-in stage on
recorded output (the listing, gpu-burn's log, dcgmi's report).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fleetctl_drivers.testing.accel import AccelContract, LocalHost, Recording, StandIn
from mockup_server import shared_dir

from fleetctl import plugins
from fleetctl.interfaces.accel import AccelDriver, InvBoard

_SHARED = shared_dir()
#: The recorded outputs (absent: each recording's tests skip, naming the file).
OUTPUTS = (_SHARED if _SHARED is not None else Path(__file__).resolve().parents[2] / ".." / "shared") / "accel-outputs"
CSV = OUTPUTS / "nvidia-smi-query-gpu-csv"
AMD = Path(__file__).resolve().parents[1] / "data" / "accel" / "amd"


def _nvidia(file: str, boards: int | None, *, burn: str | None = None, diag: str | None = None) -> Recording:
    """nvidia-smi's CSV query answered with a recorded one (its own fields: the parser reads the header), no Xid line;
    with ``burn`` (and ``diag``: dcgmi diag -r 2 -j) every burn-in stage answers from recordings too."""
    answers: dict[str, Path | str] = {r"nvidia-smi .*--query-gpu": CSV / file, r"\bdmesg\b": ""}
    if burn:
        answers[r"\bgpu-burn\b"] = OUTPUTS / "gpu-burn" / burn
    if diag:
        answers[r"\bdcgmi\b.* diag "] = OUTPUTS / "dcgmi" / diag
    name = Path(file).stem + (f"+{Path(burn).stem}" if burn else "")
    return Recording(name, answers, boards=boards, stages=burn is not None, diag_level=2 if diag else None)


def _amd(name: str, metric: str) -> Recording:
    """amd-smi's reads answered from tests/data/accel/amd (SOURCES.md there: list, static and bad-pages are hand-made
    after amd-smi's own source; metric is recorded, in both its forms): three GPUs listed, none busy."""
    return Recording(name, {
        r"amd-smi.? list --json": AMD / "handmade-mi300x-list.json",
        r"amd-smi.? static --json": AMD / "handmade-mi300x-static.json",
        r"amd-smi.? metric --json": AMD / metric,
        r"amd-smi.? bad-pages --json": AMD / "handmade-bad-pages.json",
        r"amd-smi.? process --json": "[]",  # idle (the recorded process list holds GPU 0: burn-in rightly refuses it)
        r"\bdmesg\b": "",
    }, boards=3)  # fmt: skip


#: label -> the recorded hosts its driver reads. No public recording of gpfn3-smi exists (the MN-Core SDK
#: documentation shows two lines of it, which the parser's unit tests hold): MN-Core runs against the stand-in alone.
RECORDINGS: dict[str, list[Recording]] = {
    "gpu": [
        _nvidia("h100-80gb-hbm3_drv590.48.01_idle.csv", 1),
        _nvidia("h100-80gb-hbm3_drv590.48.01_load-gpuburn.csv", 1),
        _nvidia("h100-80gb-hbm3-mig-enabled_drv590.48.01_idle.csv", 1),
        _nvidia("l40s_drv595.80_load.csv", 1),
        _nvidia("rtx4080super_drv595.71.05_idle_gen1-of-gen4.csv", 1),
        _nvidia("h100-80gb-hbm3-x8_drv535.161.07_EDITED-rows4-7-duplicate.csv", 8),
        # Every stage from recordings of different machines: the listing's GPU 0 gets GPU 0's result in the log
        # (8 V100s; a Quadro and a Titan) and in dcgmi's report (a T4), as the driver matches them by index.
        _nvidia("h100-80gb-hbm3_drv590.48.01_idle.csv", 1, burn="v100-sxm2-16gb-x8_gpu-burn_all-ok.log",
                diag="tesla-t4_dcgmi-diag-r2-j.json"),
        _nvidia("l40s_drv595.80_load.csv", 1, burn="quadro-rtx8000-plus-titan-rtx_gpu-burn_all-ok.log"),
    ],
    "mncore2": [],
    "amd-instinct": [_amd("amd-smi-mi300x", "amdsmi-changelog-metric-power.json"),
                     _amd("amd-smi-gpu_data-form", "gpu-notifier-metric-gpu_data.json")],
}

#: Folders (or files) of shared/accel-outputs that no row reads, and why.
NOT_READ: dict[str, str] = {
    # One row per retired page, not per GPU: a real nvidia-smi asked --query-gpu never prints it. Fed as that
    # answer the NVIDIA driver lists the GPU twice (both rows "GPU ?"), which the contract refuses.
    "nvidia-smi-query-gpu-csv/h100-80gb-hbm3_drv590.48.01_query-retired-pages.csv": "answers --query-retired-pages",
    # 91 samples of one GPU (nvidia-smi -lms): a time series, not a listing (fed as one, GPU 0 is listed 91 times).
    "nvidia-smi-query-gpu-csv/unknown-gpu_power-draw-series_pkb.csv": "a loop's samples of one GPU (-lms), not a listing",
    "dcgmi/dcgmi-health-c-j_healthy.json": "dcgmi health: no driver runs it",
    "dcgmi/dcgmi-modules-l.txt": "dcgmi modules: no driver runs it",
    "dcgmi/tesla-t4_dcgmi-discovery-l.txt": "dcgmi discovery: no driver runs it",
    "dcgmi/tesla-t4_dcgmi-dmon-e-1001-1004-1005.txt": "dcgmi dmon: no driver runs it",
    "nvidia-smi-xml": "nvidia-smi -q -x: parsed in tests/unit/accel; no read or stage asks for it",
    "nvidia-smi-q-text": "nvidia-smi -q as text: no driver reads the text form",
    "nvidia-smi-text": "nvidia-smi's default table: no driver reads it",
    "nvidia-smi-captures": "a whole session of nvidia-smi commands, for reference",
    "nvidia-smi-nvlink": "NVLink status: no driver reads it yet",
    "lspci": "lspci -vvv: PCIe links are read from sysfs and the tools",
    "fio": "a disk's test, not an accelerator's",
    "smartctl": "a disk's health, not an accelerator's",
    "stress-ng": "a CPU and memory test, not an accelerator's",
    "stressapptest": "a memory test, not an accelerator's",
}

#: label -> the lab's server kind (``generate_specs(mix=...)``) whose host stands in for it.
STANDINS: dict[str, str] = {"gpu": "gpu", "mncore2": "mncore", "amd-instinct": "amd"}


def registered() -> dict[str, AccelDriver]:
    """Every driver the ``fleetctl.accel`` entry points register, as the core gets it, by its first board kind."""
    out: dict[str, AccelDriver] = {}
    for name in plugins.driver_names("accel"):
        d = plugins.accel_driver(name)
        out.setdefault(d.kinds[0] if d.kinds else type(d).__name__, d)
    return out


class TestRegisteredAccelDrivers(AccelContract):
    """The contract for every registered accelerator driver, with this repository's recordings and lab stand-ins."""

    def drivers(self) -> dict[str, AccelDriver]:
        return registered()

    def recordings_of(self, label: str) -> list[Recording]:
        return RECORDINGS.get(label, [])

    def standin(self, label: str, tmp_path: Path) -> StandIn | None:
        if label not in STANDINS:
            return None
        try:
            from fleetctl_lab import host_standins
            from fleetctl_lab.bmc import generate_specs
            from fleetctl_lab.hosts import HostSandbox
        except ImportError as e:
            pytest.skip(f"the lab is not installed: {e}")
        (spec,) = generate_specs(1, prefix="ct", mix=(STANDINS[label],))
        sb = HostSandbox(tmp_path, spec)
        sb.sync({"install_id": 1, "boot_id": 1, "devices_missing": 0})
        env = {**sb.env(os.environ.get("USER", "fleet")), host_standins.TIME_SCALE_ENV: "0.001"}
        boards = [InvBoard(serial=b.serial, kind=b.kind, slot=b.slot, pci_address=b.pci_address, model=b.model) for b in spec.boards]
        return StandIn(LocalHost(spec.name, env=env, cwd=sb.home), sb.vars(), boards, model=spec.model)


def test_every_registered_driver_has_a_row() -> None:
    """A driver registered in fleetctl.accel runs the contract on its stand-in and its recordings: add both rows."""
    labels = set(registered())
    assert labels, "no accelerator driver registered (is fleetctl-drivers installed?)"
    assert labels <= set(STANDINS), f"no stand-in row (STANDINS) for {sorted(labels - set(STANDINS))}"
    assert labels <= set(RECORDINGS), f"no row in RECORDINGS ([] and a reason if none exist) for {sorted(labels - set(RECORDINGS))}"
    assert set(STANDINS) | set(RECORDINGS) <= labels, "rows for drivers no longer registered"


def test_every_recorded_output_has_a_row() -> None:
    """Each file of shared/accel-outputs is read by a row of RECORDINGS, or it (or its folder) is in NOT_READ."""
    if not OUTPUTS.is_dir():
        pytest.skip("shared/accel-outputs not found beside the repository (set FLEETCTL_SHARED)")
    files = {p for p in OUTPUTS.rglob("*") if p.is_file() and p.parent != OUTPUTS}
    read = {Path(str(a)) for rows in RECORDINGS.values() for r in rows for a in r.answers.values() if isinstance(a, Path)}
    rel = {p: p.relative_to(OUTPUTS) for p in files}
    unread = sorted(str(rel[p]) for p in files - read if rel[p].parts[0] not in NOT_READ and str(rel[p]) not in NOT_READ)
    assert not unread, f"add a row to RECORDINGS (or the folder to NOT_READ) for {unread}"
    shared = {p for p in read if OUTPUTS in p.parents}
    assert shared <= files, f"rows for files no longer recorded: {sorted(map(str, shared - files))}"
    known = {str(r) for r in rel.values()} | {r.parts[0] for r in rel.values()}
    assert set(NOT_READ) <= known, f"NOT_READ names what is no longer recorded: {sorted(set(NOT_READ) - known)}"
    assert not {str(r) for p, r in rel.items() if p in read} & set(NOT_READ), "a file both read and said not read"
