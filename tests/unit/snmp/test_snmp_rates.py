"""rates(): wrap-safe counters, reboot detection, missing interfaces (pure)."""

from __future__ import annotations

import datetime as dt

import pytest
from fleetctl_drivers.snmp import counter_delta, rates, rebooted

from fleetctl.interfaces.snmp import InterfaceCounters, PollResult

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def poll(seconds: float, uptime: int | None, *ifs: InterfaceCounters, error: str | None = None) -> PollResult:
    return PollResult(
        target="leaf01", host="127.0.0.1", port=161, polled_at=T0 + dt.timedelta(seconds=seconds),
        sys_uptime_ticks=uptime, interfaces=list(ifs), error=error, error_kind="timeout" if error else None,
    )


def port(index: int = 1, **kw: object) -> InterfaceCounters:
    base: dict[str, object] = dict(in_octets=0, out_octets=0, in_errors=0, out_errors=0, in_discards=0, out_discards=0)
    base.update(kw)
    return InterfaceCounters(index=index, name=f"Ethernet{index}", **base)  # type: ignore[arg-type]


def test_counter_delta_plain_and_wraps() -> None:
    assert counter_delta(10, 25, 32) == 15
    assert counter_delta(2**32 - 10, 5, 32) == 15  # Counter32 wrapped once
    assert counter_delta(2**64 - 1, 0, 64) == 1  # Counter64 wrapped once
    assert counter_delta(None, 5, 32) is None


def test_rates_simple() -> None:
    before = poll(0, 1000, port(in_octets=1_000, out_octets=0, in_errors=5))
    after = poll(10, 2000, port(in_octets=1_000 + 1_250_000, out_octets=125_000, in_errors=25))
    r = rates(before, after)
    assert r.interval_s == 10 and r.rebooted is False and r.reason is None
    i = r.interface(1)
    assert i is not None
    assert i.in_bps == pytest.approx(1_000_000)
    assert i.out_bps == pytest.approx(100_000)
    assert i.in_errors_ps == pytest.approx(2)
    assert i.out_errors_ps == 0


def test_counter32_octets_wrap() -> None:
    before = poll(0, 100, port(in_octets=2**32 - 1_000, octets_bits=32, speed_mbps=1000))
    after = poll(1, 200, port(in_octets=4_000, octets_bits=32, speed_mbps=1000))
    i = rates(before, after).interface(1)
    assert i is not None and i.in_bps == pytest.approx(5_000 * 8)


def test_counter64_octets_wrap() -> None:
    before = poll(0, 100, port(in_octets=2**64 - 500, out_octets=2**64 - 1))
    after = poll(2, 300, port(in_octets=1_500, out_octets=1))
    i = rates(before, after).interface(1)
    assert i is not None
    assert i.in_bps == pytest.approx(2_000 * 8 / 2)
    assert i.out_bps == pytest.approx(2 * 8 / 2)


def test_error_counter32_wrap() -> None:
    before = poll(0, 100, port(in_errors=2**32 - 2, out_discards=2**32 - 1))
    after = poll(1, 200, port(in_errors=3, out_discards=0))
    i = rates(before, after).interface(1)
    assert i is not None and i.in_errors_ps == 5 and i.out_discards_ps == 1


def test_reboot_between_polls_gives_no_rates() -> None:
    before = poll(0, 500_000, port(in_octets=10**12))
    after = poll(60, 3_000, port(in_octets=1_000))  # sysUpTime went down: rebooted
    r = rates(before, after)
    assert r.rebooted is True
    assert r.interfaces == []
    assert r.reason and "rebooted" in r.reason
    assert rebooted(before, after) is True


def test_uptime_wrap_is_not_a_reboot() -> None:
    # 497 days of uptime: TimeTicks wrapped, and the wall clock explains it
    before = poll(0, 2**32 - 1_000, port(in_octets=0))
    after = poll(30, 2_000, port(in_octets=30_000))
    r = rates(before, after)
    assert r.rebooted is False
    i = r.interface(1)
    assert i is not None and i.in_bps == pytest.approx(8_000)


def test_no_uptime_means_unknown_reboot_but_rates_given() -> None:
    before, after = poll(0, None, port(in_octets=0)), poll(1, None, port(in_octets=100))
    r = rates(before, after)
    assert r.rebooted is None
    assert r.interface(1).in_bps == 800  # type: ignore[union-attr]


def test_missing_and_new_interfaces() -> None:
    before = poll(0, 100, port(1), port(2))
    after = poll(1, 200, port(1, in_octets=10), port(3, in_octets=99))
    r = rates(before, after)
    assert [i.index for i in r.interfaces] == [1, 3]  # 2 vanished: left out
    new = r.interface(3)
    assert new is not None and new.in_bps is None and new.note == "not in the previous poll"
    assert r.interface(1).in_bps == 80  # type: ignore[union-attr]


def test_missing_counter_gives_none_rate() -> None:
    before = poll(0, 100, port(in_errors=None))
    after = poll(1, 200, port(in_errors=4))
    assert rates(before, after).interface(1).in_errors_ps is None  # type: ignore[union-attr]


def test_counter_reset_beyond_port_speed_is_not_traffic() -> None:
    # a 64-bit counter that went down (cleared) looks like a near-2**64 increase
    before = poll(0, 100, port(in_octets=10**12, speed_mbps=25_000))
    after = poll(1, 200, port(in_octets=5, speed_mbps=25_000))
    i = rates(before, after).interface(1)
    assert i is not None and i.in_bps is None and "counter reset" in (i.note or "")


def test_failed_poll_gives_no_rates() -> None:
    r = rates(poll(0, 100, port()), poll(1, None, error="no answer"))
    assert r.interfaces == [] and r.reason and "no answer" in r.reason


def test_no_time_passed() -> None:
    r = rates(poll(5, 100, port()), poll(5, 100, port()))
    assert r.interfaces == [] and r.reason == "no time passed between the polls"


def test_octet_width_change_gives_note() -> None:
    before = poll(0, 100, port(in_octets=5, octets_bits=32))
    after = poll(1, 200, port(in_octets=10, octets_bits=64))
    i = rates(before, after).interface(1)
    assert i is not None and i.in_bps is None and "32 and 64" in (i.note or "")


@pytest.mark.parametrize("uptime_now,want", [
    (3_600 * 100 + 86_400 * 100, False),  # a day later, a day more uptime
    (2 * 3_600 * 100, True),  # a day later, up two hours: rebooted since, though up longer than at the last poll
    (3_600 * 100 + 86_400 * 100 - 5_000, False),  # 50 s behind the clock in a day: within 10 %
])  # fmt: skip
def test_a_reboot_between_polls_a_day_apart_is_seen_even_when_uptime_grew(uptime_now: int, want: bool) -> None:
    assert rebooted(poll(0, 3_600 * 100), poll(86_400, uptime_now)) is want


def test_short_intervals_allow_a_few_seconds_of_jitter() -> None:
    assert rebooted(poll(0, 100_000), poll(5, 100_000 + 300)) is False  # 2 s behind in 5 s: jitter, not a reboot
    assert rebooted(poll(0, 100), poll(8.5, 250)) is True  # up 1 s, then 2.5 s after 8.5 s: it restarted
