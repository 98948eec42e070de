"""The burn-in rules, from observations to verdicts, and the criteria file that sets them."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleetctl_drivers.accel.mncore import match_mncore, mncore_pci

from fleetctl.burnin import criteria as crit
from fleetctl.burnin.engine import _sensor_slot, exit_code
from fleetctl.burnin.host import InvBoard, session_script, stop_leftover_script
from fleetctl.burnin.verdict import BoardObservation, evaluate, worst
from fleetctl.errors import InputError

C = crit.load()
MN = C.for_board("mncore2", "mn-server-2")
GPU = C.for_board("gpu", "gpu-8x-a100")
FULL = {"speed_gts": 16.0, "width": 16, "max_speed_gts": 16.0, "max_width": 16, "gen": 4, "max_gen": 4, "degraded": False}


def obs(**kw: object) -> BoardObservation:
    base: dict[str, object] = {"server": "s1", "device": "mnc2p27s0", "kind": "mncore2", "serial": "B1", "slot": 0,
                               "throughput": 393.2, "checksum_ok": True, "workload_ok": True, "link_before": FULL,
                               "link_after": FULL, "telemetry": [{"t": 1, "temp_c": 60.0, "source": "host"}]}  # fmt: skip
    base.update(kw)
    return BoardObservation(**base)  # type: ignore[arg-type]


def test_a_healthy_board_passes_with_its_figures() -> None:
    v = evaluate(obs(), MN)
    assert (v.verdict, v.reasons) == ("pass", [])
    assert v.metrics["throughput"] == 393.2 and v.metrics["max_temp_c"] == 60.0 and v.metrics["throughput_fraction"] == 1.0


@pytest.mark.parametrize(("fraction", "verdict"), [(0.95, "pass"), (0.9, "pass"), (0.7, "degraded"), (0.6, "degraded"), (0.59, "fail")])
def test_throughput_against_the_golden_value(fraction: float, verdict: str) -> None:
    v = evaluate(obs(throughput=393.2 * fraction), MN)
    assert v.verdict == verdict
    if verdict != "pass":
        assert v.reasons[0].criterion == "throughput" and v.reasons[0].evidence["golden"] == 393.2


@pytest.mark.parametrize(("temp", "verdict"), [(84.0, "pass"), (85.0, "degraded"), (99.0, "degraded"), (100.0, "fail")])
def test_temperature_limits(temp: float, verdict: str) -> None:
    assert evaluate(obs(telemetry=[{"t": 0, "temp_c": 50.0}, {"t": 1, "temp_c": temp}]), MN).verdict == verdict


@pytest.mark.parametrize(
    ("change", "criterion"),
    [
        ({"checksum_ok": False, "workload_ok": False}, "checksum"),
        ({"workload_errors": 3}, "checksum"),
        ({"lost": "gone", "throughput": None}, "device_lost"),
        ({"hung": True, "throughput": None}, "hung"),
        ({"present": False, "throughput": None}, "missing"),
        ({"link_after": {**FULL, "width": 8, "degraded": True}}, "link_degraded"),
        ({"xids": ["Xid 79: fallen off the bus"]}, "xid"),
        ({"errors_before": {"uncorrected_ecc": 0}, "errors_after": {"uncorrected_ecc": 2}}, "new_memory_errors"),
        ({"diag": [{"test": "PCIe", "status": "Fail", "message": "x", "setup_error": False}]}, "diag_fail"),
    ],
)
def test_each_failing_criterion_fails_the_board_and_says_why(change: dict[str, object], criterion: str) -> None:
    v = evaluate(obs(**change), GPU if criterion in ("xid", "diag_fail") else MN)
    assert v.verdict == "fail", v
    assert criterion in {r.criterion for r in v.reasons if r.severity == "fail"}


def test_gpu_retired_pages_and_corrected_errors_and_power() -> None:
    g = {"kind": "gpu", "device": "GPU 0", "throughput": 24000.0}
    assert evaluate(obs(**g, retired_pages=62), GPU).verdict == "pass"
    v = evaluate(obs(**g, retired_pages=63), GPU)
    assert v.verdict == "fail" and v.reasons[0].criterion == "memory_retired"
    v = evaluate(obs(**g, errors_before={"corrected_ecc": 5}, errors_after={"corrected_ecc": 9}), GPU)
    assert v.verdict == "degraded" and v.reasons[0].criterion == "corrected_errors"
    v = evaluate(obs(**g, telemetry=[{"t": 0, "temp_c": 60, "power_w": 410.0}]), GPU)  # gpu-8x-a100 sets 400 W
    assert v.verdict == "degraded" and v.reasons[0].criterion == "power"


def test_a_setup_error_and_a_firmware_note_do_not_change_the_verdict() -> None:
    v = evaluate(obs(diag=[{"test": "Deployment", "status": "Fail", "message": "x", "setup_error": True}],
                     firmware=[("mncore2_slot0_board", "1.4.2", "0.9.7")]), MN)  # fmt: skip
    assert v.verdict == "pass"
    assert [(r.criterion, r.severity) for r in v.reasons] == [("firmware", "note")]


def test_worst_and_exit_codes() -> None:
    assert worst(["pass", "degraded", "pass"]) == "degraded"
    assert worst(["pass", "fail", "error"]) == "error"
    assert worst([]) == "pass"
    assert [exit_code(v) for v in ("pass", "degraded", "error", "fail")] == [0, 1, 4, 5]


def test_a_site_copy_overrides_key_by_key_and_bad_values_name_the_key(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("kinds:\n  mncore2:\n    pass_fraction: 0.95\nmodels:\n  mn-server-2:\n    golden_throughput: 400\n")
    c = crit.load(f)
    got = c.for_board("mncore2", "mn-server-2")
    assert (got.pass_fraction, got.fail_fraction, got.golden_throughput) == (0.95, 0.6, 400.0)
    assert c.level("gpu", "quick").dcgm_level == 1
    f.write_text("kinds:\n  mncore2:\n    pass_fraction: 2\n")
    with pytest.raises(InputError, match=r"c\.yaml:3: kinds\.mncore2\.pass_fraction"):
        crit.load(f)
    f.write_text("models:\n  mn-server-2:\n    golden_thruput: 1\n")
    with pytest.raises(InputError, match=r"models\.mn-server-2\.golden_thruput"):
        crit.load(f)
    f.write_text("levels: [\n")
    with pytest.raises(InputError, match="not valid YAML"):
        crit.load(f)
    with pytest.raises(InputError, match="no level 'huge'"):
        c.level("mncore", "huge")


def test_boards_are_matched_to_device_names_by_bus_never_by_index() -> None:
    boards = [InvBoard("A", "mncore2", 0, "0000:1b:00.0"), InvBoard("B", "mncore2", 1, "0000:3d:00.0"), InvBoard("C", "mncore2", 2, None)]
    # the listing's order (and so its indexes) says nothing: mnc2p61s0 (bus 0x3d) is B wherever it is listed
    got = match_mncore(boards, ["mnc2p61s0", "mnc2p159s0", "mnc2p27s0"])
    assert got == {"A": "mnc2p27s0", "B": "mnc2p61s0", "C": "mnc2p159s0"}
    assert match_mncore(boards, ["mnc2p27s0"]) == {"A": "mnc2p27s0", "B": None, "C": None}
    assert mncore_pci("mnc2p27s0") == "0000:1b:00.0"


def test_bmc_sensors_are_tied_to_their_board_slot() -> None:
    assert [_sensor_slot(n) for n in ("MNCore2 Temp", "GPU 3 Temp", "gpu_7", "Inlet Temp", "CPU1 Temp")] == [2, 3, 7, None, None]


def test_the_workload_runs_in_a_session_a_later_run_can_kill(tmp_path: Path) -> None:
    import subprocess
    import time

    work = str(tmp_path / "w")
    proc = subprocess.Popen(["sh", "-c", session_script(work, "sleep 60 & sleep 60 & wait")])
    deadline = time.monotonic() + 5
    while not (tmp_path / "w" / "pgid").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    out = subprocess.run(["sh", "-c", stop_leftover_script(work)], capture_output=True, text=True, check=True).stdout
    assert out.startswith("stopped "), out
    assert proc.wait(5) != 0  # the session (and both sleeps) killed
    assert not (tmp_path / "w" / "pgid").exists()
    assert subprocess.run(["sh", "-c", stop_leftover_script(work)], capture_output=True, text=True, check=True).stdout == ""


def test_one_round_trip_reads_listing_nodes_links_and_locks(tmp_path: Path) -> None:
    """The pre-check script on a fake host: sections parsed, links from sysfs by the device name's bus, live vs stale locks."""
    import os
    import subprocess

    from fleetctl_drivers.accel import AccelParseError
    from fleetctl_drivers.accel.mncore import _links, _mn_state_script, _sections
    from fleetctl_drivers.accel.pcie import parse_sysfs_link

    dev, sysfs, sem = tmp_path / "dev", tmp_path / "sys", tmp_path / "sem"
    for d in (dev, sysfs, sem):
        d.mkdir()
    for name in ("mnc2p27s0", "mnc2p61s0"):
        (dev / name).touch()
    for addr, (cur, width) in {"0000:1b:00.0": ("16.0 GT/s PCIe", "16"), "0000:3d:00.0": ("5.0 GT/s PCIe", "8")}.items():
        (sysfs / addr).mkdir()
        files = {"current_link_speed": cur, "current_link_width": width, "max_link_speed": "16.0 GT/s PCIe", "max_link_width": "16"}
        for k, v in files.items():
            (sysfs / addr / k).write_text(v + "\n")
    smi = tmp_path / "smi"
    smi.write_text("#!/bin/sh\necho '0: mnc2p27s0'\necho '1: mnc2p61s0'\n")
    smi.chmod(0o755)
    (sem / "mnc2p27s0").write_text(f"training pid {os.getpid()}\n")  # a live holder
    (sem / "mnc2p61s0").write_text("mncore-burnin pid 999999999\n")  # gone
    script = _mn_state_script(str(smi), f"{dev}/mnc2p*", str(sysfs), str(sem), full=True)
    got = _sections(subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout)
    assert got["rc"].strip() == "0" and got["list"].split() == ["0:", "mnc2p27s0", "1:", "mnc2p61s0"]
    assert set(got["nodes"].split()) == {"mnc2p27s0", "mnc2p61s0"}
    links = _links(got["links"], parse_sysfs_link, AccelParseError)
    assert links["mnc2p27s0"]["degraded"] is False and links["mnc2p61s0"]["degraded"] is True  # type: ignore[index]
    assert links["mnc2p61s0"]["width"] == 8  # type: ignore[index]
    locks = dict(ln.split(" ", 1) for ln in got["locks"].splitlines())
    assert locks["busy"].startswith("mnc2p27s0 training pid") and locks["stale"] == "mnc2p61s0"
    post = _sections(subprocess.run(["sh", "-c", _mn_state_script(str(smi), f"{dev}/mnc2p*", str(sysfs), str(sem), full=False)],
                                    capture_output=True, text=True, check=True).stdout)  # fmt: skip
    assert set(post) == {"nodes", "links"}
