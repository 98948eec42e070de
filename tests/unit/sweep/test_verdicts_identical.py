"""Fewer and cheaper requests, the same verdicts (issue 24): the sweep's checks on readings fetched the old way and the new.

The old way: every part read (``ReadPlan.full()``), plain GETs, each collection's members one by one
(``expand=False``), no cache. The new way, as ``engine.sweep_targets`` reads: only what the registered checks
need (``bmc_operation``'s default plan), ``$expand`` where the BMC offers it, and conditional GETs on a
:class:`ReadingCache`: a first sweep that fills it (200 + ETag) and a second that is answered 304 wherever
the document did not change; and the new way with HTTP Basic on every request in place of a session
(``auth="basic"``, ``$FLEETCTL_BMC_AUTH=basic``: no login, no logout). The findings (check, subject, status,
message) of all four must be the same, but for one difference by design (:func:`_by_design`).

On every lab fault (``fleetctl_lab.bmc.state.FAULTS``, but ``hang``: it only costs the timeout, and
``latency_ms``) on the AMI dialect (``$expand``, MaxLevels 5: the new way reads its PCIe devices and log
services 3 levels deep, and once more 2 levels deep) and the OpenBMC one (none), one healthy BMC of every lab
dialect, and every recorded BMC in ``shared/redfish-mockups`` (which send no ETag: there the new way falls
back to plain GETs, as on a BMC that gives none).
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.sweep import server_checks
from fleetctl.sweep.collect import BoardExpect, ReadPlan, ServerExpect, ServerReading, bmc_operation
from fleetctl.sweep.engine import _evaluate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "contract"))
from mockup_server import MockupServer, mockups_dir

fleetctl_lab = pytest.importorskip("fleetctl_lab.bmc")
from fleetctl_drivers.redfish import capabilities, run_many  # noqa: E402
from fleetctl_drivers.redfish.cache import ReadingCache  # noqa: E402

#: Every lab fault but those that only slow a read down; the value that sets it.
FAULT_VALUES: dict[str, Any] = {
    "error_rate": 1, "drop": True, "session_limit": True, "psu_failed": True, "fan_failed": True, "hot_sensor": True,
    "pcie_degraded": True, "memory_errors": 3, "firmware_fail": True, "push_only": True, "clock_skew_s": 3600,
    "device_missing": True, "wrong_cert": True, "nextlink_loop": True, "nextlink_forever": "Processors",
    "sensors_absent": True, "board_no_serial": True,
}  # fmt: skip
NOT_READ_FAULTS = {"hang", "latency_ms"}
FAULTED_DIALECTS = ("ami", "openbmc")
ALL_DIALECTS = ("generic", "hpe", "ilo6", "dell", "idrac9", "openbmc", "ami", "nvidia")
#: A fault the lab serves with a fresh certificate on each connection: its fingerprint is in the message.
_FINGERPRINT = re.compile(r"(?:[0-9A-F]{2}:){31}[0-9A-F]{2}")
#: error_rate answers 500 or 503 at random, request by request.
_INJECTED_5XX = re.compile(r"HTTP 50[03]: The request failed due to an internal service error \(injected\)\. \[[\w.]+\]")


def test_the_fault_set_is_every_lab_fault() -> None:
    """A fault added to the lab is added here (or named as one that changes no reading)."""
    assert set(fleetctl_lab.FAULTS) == set(FAULT_VALUES) | NOT_READ_FAULTS


def _verdicts(readings: dict[str, ServerReading], expects: dict[str, ServerExpect]) -> dict[str, list[tuple[str, ...]]]:
    out = {}
    for name, reading in readings.items():
        found = server_checks.explained(_evaluate("server", name, reading, expects[name], "bmc"))
        rows = []
        for f in found:
            message = _FINGERPRINT.sub("<fingerprint>", f.message)
            message = _INJECTED_5XX.sub("HTTP 5xx: (injected)", message)
            if f.check == "bmc.clock":  # the skew is measured at the read: whole seconds may differ by one
                message = re.sub(r"[+-]\d+ s", "<skew> s", message)
            rows.append((f.check, f.subject, str(f.status), message))
        out[name] = sorted(rows)
    return out


def _sweep(targets: list[BMCTarget], *, plan: ReadPlan | None, expand: bool, cache: ReadingCache | None,
           counts: dict[str, tuple[int, int]] | None = None, auth: str = "session") -> dict[str, ServerReading]:  # fmt: skip
    op = bmc_operation({}, plan=plan, cache=cache) if plan is not None else bmc_operation({}, cache=cache)

    async def counted(bmc: Any) -> ServerReading:
        r = await op(bmc)
        if counts is not None:
            counts[bmc.target.name] = (bmc.client.conditional_sent, bmc.client.not_modified)
        return r

    async def run() -> list[Any]:
        return await run_many(targets, counted, concurrency=16, per_target_timeout=60, read_once=True, expand=expand,
                              backoff=0.01, auth=auth)  # fmt: skip

    out: dict[str, ServerReading] = {}
    for r in asyncio.run(run()):
        out[r.target] = r.value if r.ok else ServerReading(session_error=r.error, session_error_type=r.error_type)
    return out


#: The one difference by design: with ``nextlink_loop`` every collection loops, and the old way's first to fail
#: in ``facts`` was EthernetInterfaces, which no check judges and the new way does not read; it names the
#: next one (Processors). The finding is the same (bmc.read, facts, unknown); only the collection named differs.
_LOOPING_COLLECTION = re.compile(r"collection \S+: its next link \S+ comes back to a page already read \(after \d+ pages?, \d+ members\)")


#: With HTTP Basic no session is opened, so a BMC whose session slots are all taken (``session_limit``) is read
#: (docs/bmc.md, "Session limits": Basic is the operator's choice, never a fallback). The old way's finding is
#: the read's unknown naming the session limit; read with Basic, that healthy lab BMC has no finding.
_SESSIONS_FULL = "/session_limit"


def _by_design(label: str, rows: list[tuple[str, ...]], *, old: bool, basic: bool = False) -> list[tuple[str, ...]]:
    if basic and label.endswith(_SESSIONS_FULL):
        if old:
            assert rows and all("session limit reached" in r[3] for r in rows), rows
        else:
            assert rows == [], rows
        return []
    if not label.endswith("/nextlink_loop"):
        return rows
    out = []
    for check, subject, status, message in rows:
        if check == "bmc.read" and subject == "facts":
            assert ("/EthernetInterfaces:" in message) == old, message
            message = _LOOPING_COLLECTION.sub("collection <c> loops", message)
        out.append((check, subject, status, message))
    return out


def _same(old: dict[str, list[tuple[str, ...]]], new: dict[str, list[tuple[str, ...]]], label: dict[str, str], *,
          basic: bool = False) -> None:  # fmt: skip
    old = {n: _by_design(label[n], v, old=True, basic=basic) for n, v in old.items()}
    new = {n: _by_design(label[n], v, old=False, basic=basic) for n, v in new.items()}
    differ = {label[n]: (old[n], new.get(n)) for n in old if new.get(n) != old[n]}
    assert not differ, "\n".join(f"{k}:\n  old {o}\n  new {n}" for k, (o, n) in sorted(differ.items()))
    assert set(new) == set(old)


def _old_and_new(targets: list[BMCTarget], expects: dict[str, ServerExpect], cache_file: Path) -> tuple[Any, ...]:
    old = _verdicts(_sweep(targets, plan=ReadPlan.full(), expand=False, cache=None), expects)
    cache = ReadingCache(cache_file)
    first = _verdicts(_sweep(targets, plan=None, expand=True, cache=cache), expects)
    counts: dict[str, tuple[int, int]] = {}
    second = _verdicts(_sweep(targets, plan=None, expand=True, cache=cache, counts=counts), expects)
    cache.close()
    basic = _verdicts(_sweep(targets, plan=None, expand=True, cache=None, auth="basic"), expects)
    return old, first, second, basic, counts


def test_lab_faults_and_dialects_judged_the_same_old_and_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases: list[tuple[str, str, dict[str, Any]]] = [(d, f, {f: v}) for d in FAULTED_DIALECTS for f, v in FAULT_VALUES.items()]
    cases += [(d, "healthy", {}) for d in ALL_DIALECTS]
    specs = []
    for i, (dialect, _fault, _) in enumerate(cases):
        (spec,) = fleetctl_lab.generate_specs(1, prefix=f"vi{i:02d}", flavours=(dialect,), start=i)
        specs.append(spec)
    config = fleetctl_lab.LabConfig(state_dir=tmp_path / "lab", power_transition_s=0.1, firmware_update_s=0.3)
    with fleetctl_lab.run_lab_in_thread(specs, config) as lab:
        for spec, (_, _, faults) in zip(specs, cases, strict=True):
            if faults:
                lab.set_fault(spec.name, **faults)
        targets = [BMCTarget(name=s.name, url=lab.url_of(s.name), username=s.username, password=s.password,
                             fingerprint=lab.fingerprint_of(s.name), timeout=10, retries=0) for s in specs]  # fmt: skip
        expects = {s.name: ServerExpect(s.name, s.serial, s.model, "lab", "r1", 1, s.boards[0].kind if s.boards else None,
                                        len(s.boards), [BoardExpect(b.slot, b.kind, b.serial) for b in s.boards],
                                        baseline=dict(s.firmware)) for s in specs}  # fmt: skip
        old, first, second, basic, counts = _old_and_new(targets, expects, tmp_path / "cache.sqlite")
        # The AMI dialect offers $expand with MaxLevels 5: the new way reads 3 levels deep (capabilities'
        # SWEEP_EXPAND_LEVELS); 2 levels (collections inline with their members still links) must judge the same.
        monkeypatch.setattr(capabilities, "SWEEP_EXPAND_LEVELS", 2)
        two_levels = _verdicts(_sweep(targets, plan=None, expand=True, cache=None), expects)
    label = {s.name: f"{d}/{f}" for s, (d, f, _) in zip(specs, cases, strict=True)}
    _same(old, two_levels, label)
    _same(old, first, label)
    _same(old, second, label)
    _same(old, basic, label, basic=True)
    # The faults were seen (the comparison is not of empty verdicts), and the second sweep took the 304 path.
    faulted = {label[n]: {c for c, *_ in v} for n, v in old.items()}
    assert "psu" in faulted["ami/psu_failed"] and "bmc.clock" in faulted["openbmc/clock_skew_s"], faulted
    healthy = [s.name for s, (_, f, _) in zip(specs, cases, strict=True) if f == "healthy"]
    assert all(counts[n][1] > 0 for n in healthy), {label[n]: counts[n] for n in healthy}


def test_recorded_bmcs_judged_the_same_old_and_new(tmp_path: Path) -> None:
    base = mockups_dir()
    if base is None:
        pytest.skip("shared/redfish-mockups not found beside the repository (set FLEETCTL_SHARED)")
    folders = sorted(p.name for p in base.iterdir() if (p / "index.json").is_file() and (p / "Systems").is_dir())
    assert folders, base
    servers = {name: MockupServer(base / name) for name in folders}
    for s in servers.values():
        s.start()
    try:
        targets = [BMCTarget(name=n, url=s.url, username="admin", password="secret", timeout=10, retries=0) for n, s in servers.items()]
        expects = {n: ServerExpect(n, "", "", "", "", 0, baseline={"BMC": "0"}) for n in servers}
        old, first, second, basic, _ = _old_and_new(targets, expects, tmp_path / "cache.sqlite")
    finally:
        for s in servers.values():
            s.stop()
    _same(old, first, {n: n for n in old})
    _same(old, second, {n: n for n in old})
    _same(old, basic, {n: n for n in old}, basic=True)
    assert all(old[n] for n in folders)  # every recording is judged (its firmware, at least, is not the baseline's)
