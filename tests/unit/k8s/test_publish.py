"""What a node carries after a sweep (#22 item 4): the condition's status, reason and message, and the unfit taint."""

from __future__ import annotations

import pytest

from fleetctl.k8s.policy import Policy
from fleetctl.k8s.publish import MAX_MESSAGE, OpenFinding, reason_of, wanted

REASONS = [("gpu.memory", "GpuMemory"), ("k8s.accelerators", "K8sAccelerators"), ("psu", "Psu"), ("accel.host_boards", "AccelHostBoards"),
           ("3d.x", "Check3dX"), ("...", "Finding")]  # fmt: skip


@pytest.mark.parametrize(("check", "reason"), REASONS)
def test_a_check_s_name_as_a_camelcase_reason(check: str, reason: str) -> None:
    assert reason_of(check) == reason


def _f(check: str, status: str = "critical", subject: str = "", message: str = "m") -> OpenFinding:
    return OpenFinding(check, subject, status, message)


def test_nothing_open_is_healthy_without_a_taint() -> None:
    cond, taint = wanted(Policy(), [])
    assert (cond.type, cond.status, cond.reason, taint) == ("FleetctlHealthy", "True", "NoOpenFinding", None)


def test_a_warning_is_named_but_healthy() -> None:
    cond, taint = wanted(Policy(), [_f("fan", "warning", "Fan1", "fan 1 slow")])
    assert (cond.status, cond.reason, cond.message, taint) == ("True", "Fan", "warning: fan Fan1: fan 1 slow", None)
    strict = Policy.model_validate({"unhealthy": ["critical", "warning"]})
    assert wanted(strict, [_f("fan", "warning")])[0].status == "False"


def test_a_critical_finding_that_is_not_unfit_is_unhealthy_without_a_taint() -> None:
    cond, taint = wanted(Policy(), [_f("psu", subject="PSU1")])
    assert (cond.status, cond.reason, taint) == ("False", "Psu", None)


def test_an_unfit_finding_taints_and_is_the_reason_before_a_worse_ranked_other() -> None:
    found = [_f("bmc.reachable"), _f("gpu.memory", subject="GPU 0", message="64 retired pages"), _f("fan", "warning")]
    cond, taint = wanted(Policy(), found)
    assert taint is not None and (taint.key, taint.value, taint.effect) == ("fleetctl.io/unfit", "gpu.memory", "NoSchedule")
    assert (cond.status, cond.reason) == ("False", "GpuMemory")
    assert cond.message == "critical: gpu.memory GPU 0: 64 retired pages (and 2 more open findings: fleetctl sweep show)"


def test_the_message_is_bounded() -> None:
    cond, _ = wanted(Policy(), [_f("psu", message="x" * 5000)])
    assert cond.message is not None and len(cond.message) == MAX_MESSAGE and cond.message.endswith("...")
