"""One set of criteria: burn-in and the sweep's host checks judge every reading they share alike.

Each case is one reading of one GPU, given to both judges: burn-in
(``verdict.evaluate`` on a ``BoardObservation``) and the sweep (the host
checks on a ``HostReading``). Burn-in's pass / degraded / fail is the sweep's
nothing / warning / critical. The boundaries are DOMAIN.md's ("retired pages
>= 63 fail") and criteria.yaml's, a limit reached at its value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fleetctl_drivers.accel.nvidia import GpuQuery, XidEvent, board_event, board_reading, parse_query_gpu_csv

from fleetctl.burnin import criteria as crit
from fleetctl.burnin.verdict import BoardObservation, evaluate
from fleetctl.errors import InputError
from fleetctl.sweep import host_checks
from fleetctl.sweep.collect import ServerExpect, ServerReading
from fleetctl.sweep.host import HostReading

DATA = Path(__file__).parent.parent / "data" / "criteria"
SWEEP_OF = {"pass": None, "degraded": "warning", "fail": "critical"}
PCI = "00000000:3B:00.0"
FULL = {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16}
HEALTHY: dict[str, Any] = {"retired": 0, "pending": False, "uncorrected": 0, "temp": 40.0, "link": FULL, "xid": None}


def reading(**kw: Any) -> dict[str, Any]:
    return {**HEALTHY, **kw}


def gpu_query(r: dict[str, Any]) -> GpuQuery:
    link = r["link"]
    return GpuQuery(line=2, index=0, serial="GPU-S0", pci_bus_id=PCI, temperature_gpu_c=r["temp"],
                    ecc_uncorrected_volatile_total=r["uncorrected"], retired_pages_single_bit=r["retired"], retired_pages_double_bit=0,
                    retired_pages_pending=r["pending"], pcie_link_gen_current=link["gen"], pcie_link_gen_max=link["max_gen"],
                    pcie_link_width_current=link["width"], pcie_link_width_max=link["max_width"])  # fmt: skip


def sweep_judges(r: dict[str, Any], *, model: str = "gpu-8x-a100", criteria: Any = None) -> str | None:
    """The worst status the sweep's GPU host checks give this reading (None: no finding)."""
    xids = [XidEvent(line=1, pci="0000:3b:00", xid=r["xid"], message="x")] if r["xid"] is not None else []
    got = ServerReading(host=HostReading(boards=[board_reading(gpu_query(r))], tool="nvidia-smi", events=[board_event(x) for x in xids]))
    e = ServerExpect("gpu-01", "S", model, "site", "rack", 1, board_kind="gpu", board_count=1, criteria=criteria)
    statuses = [p.status.value for fn in (host_checks.gpu_memory, host_checks.gpu_temperature, host_checks.gpu_pcie,
                                          host_checks.gpu_xid) for p in fn(got, e)]  # fmt: skip
    for worst in ("critical", "warning"):
        if worst in statuses:
            return worst
    return None


def burnin_judges(r: dict[str, Any], *, model: str = "gpu-8x-a100", file: crit.CriteriaFile | None = None) -> str:
    """Burn-in's verdict of a board showing this reading (the workload itself healthy)."""
    c = (file or crit.load()).for_board("gpu", model)
    counters = {"uncorrected_ecc": r["uncorrected"]} if r["uncorrected"] is not None else {}  # as burn-in reads them: read or absent
    o = BoardObservation(server="gpu-01", device="GPU 0", kind="gpu", serial="GPU-S0", slot=0, model=model, throughput=24000.0,
                         checksum_ok=True, workload_ok=True, link_before=r["link"], link_after=FULL, retired_pages=r["retired"],
                         retired_pages_pending=r["pending"], errors_before=counters, errors_after=counters,
                         telemetry=[{"t": 1, "temp_c": r["temp"]}],
                         xids=[f"Xid {r['xid']} (since boot): x"] if r["xid"] is not None else [])  # fmt: skip
    return evaluate(o, c).verdict


CASES = [
    # retired pages (single + double bit): DOMAIN.md, >= 63 fail
    ("retired pages 62", reading(retired=62), "pass"),
    ("retired pages 63", reading(retired=63), "fail"),
    ("retired pages 64", reading(retired=64), "fail"),
    # temperature: 85 C warns (degraded / warning), 100 C fails (critical)
    ("84 C", reading(temp=84.0), "pass"),
    ("85 C", reading(temp=85.0), "degraded"),
    ("86 C", reading(temp=86.0), "degraded"),
    ("99 C", reading(temp=99.0), "degraded"),
    ("100 C", reading(temp=100.0), "fail"),
    ("101 C", reading(temp=101.0), "fail"),
    # pages pending retirement: burn-in read none of it before
    ("pending retirement", reading(pending=True), "degraded"),
    # uncorrected ECC errors of the moment (burn-in judged only new ones)
    ("0 uncorrected", reading(uncorrected=0), "pass"),
    ("1 uncorrected", reading(uncorrected=1), "fail"),
    # PCIe link: a narrower link fails (the sweep warned); width 0 (down) too (the sweep said nothing);
    # a lower generation alone is an idle GPU (burn-in failed it)
    ("x8 of x16", reading(link={**FULL, "width": 8}), "fail"),
    ("x0 of x16", reading(link={**FULL, "width": 0}), "fail"),
    ("Gen1 of Gen5 at x16", reading(link={**FULL, "gen": 1}), "pass"),
    # Xids: 79 and the memory ones critical; another (13: an application's fault) a warning (burn-in failed it)
    ("Xid 79", reading(xid=79), "fail"),
    ("Xid 48", reading(xid=48), "fail"),
    ("Xid 13", reading(xid=13), "degraded"),
]


@pytest.mark.parametrize(("what", "r", "verdict"), CASES, ids=[c[0] for c in CASES])
def test_both_judges_agree_on_each_reading(what: str, r: dict[str, Any], verdict: str) -> None:
    assert burnin_judges(r) == verdict, what
    assert sweep_judges(r) == SWEEP_OF[verdict], what


def test_a_healthy_gpu_is_reported_by_neither() -> None:
    assert (burnin_judges(HEALTHY), sweep_judges(HEALTHY)) == ("pass", None)


def test_burnins_xid_lines_and_the_kernels_give_the_same_number() -> None:
    assert crit.xid_code("Xid 79 (during the run): GPU has fallen off the bus.") == 79
    assert crit.xid_code("NVRM: Xid (PCI:0000:3b:00): 13, pid=1234") is None  # the driver parses that one
    assert crit.xid_code("kernel: something else") is None
    # a line whose number cannot be read is judged as critical, never let pass
    assert crit.load().for_board("gpu", None).judge_xid(None, "Xid ?").severity == "fail"


@pytest.mark.parametrize("name", ["rtx4080super_drv595.71.05_idle_gen1-of-gen4.csv", "h100-80gb-hbm3_drv590.48.01_idle.csv"])
def test_recorded_idle_gpus_are_healthy_to_both(name: str) -> None:
    """Real idle GPUs (tests/data/criteria/SOURCES.md): the RTX's link idles at Gen1 of Gen4, which is no fault."""
    g = parse_query_gpu_csv((DATA / name).read_text())[0]
    r = reading(retired=g.retired_pages_single_bit, pending=g.retired_pages_pending, uncorrected=g.ecc_uncorrected_volatile_total,
                temp=float(g.temperature_gpu_c or 0),
                link={"gen": g.pcie_link_gen_current, "max_gen": g.pcie_link_gen_max, "width": g.pcie_link_width_current,
                      "max_width": g.pcie_link_width_max})  # fmt: skip
    assert (burnin_judges(r), sweep_judges(r)) == ("pass", None)


# --- the site's copy judges both -----------------------------------------------------------------------------------


SITE = "kinds:\n  gpu:\n    retired_pages_fail: 10\n    temp_warn_c: 70\n    temp_max_c: 80\n"


@pytest.mark.parametrize(("r", "verdict"), [
    (reading(retired=9), "pass"), (reading(retired=10), "fail"),
    (reading(temp=69.0), "pass"), (reading(temp=70.0), "degraded"), (reading(temp=80.0), "fail"),
])  # fmt: skip
def test_the_sites_criteria_file_judges_the_sweep_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, r: dict[str, Any],
                                                      verdict: str) -> None:  # fmt: skip
    f = tmp_path / "site-criteria.yaml"
    f.write_text(SITE)
    monkeypatch.setenv(crit.ENV, str(f))
    assert burnin_judges(r) == verdict  # burn-in: load() reads $FLEETCTL_BURNIN_CRITERIA
    assert sweep_judges(r) == SWEEP_OF[verdict]  # the sweep: the same file, without being told
    # ... or the file given explicitly, as burn-in's --criteria
    monkeypatch.delenv(crit.ENV)
    given = crit.load(f)
    assert burnin_judges(r, file=given) == verdict
    assert sweep_judges(r, criteria=given.for_board("gpu", "gpu-8x-a100")) == SWEEP_OF[verdict]


def test_an_older_copy_keeps_its_meaning(tmp_path: Path) -> None:
    """``retired_pages_max: 9`` failed above 9: read as ``retired_pages_fail: 10``, the same boards failing."""
    f = tmp_path / "old.yaml"
    f.write_text("levels:\n  mncore:\n    quick: {seconds: 7}\nkinds:\n  gpu:\n    retired_pages_max: 9\n")
    c = crit.load(f)
    assert c.for_board("gpu", None).retired_pages_fail == 10
    assert [burnin_judges(reading(retired=n), file=c) for n in (9, 10)] == ["pass", "fail"]
    assert c.level("mncore2", "quick").seconds == 7 == c.level("mncore", "quick").seconds  # the engine's name of the workload
    f.write_text("kinds:\n  gpu:\n    retired_pages_max: 9\n    retired_pages_fail: 9\n")
    with pytest.raises(InputError, match="retired_pages_fail or the older retired_pages_max, not both"):
        crit.load(f)
    f.write_text("levels:\n  mncore:\n    quick: {seconds: 7}\n  mncore2:\n    quick: {seconds: 8}\n")
    with pytest.raises(InputError, match="give mncore2 or its older spelling mncore, not both"):
        crit.load(f)


# --- one vocabulary of board kinds ---------------------------------------------------------------------------------


def test_board_kinds_are_the_inventorys_everywhere() -> None:
    from fleetctl.inventory.schema import BOARD_KINDS

    assert set(crit.BOARD_KIND_NAMES) == set(BOARD_KINDS)  # the site files' and the store's kinds (and any a driver adds)
    # the defaults are the drivers': MN-Core 2 and GPUs have a burn-in, first-generation MN-Core boards none
    assert set(crit.load().kinds) <= set(crit.board_kinds()) and {"mncore2", "gpu"} <= set(crit.load().levels)
    assert {"gpu", "mncore2"} <= set(crit.burnable_kinds()) and "mncore" not in crit.burnable_kinds()
    assert [crit.burnin_kind(s) for s in ("mncore2", "gpu", "--mncore", "--gpu")] == ["mncore2", "gpu", "mncore2", "gpu"]
    # --mncore always ran the MN-Core 2 workload; first-generation boards are refused by name, not burned in with MN-Core 2 tools
    assert crit.BOARD_KINDS["mncore"] == ("mncore2",)
    with pytest.raises(InputError, match=r"mncore \(first-generation MN-Core board\): no burn-in"):
        crit.burnin_kind("mncore")
    with pytest.raises(InputError, match="'mncore3' is not a board kind"):
        crit.burnin_kind("mncore3")
    assert crit.board_kind_of_run("mncore") == "mncore2" and crit.board_kind_of_run("gpu") == "gpu"


def test_a_criteria_file_naming_no_board_kind_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("kinds:\n  nvidia:\n    temp_warn_c: 80\n")
    with pytest.raises(InputError, match=r"kinds\.nvidia: not a board kind \(the board kinds: mncore2, mncore, gpu[,)]"):
        crit.load(f)


@pytest.mark.parametrize(("args", "message"), [
    (["--kind", "mncore"], "no burn-in for this kind"),
    (["--kind", "tpu"], "'tpu' is not a board kind"),
    (["--kind", "gpu", "--mncore"], "give the board kind once"),
    ([], "give the board kind once"),
])  # fmt: skip
def test_the_cli_speaks_board_kinds(args: list[str], message: str, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    import sys

    from fleetctl.cli.app import main

    monkeypatch.setattr(sys, "argv", ["fleetctl", "burnin", *args, "--dry-run"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 2
    assert message in " ".join(capsys.readouterr().err.split())
