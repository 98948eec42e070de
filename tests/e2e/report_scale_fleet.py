"""A store of a large fleet with two finished sweeps, for the report's layout at scale (#25 item 17).

The inventory is the shape ``fleetctl_lab.sitegen fleet`` gives a site (racks
of 40 1U servers, two leaves and a management switch on top), with rack names
as a hall's (``tyo1-hall-b-r07``) and the server names sitegen uses; the
sweeps are written through the store's tables, as ``bench/sweep.py``'s
populate helper does: ~6% of the servers with one to three findings (the
messages real BMCs give, see bench/sweep.py), a third of those acknowledged
with a ticket reason. A few seconds for 2,000 servers on SQLite.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from sqlalchemy import insert

from fleetctl.models import FirmwareBaseline, HardwareModel, Rack, Server, Site, Switch
from fleetctl.store import get_engine, session
from fleetctl.store import tables as T

# (check, subject, status, message): as the sweep writes them (see bench/sweep.py).
CHECKS = [
    ("bmc_health", "System", "warning", "System health Warning: 1 of 6 fans degraded"),
    ("psu.redundancy", "PSU2", "critical", "PSU2 lost input power: redundancy lost (1 of 2 PSUs OK)"),
    ("firmware.baseline", "BMC", "warning", "BMC firmware 2.13.1 is not the baseline 2.14.0"),
    ("board_presence", "slot 3", "critical", "board slot 3 (MN2B-0100232) missing from the PCIe inventory"),
    ("temperature", "CPU1 Temp", "warning", "CPU1 Temp at 88 C (warning at 85 C)"),
    ("sel_errors", "log", "warning", "3 new critical SEL entries since the last sweep (memory ECC)"),
    ("clock_skew", "Manager", "warning", "BMC clock 95 s ahead of this host"),
]
REASONS = [
    "vendor RMA INC-20431 open, PSU replacement scheduled for the next maintenance window",
    "known issue, fixed by BMC 2.14.1 (rollout tracked in CHG-8812)",
    "ECC errors on DIMM B2: part on order",
]


def rack_name(r: int) -> str:
    return f"tyo1-hall-b-r{r:02d}"


def server_name(r: int, i: int) -> str:
    return f"mn-tyo1-r{r:02d}-{i:02d}"


def fill(url: str, *, servers: int = 2000, racks: int = 50, now: dt.datetime, seed: int = 25) -> dict[str, Any]:
    """Write the fleet and two finished sweeps (a day apart, the latest an hour before ``now``) into the store at ``url``.

    Returns what a test looks for: the latest run's id, a server with an
    acknowledged finding (its panel has an ack column) and the rack names.
    """
    rnd = random.Random(seed)
    per_rack = -(-servers // racks)
    names: list[tuple[str, int, int]] = []  # (name, rack number, position)
    for n in range(servers):
        r, i = n // per_rack + 1, n % per_rack + 1
        names.append((server_name(r, i), r, i))
    height = max(44, per_rack + 3)
    # The inventory through the models (their defaults), the sweeps through the tables (fast, as bench/sweep.py).
    with session(url) as db:
        site = Site(name="tyo1")
        box = HardwareModel(name="mn-server-2-1u", kind="server", vendor="Preferred Networks", model="MN-Server 2 (1U)", height=1)
        leaf = HardwareModel(name="sn2700", kind="switch", vendor="NVIDIA", model="SN2700 (SONiC)", height=1)
        db.add_all([site, box, leaf])
        db.flush()
        db.add_all([FirmwareBaseline(model_id=box.id, component="BMC", version="2.14.0"),
                   FirmwareBaseline(model_id=box.id, component="BIOS", version="1.8.2")])  # fmt: skip
        rack_objs = {r: Rack(site_id=site.id, name=rack_name(r), row="B", position=r, height=height) for r in range(1, racks + 1)}
        db.add_all(rack_objs.values())
        db.flush()
        db.add_all([Server(name=name, serial=f"MNS01{r:03d}{p:02d}", model_id=box.id, rack_id=rack_objs[r].id, position=p)
                   for name, r, p in names])  # fmt: skip
        db.add_all([Switch(name=f"{role}-tyo1-r{r:02d}{sfx}", model_id=leaf.id, platform="sonic", role=role,
                          mgmt_address=f"10.201.{r}.{k + 1}", rack_id=rack_objs[r].id, position=height - 2 + k)
                   for r in range(1, racks + 1)
                   for k, (role, sfx) in enumerate((("management", ""), ("leaf", "-a"), ("leaf", "-b")))])  # fmt: skip
    with get_engine(url).begin() as c:
        bad = {s: rnd.sample(range(len(CHECKS)), rnd.randint(1, 3)) for s in rnd.sample(range(servers), servers * 6 // 100)}
        ack_ids: dict[tuple[int, int], int] = {}
        for s, ks in list(bad.items())[: len(bad) // 3]:
            k = ks[0]
            chk, subj, st, _ = CHECKS[k]
            ack_ids[(s, k)] = c.execute(insert(T.finding_ack).values(
                kind="server", target=names[s][0], check=chk, subject=subj, status=st, reason=REASONS[s % len(REASONS)],
                actor="oncall@tyo1", created_at=now - dt.timedelta(days=3), until=now + dt.timedelta(days=14))
                .returning(T.finding_ack.c.id)).scalar_one()  # fmt: skip
        run_id = 0
        for back in (dt.timedelta(days=1, hours=1), dt.timedelta(hours=1)):
            when = now - back
            worst = {s: ("critical" if any(CHECKS[k][2] == "critical" for k in ks) else "warning") for s, ks in bad.items()}
            counts = {"ok": servers - len(bad), "warning": 0, "unknown": 0, "critical": 0}
            for w in worst.values():
                counts[w] += 1
            run_id = c.execute(insert(T.sweep_run).values(
                started_at=when, finished_at=when + dt.timedelta(seconds=55), state="finished", level="bmc", selector="all",
                actor="tester", host="ci", pid=1, duration_s=55.0, servers=servers, switches=3 * racks, counts=counts,
                worst_new="critical").returning(T.sweep_run.c.id)).scalar_one()  # fmt: skip
            c.execute(insert(T.sweep_target), [
                {"run_id": run_id, "kind": "server", "name": name, "site": "tyo1", "rack": rack_name(r), "position": p,
                 "status": worst.get(n, "ok"), "elapsed": 0.4, "error": None,
                 "metrics": {"max_temp_c": round(38 + rnd.random() * 20 + (15 if n in bad else 0), 1),
                             "firmware": {"BMC": "2.13.1" if n % 17 == 0 else "2.14.0", "BIOS": "1.8.2"}}}
                for n, (name, r, p) in enumerate(names)])  # fmt: skip
            c.execute(insert(T.finding), [
                {"run_id": run_id, "kind": "server", "target": names[s][0], "check": CHECKS[k][0], "subject": CHECKS[k][1],
                 "status": CHECKS[k][2], "message": CHECKS[k][3], "evidence": {}, "first_seen": now - dt.timedelta(days=1, hours=1),
                 "last_seen": when, "new": back.days == 1, "ack_id": ack_ids.get((s, k))}
                for s, ks in bad.items() for k in ks])  # fmt: skip
    acked = next(names[s][0] for s, _ in ack_ids)
    return {"run_id": run_id, "acked": acked, "racks": [rack_name(r) for r in range(1, racks + 1)]}
