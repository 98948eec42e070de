"""Counters of two polls turned into per-second rates (pure, no I/O).

Wrap-safety: SNMP counters are unsigned and wrap to zero at 2**32
(Counter32) or 2**64 (Counter64); the increase is ``(now - before) mod 2**bits``.

A counter can also go down without wrapping (the agent restarted, a line card
was reseated, counters were cleared). Two guards keep that from showing as a
huge bogus rate:

- sysUpTime went down between the polls -> the agent rebooted; no rates at all.
- an octet rate above twice the port's speed (when the speed is known) is a
  discontinuity, not traffic -> that rate is None with a note.

sysUpTime itself is a TimeTicks that wraps after ~497 days; a drop of
sysUpTime is only called a reboot when the wall clock does not explain it as
a wrap.
"""

from __future__ import annotations

from fleetctl.interfaces.snmp import InterfaceCounters, InterfaceRates, PollResult, Rates

UPTIME_MODULUS = 2**32  # TimeTicks, hundredths of a second
_SPEED_SLACK = 2.0  # an octet rate above this many times the port speed is a discontinuity


def counter_delta(before: int | None, now: int | None, bits: int) -> int | None:
    """Increase of a counter of ``bits`` bits between two readings, across one wrap."""
    if before is None or now is None:
        return None
    return (now - before) % (1 << bits)


def rebooted(previous: PollResult, current: PollResult) -> bool | None:
    """True if sysUpTime says the agent restarted between the two polls.

    None when either poll lacks sysUpTime. A decrease that the wall clock
    explains as a TimeTicks wrap (497 days of uptime) is not a reboot. An
    increase far smaller than the wall clock's is one: polls a day apart
    around a reboot two hours ago see uptime grow from one hour to two.
    """
    before, now = previous.sys_uptime_ticks, current.sys_uptime_ticks
    if before is None or now is None:
        return None
    wall_ticks = (current.polled_at - previous.polled_at).total_seconds() * 100
    if now >= before:
        # uptime keeps pace with the wall clock (within 10 % and 3 s) unless the agent restarted in between
        return wall_ticks > 0 and (now - before) < 0.9 * wall_ticks - 300
    wrapped = now + UPTIME_MODULUS - before
    # a wrap: the ticks that passed across the wrap match the wall clock (within 10 % + 10 s)
    return not (wall_ticks > 0 and abs(wrapped - wall_ticks) <= 0.1 * wall_ticks + 1000)


def interval_seconds(previous: PollResult, current: PollResult) -> float | None:
    """Seconds between the polls, by the client's clock (None if not positive)."""
    seconds = (current.polled_at - previous.polled_at).total_seconds()
    return seconds if seconds > 0 else None


def rates(previous: PollResult, current: PollResult) -> Rates:
    """Per-interface rates from ``previous`` to ``current`` (same agent).

    Interfaces present now but not before get None rates with a note;
    interfaces that disappeared are left out.
    """
    out = Rates(target=current.target)
    if not previous.ok or not current.ok:
        out.reason = "a poll failed: " + (current.error or previous.error or "")
        return out
    out.rebooted = rebooted(previous, current)
    if out.rebooted:
        out.reason = "the agent rebooted between the polls (sysUpTime went down)"
        return out
    seconds = interval_seconds(previous, current)
    if seconds is None:
        out.reason = "no time passed between the polls"
        return out
    out.interval_s = seconds
    before_by_index = {i.index: i for i in previous.interfaces}
    for now in current.interfaces:
        before = before_by_index.get(now.index)
        if before is None:
            out.interfaces.append(InterfaceRates(index=now.index, name=now.label, note="not in the previous poll"))
            continue
        out.interfaces.append(_interface_rates(before, now, seconds))
    return out


def _interface_rates(before: InterfaceCounters, now: InterfaceCounters, seconds: float) -> InterfaceRates:
    r = InterfaceRates(index=now.index, name=now.label)
    notes: list[str] = []

    def per_s(a: int | None, b: int | None, bits: int) -> float | None:
        d = counter_delta(a, b, bits)
        return None if d is None else d / seconds

    if before.octets_bits == now.octets_bits:
        bits = now.octets_bits
        in_bytes, out_bytes = per_s(before.in_octets, now.in_octets, bits), per_s(before.out_octets, now.out_octets, bits)
        r.in_bps = None if in_bytes is None else in_bytes * 8
        r.out_bps = None if out_bytes is None else out_bytes * 8
        limit = now.speed_mbps * 1e6 * _SPEED_SLACK if now.speed_mbps else None
        if limit is not None:
            if r.in_bps is not None and r.in_bps > limit:
                r.in_bps = None
                notes.append("in octets jumped beyond the port speed (counter reset?)")
            if r.out_bps is not None and r.out_bps > limit:
                r.out_bps = None
                notes.append("out octets jumped beyond the port speed (counter reset?)")
    else:
        notes.append("octet counters switched between 32 and 64 bits")
    r.in_errors_ps = per_s(before.in_errors, now.in_errors, 32)
    r.out_errors_ps = per_s(before.out_errors, now.out_errors, 32)
    r.in_discards_ps = per_s(before.in_discards, now.in_discards, 32)
    r.out_discards_ps = per_s(before.out_discards, now.out_discards, 32)
    if notes:
        r.note = "; ".join(notes)
    return r
