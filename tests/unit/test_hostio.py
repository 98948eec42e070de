"""A host that answers without end cannot make fleetctl use unbounded memory (issue 20).

A small asyncssh server on loopback, in a child process of its own, answers each command
as the test says: without end (far more than 100x any real output: a server's
kernel log, the largest, is ~1 MB), on one line that never ends, never, or
as a real tool would. Each reader of host output (fleetctl.hostio itself,
the host sweep, burn-in's commands and its streamed workload and dcgmi,
provisioning's readiness probe) is run against it; the bytes kept
(tracemalloc's peak) stay within the bound, and the error names the host and
the command. Each reader runs in a forked child of its own too (:func:`run_alone`),
so that the peak is the reader's alone: the test worker may hold other tests'
servers in threads, whose allocations tracemalloc would count as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

import pytest
from fleetctl_drivers.accel import nvidia

from fleetctl import hostio
from fleetctl.interfaces import accel
from fleetctl.interfaces.host import BatchPart
from tests.alone import in_child

asyncssh = pytest.importorskip("asyncssh")

MiB = 1 << 20
# Peaks are bounded by twice what a reader keeps (the kept bytes, then their join or decoding) plus this: the
# connection's own buffers and packets in flight. Without the bounds the host's 1 GiB would be kept.
SLACK = 4 * MiB
FLOOD_LIMIT = 1 << 30  # the server stops writing by itself only after 1 GiB: the client stops first


async def _flood(process: Any, line: bytes, *, stream: str = "stdout") -> None:
    out = process.stdout if stream == "stdout" else process.stderr
    chunk = line * max(1, (64 << 10) // len(line))
    sent = 0
    with contextlib.suppress(Exception):  # the client closed the channel: that is the point
        while sent < FLOOD_LIMIT and not out.is_closing():
            out.write(chunk)
            await out.drain()
            sent += len(chunk)


Answer = Callable[[Any], Awaitable[None]]


def flood(line: bytes = b"[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n") -> Answer:
    async def answer(process: Any) -> None:
        await _flood(process, line)

    return answer


def text(out: bytes, err: bytes = b"", status: int = 0) -> Answer:
    async def answer(process: Any) -> None:
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(status)

    return answer


async def never(process: Any) -> None:
    await asyncio.sleep(3600)


class _NoAuth(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return False  # any user, no credentials: the test's loopback host


class Host:
    """An SSH server on 127.0.0.1, in a forked child; its answer to a command is the first rule whose key is in the command line.

    ``with Host(rules) as host:`` starts it (outside the test's event loop) and stops the child at the end.
    """

    def __init__(self, rules: dict[str, Answer]) -> None:
        self.rules = rules
        self.port = 0
        self._child: Any = None

    async def _handle(self, process: Any) -> None:
        cmd = process.command or ""
        for key, answer in self.rules.items():
            if key in cmd:
                await answer(process)
                break
        with contextlib.suppress(Exception):
            process.exit(0)

    def _serve(self, pipe: Any) -> None:
        async def main() -> None:
            key = asyncssh.generate_private_key("ssh-ed25519")
            srv = await asyncssh.create_server(_NoAuth, "127.0.0.1", 0, server_host_keys=[key], process_factory=self._handle,
                                               encoding=None)  # fmt: skip
            pipe.send(srv.sockets[0].getsockname()[1])
            await asyncio.sleep(3600)

        asyncio.run(main())

    def __enter__(self) -> Host:
        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe()
        self._child = ctx.Process(target=self._serve, args=(child,), daemon=True)
        self._child.start()
        if not parent.poll(30):
            self._child.kill()
            raise RuntimeError("the test's SSH server did not start")
        self.port = parent.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        self._child.kill()
        self._child.join(5)

    def endpoint(self) -> Any:
        from fleetctl.interfaces.host import HostTarget

        return HostTarget(name="gpu-07", address="127.0.0.1", port=self.port, user="fleet")

    def connect(self) -> Any:
        return asyncssh.connect("127.0.0.1", self.port, username="fleet", known_hosts=None, client_keys=None, agent_path=None)


@contextlib.contextmanager
def peak() -> Iterator[list[int]]:
    """tracemalloc's peak (bytes) while the block runs, in got[0] after it."""
    got: list[int] = []
    tracemalloc.start()
    try:
        yield got
    finally:
        got.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


def run_alone(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """``asyncio.run(scenario())`` in a forked child (tests/alone.py): the peak there is the reader's alone."""
    in_child(lambda: asyncio.run(scenario()))


# ------------------------------------------------------------------ fleetctl.hostio


def test_run_stops_a_command_that_prints_without_end_and_names_host_and_command() -> None:
    host = Host({"dmesg": flood()})

    async def scenario() -> None:
        async with host.connect() as conn:
            with peak() as got, pytest.raises(hostio.HostOutputError) as err:
                await hostio.run(conn, "dmesg", host="gpu-07", timeout=60, max_bytes=2 * MiB)
            e = err.value
            assert (e.host, e.command, e.timed_out) == ("gpu-07", "dmesg", False)
            assert str(e).startswith("gpu-07: `dmesg`: printed more than 2097152 bytes")
            assert got[0] < 2 * 2 * MiB + SLACK  # measured 3.2 MiB; the host sent until stopped (up to 1 GiB)
            # the connection is still usable: the stopped command's channel is closed, not the connection
            assert (await hostio.run(conn, "echo", host="gpu-07", timeout=10)).exit_status == 0

    with host:
        run_alone(scenario)


def test_run_keeps_what_a_real_tool_prints_and_bounds_stderr() -> None:
    host = Host({"nvidia-smi": text(b"index, serial\n0, 1650522003820\n\xff\n", b"warning\n" * 100_000, status=3)})

    async def scenario() -> None:
        async with host.connect() as conn:
            out = await hostio.run(conn, "nvidia-smi", host="gpu-07", timeout=30)
            assert out.stdout == "index, serial\n0, 1650522003820\n\ufffd\n"  # not UTF-8: replaced, not an error
            assert out.exit_status == 3
            assert len(out.stderr) == hostio.MAX_STDERR_BYTES and out.stderr_dropped == 800_000 - hostio.MAX_STDERR_BYTES
            assert out.last_error_line() == "warning"

    with host:
        run_alone(scenario)


def test_run_has_a_deadline() -> None:
    host = Host({"sleep": never})

    async def scenario() -> None:
        async with host.connect() as conn:
            with pytest.raises(hostio.HostOutputError, match=r"gpu-07: `sleep 9`: did not end within 0.5 s") as err:
                await hostio.run(conn, "sleep 9", host="gpu-07", timeout=0.5)
            assert err.value.timed_out

    with host:
        run_alone(scenario)


def test_stream_cuts_a_line_that_never_ends_and_stops_at_the_deadline() -> None:
    host = Host({"burn": flood(b"x" * 4096)})  # no newline, ever
    seen: list[int] = []

    async def scenario() -> None:
        async with host.connect() as conn:
            with peak() as got:
                status, hung = await hostio.stream(conn, "burn", deadline=time.monotonic() + 1.5,
                                                   on_line=lambda s, ln: seen.append(len(ln)), max_line=64 << 10)  # fmt: skip
            assert (status, hung) == (None, True)
            assert got[0] < 2 * (64 << 10) + SLACK  # measured 0.9 MiB
            assert seen == []  # the line never ended: nothing was handed on (and the peak says what was held)

    with host:
        run_alone(scenario)


def test_kept_lines_keep_head_and_tail_within_budget() -> None:
    kept = hostio.KeptLines(head=100, tail=100)
    for i in range(10_000):
        kept.add(f"line {i:05d}")  # 11 bytes each with its end
    assert kept.kept_bytes <= 200 and kept.overflowed
    lines = kept.lines()
    assert lines[0] == "line 00000" and lines[-1] == "line 09999"
    assert kept.dropped_lines == 10_000 - len(lines)
    whole = hostio.KeptLines(head=1000)
    whole.add("a" * 10)
    assert not whole.overflowed and whole.text() == "a" * 10


# ------------------------------------------------------------------ the readers: sweep, burn-in, provisioning


def test_host_sweep_reads_within_bounds_and_names_the_host() -> None:
    from fleetctl.interfaces.host import HostRef
    from fleetctl.sweep import host as sweep_host

    host = Host({"nvidia-smi": flood(b"0, 1650522003820, 00000000:3B:00.0, 45, 0, 0, 0, No, 4, 4, 16, 16\n"), "dmesg": flood()})

    async def scenario() -> None:
        with peak() as got:
            r = await sweep_host.read_host(HostRef(host.endpoint(), {}, "gpu"), timeout=60)
        assert r.error is None and r.boards is None and r.events is None
        assert r.errors["nvidia-smi"].startswith("gpu-07: `nvidia-smi --query-gpu=index,serial")
        assert f"printed more than {nvidia.MAX_TOOL_BYTES} bytes" in r.errors["nvidia-smi"]
        assert r.errors["dmesg"].startswith(f"gpu-07: `dmesg`: printed more than {nvidia.MAX_DMESG_BYTES} bytes")
        # both commands at once: what each keeps, plus a window each in flight, plus the parsers' nothing
        assert got[0] < 2 * (nvidia.MAX_TOOL_BYTES + nvidia.MAX_DMESG_BYTES) + SLACK  # measured 24 MiB

    with host:
        run_alone(scenario)


def _gpu_job(endpoint: Any, **kw: Any) -> Any:
    from fleetctl.burnin.host import HostJob, InvBoard

    return HostJob(server="gpu-07", target=endpoint, hostvars={"fleetctl_burnin_dir": "/tmp/fleetctl-test-burnin"}, kind="gpu",
                   boards=[InvBoard(serial="1650522003820", kind="gpu", slot=0)], model="test", seconds=1.0, grace=2.0,
                   interval=60.0, command_timeout=60.0, **kw)  # fmt: skip


CSV = (b"index, serial, pci.bus_id, ecc.errors.corrected.volatile.total, ecc.errors.uncorrected.volatile.total, "
       b"retired_pages.single_bit_ecc.count, retired_pages.double_bit.count, retired_pages.pending, pcie.link.gen.current, "
       b"pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max\n"
       b"0, 1650522003820, 00000000:3B:00.0, 0, 0, 0, 0, No, 4, 4, 16, 16\n")  # fmt: skip


def test_burnin_command_that_prints_without_end_is_the_hosts_error() -> None:
    from fleetctl.burnin import host as burnin_host

    host = Host({"mkdir -p": flood(b"stopped 4242\n")})  # the first stage: stopping a leftover burn-in

    async def scenario() -> None:
        with peak() as got:
            out = await burnin_host.burn(_gpu_job(host.endpoint()))
        assert out.error is not None
        assert out.error.startswith("stopping a leftover burn-in: gpu-07: `mkdir -p")
        assert f"printed more than {burnin_host.MAX_COMMAND_BYTES} bytes" in out.error
        assert got[0] < 2 * burnin_host.MAX_COMMAND_BYTES + SLACK  # measured 17 MiB

    with host:
        run_alone(scenario)


def test_burnin_dcgmi_report_without_end_is_refused_unread() -> None:
    from fleetctl.burnin import host as burnin_host

    # rules in order: dcgmi's session (`mkdir -p ... setsid ... dcgmi diag`) before the catch-all (the cleanup)
    host = Host({"dcgmi": flood(b'{"DCGM Diagnostic": {"test_categories": [\n'), "nvidia-smi": text(CSV), "dmesg": text(b""),
                 "": text(b"")})  # fmt: skip

    async def scenario() -> None:
        with peak() as got:
            out = await burnin_host.burn(_gpu_job(host.endpoint(), dcgm_level=1))
        assert out.error == (f"gpu-07: `dcgmi diag -r 1 -j`: printed more than {nvidia.DCGM_JSON_BYTES} bytes, "
                             "more than any real report; stopped, not read")  # fmt: skip
        assert got[0] < 4 * nvidia.DCGM_JSON_BYTES + SLACK  # lines kept as str objects: measured 10.6 MiB

    with host:
        run_alone(scenario)


def test_burnin_workload_output_keeps_its_head_and_tail_only() -> None:
    from fleetctl.burnin import host as burnin_host

    progress = b"50.0%  proc'd: 1000 (10000 Gflop/s)   errors: 0   temps: 60 C \r"

    async def gpu_burn(process: Any) -> None:
        process.stdout.write(b"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)\n")
        sent = 0
        chunk = progress * 1000
        while sent < 16 * MiB:  # 16 MiB of progress lines: 13x what is kept
            process.stdout.write(chunk)
            await process.stdout.drain()
            sent += len(chunk)
        process.stdout.write(b"\nTested 1 GPUs:\n\tGPU 0: OK\n")
        process.exit(0)

    host = Host({"gpu-burn": gpu_burn, "nvidia-smi": text(CSV), "dmesg": text(b""), "": text(b"")})

    async def scenario() -> None:
        job = _gpu_job(host.endpoint())
        job.seconds, job.grace = 600.0, 60.0
        with peak() as got:
            out = await burnin_host.burn(job)
        assert out.error is None, out.error
        (o,) = out.observations
        assert (o.workload_ok, o.throughput, o.hung) == (True, 10000.0, False)
        kept = nvidia.WORKLOAD_HEAD_BYTES + nvidia.WORKLOAD_TAIL_BYTES
        # the lines kept (str objects: ~60 bytes each beyond their text), their join, the parser's split of it;
        # keeping all of it took over 45 MB here
        assert got[0] < 8 * kept + SLACK  # measured 6 MiB

    with host:
        run_alone(scenario)


def test_provisioning_probe_reads_within_bounds() -> None:
    from fleetctl.workflows.provision import context

    host = Host({"true": flood(b"y\n")})

    async def scenario() -> None:
        with peak() as got:
            why = await context.ssh_ready(host.endpoint(), timeout=30)
        assert why == f"127.0.0.1:{host.port}: `true`: printed more than {context.PROBE_MAX_BYTES} bytes, " \
                      "more than any real output; stopped, not read"  # fmt: skip
        assert got[0] < 2 * context.PROBE_MAX_BYTES + SLACK  # measured 1.1 MiB

    with host:
        run_alone(scenario)


def test_burnin_telemetry_keeps_a_bounded_sample_of_the_whole_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accel, "MAX_SAMPLES_PER_BOARD", 100)
    sampler = accel.Sampler(time.monotonic())
    for i in range(10_000):
        sampler.add("GPU 0", n=i)
    kept = [s["n"] for s in sampler.samples["GPU 0"]]
    assert len(kept) <= 100
    assert kept[0] == 0 and kept[-1] == 9_999 and kept == sorted(kept)  # thinned over the whole run, in order


# ------------------------------------------------------------------ the runner's batch: several commands, one round trip


def test_batch_frames_each_command_with_its_own_status_whatever_it_prints() -> None:
    import subprocess

    commands = {"list": "printf 'a\\nb\\n'; false", "fake": "echo '@@0000 fake rc 0'; echo kept", "empty": "true",
                "tail": "printf 'no newline'"}  # fmt: skip
    script, token = hostio.batch_script(commands)
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    got = hostio.parse_batch(out, token)
    assert got["list"] == BatchPart("a\nb\n", 1)
    assert got["fake"] == BatchPart("@@0000 fake rc 0\nkept\n", 0)  # another batch's marker is output, not a frame
    assert got["empty"] == BatchPart("", 0)
    assert got["tail"] == BatchPart("no newline", 0)  # a last line without its newline is not lost in the end marker
    with pytest.raises(ValueError, match="identifier"):
        hostio.batch_script({"not a name": "true"})


def test_host_target_from_the_inventory_checks_keys_strictly_only_with_the_sites_known_hosts() -> None:
    from fleetctl.targets import host_target

    t = host_target("mn-01", {"ansible_host": "10.0.0.5", "ansible_port": "2222"}, {"ssh_user": "fleet", "ssh_key": "/k"})
    assert (t.address, t.port, t.user, t.key_file, t.strict) == ("10.0.0.5", 2222, "fleet", "/k", False)
    assert t.known_hosts is not None and t.known_hosts.endswith("known_hosts")
    strict = host_target("mn-01", {}, {"ssh_user": "fleet", "known_hosts": "/etc/ssh/site_known_hosts"})
    assert (strict.address, strict.port, strict.known_hosts, strict.strict) == ("mn-01", 22, "/etc/ssh/site_known_hosts", True)
    assert host_target("mn-01", {}, None).user == "root"  # a site without provisioning settings: the default user
