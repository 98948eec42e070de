"""Bounded reads of what a host prints over SSH (asyncssh), for every reader of a host's output.

A host's OS is a device like a BMC: what it prints is not ours to trust. A
broken tool, a kernel log flooded with one message, or a hostile host can
print without end, and ``conn.run()`` keeps all of it in memory. Every read
here has three bounds:

- bytes kept: stdout beyond ``max_bytes`` stops the command (its channel is
  closed, so the remote side gets SIGPIPE or a hangup) and raises
  :class:`HostOutputError` naming the host and the command; stderr is kept up
  to ``max_stderr`` bytes and the rest is counted, not kept (it is read only
  for a message);
- line length, for streamed output: a line longer than ``max_line`` is cut
  (a host printing without a newline cannot grow one line without end);
- time: a deadline for the whole command, output included; past it the
  command is stopped and :class:`HostOutputError` raised (``timed_out``).

Output is handed on as each packet arrives (never left in asyncssh's
buffers, whose flow control does not bound them: see :func:`_session_type`),
so memory is bounded by the caps plus a packet whatever the host sends.
Output is read as bytes and decoded with replacement, so bytes that are not
UTF-8 cannot stop a read with a decoding error.

The one runner of host commands: :func:`connect` opens a
:class:`~fleetctl.interfaces.host.HostTarget` and gives a :class:`Session`
(``run``, ``stream``, ``batch``: several commands in one round trip);
:func:`each` runs one coroutine per host with bounded concurrency. Every
reader of a host (provisioning's probe, burn-in, the sweep's host level, the
accelerator drivers through the session they are given) goes through them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import secrets
import shlex
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from fleetctl.errors import DriverError
from fleetctl.interfaces.host import BatchPart, HostTarget

T = TypeVar("T")
R = TypeVar("R")

#: Bytes of stdout kept from one command unless the caller says otherwise. The largest real outputs fleetctl reads
#: (a server's kernel log, ``nvidia-smi -q -x`` of 8 GPUs) are around 1 MB; a command that prints more than 16 times
#: that is stopped.
MAX_OUTPUT_BYTES = 16 << 20
#: Bytes of stderr kept from one command (only its last line is ever shown).
MAX_STDERR_BYTES = 64 << 10
#: Longest line a streamed read hands on; the rest of a longer line is dropped.
MAX_LINE_BYTES = 64 << 10
_CHUNK = 64 << 10
_EOL = re.compile(rb"\r\n|\r|\n")


class HostOutputError(DriverError):
    """A host's command printed more than its bound, or did not end by its deadline; it was stopped.

    ``host`` and ``command`` name where; ``timed_out`` tells the deadline from the byte bound.
    """

    def __init__(self, message: str, *, host: str, command: str, timed_out: bool = False) -> None:
        self.host = host
        self.command = command
        self.timed_out = timed_out
        super().__init__(f"{host}: `{_short(command)}`: {message}")


def _short(command: str, limit: int = 120) -> str:
    return command if len(command) <= limit else command[: limit - 3] + "..."


@dataclass(frozen=True)
class Output:
    """What one command printed (decoded), its exit status (None when the host sent none) and stderr bytes dropped."""

    stdout: str
    stderr: str
    exit_status: int | None
    stderr_dropped: int = 0

    def last_error_line(self, limit: int = 200) -> str:
        """The last non-blank line of stderr, else of stdout ('' when none): what a failed command said."""
        lines = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return lines[-1][:limit] if lines else ""


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


OnData = Callable[[bytes, str], None]


@functools.cache
def _session_type() -> type:
    """An asyncssh client session that hands each packet of data on as it arrives and keeps none of it itself.

    asyncssh's own readers (``conn.run``, ``create_process``) buffer what the
    host sends until it is read, and their flow control does not bound that
    buffer: with asyncssh 2.24 a reader slower than the host let the
    channel's buffer grow to 47 MB in half a second here (a paused channel
    still sends a full window adjust each time it delivers one buffered
    packet). Handing data on in ``data_received`` keeps nothing unread: the
    connection reads the socket no faster than the sink takes the data.
    """
    import asyncssh

    class _Session(asyncssh.SSHClientSession[bytes]):
        def __init__(self, on_data: OnData) -> None:
            self.on_data = on_data
            self.chan: Any = None
            self.closed = asyncio.Event()
            self.error: BaseException | None = None

        def connection_made(self, chan: Any) -> None:
            self.chan = chan

        def data_received(self, data: bytes, datatype: Any) -> None:
            if self.error is not None:
                return
            try:
                self.on_data(data, "stderr" if datatype == asyncssh.EXTENDED_DATA_STDERR else "stdout")
            except Exception as e:  # noqa: BLE001 - the sink has kept all it may: stop the command, the caller gets e
                self.error = e
                self.chan.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self.closed.set()

    return _Session


async def _execute(conn: Any, command: str, *, on_data: OnData, deadline: float) -> tuple[int | None, bool]:
    """Run ``command``, handing its output to ``on_data`` until it ends or ``deadline`` passes: (exit status, timed out).

    An exception ``on_data`` raises stops the command and is raised here.
    """
    session_type = _session_type()
    left = max(0.1, deadline - time.monotonic())
    chan, session = await asyncio.wait_for(conn.create_session(lambda: session_type(on_data), command, encoding=None), left)
    try:
        await asyncio.wait_for(session.closed.wait(), max(0.1, deadline - time.monotonic()))
    except TimeoutError:
        await _stop(chan, session)
        return None, True
    except BaseException:  # cancelled: the command is stopped too
        await _stop(chan, session)
        raise
    if session.error is not None:
        raise session.error
    return chan.get_exit_status(), False


async def _stop(chan: Any, session: Any) -> None:
    """Close the command's channel (the host's side gets a hangup or SIGPIPE) and wait a moment for the close."""
    chan.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(session.closed.wait(), 2.0)


async def run(conn: Any, command: str, *, host: str, timeout: float, max_bytes: int = MAX_OUTPUT_BYTES,
              max_stderr: int = MAX_STDERR_BYTES) -> Output:  # fmt: skip
    """Run ``command`` on ``conn`` (an asyncssh connection) and return what it printed, within bounds.

    Args:
        conn: an open ``asyncssh.SSHClientConnection``.
        command: the shell command line.
        host: how the host is named in errors (the server's name, or its address).
        timeout: seconds for the whole command, its output included.
        max_bytes: the most stdout kept; more stops the command.
        max_stderr: the most stderr kept; the rest is counted in ``stderr_dropped``.

    Raises:
        HostOutputError: stdout went past ``max_bytes``, or the command did not end within ``timeout``.
        asyncssh.Error, OSError: the connection broke (the caller's to report).
    """
    out: list[bytes] = []  # packets, joined once at the end (a growing buffer would copy itself as it grows)
    size = 0
    err = bytearray()
    dropped = 0

    def on_data(data: bytes, stream: str) -> None:
        nonlocal dropped, size
        if stream == "stdout":
            if size + len(data) > max_bytes:
                raise HostOutputError(f"printed more than {max_bytes} bytes, more than any real output; stopped, not read",
                                      host=host, command=command)  # fmt: skip
            out.append(data)
            size += len(data)
        else:
            room = max(0, max_stderr - len(err))
            err.extend(data[:room])
            dropped += max(0, len(data) - room)

    status, timed_out = await _execute(conn, command, on_data=on_data, deadline=time.monotonic() + timeout)
    if timed_out:
        raise HostOutputError(f"did not end within {timeout:g} s; stopped", host=host, command=command, timed_out=True)
    return Output(stdout=_decode(b"".join(out)), stderr=_decode(bytes(err)), exit_status=status, stderr_dropped=dropped)


class _Lines:
    """Splits one stream's bytes into lines of at most ``max_line`` bytes (the rest of a longer line is dropped)."""

    def __init__(self, name: str, on_line: Callable[[str, str], None], max_line: int) -> None:
        self.name = name
        self.on_line = on_line
        self.max_line = max_line
        self.buf = bytearray()
        self.cut = False  # the current line passed max_line: the rest of it is dropped

    def feed(self, data: bytes) -> None:
        *ended, rest = _EOL.split(data)  # a \r\n split across two packets gives an empty line: callers skip those
        for piece in ended:
            if not self.cut:
                self.buf.extend(piece[: max(0, self.max_line - len(self.buf))])
            line = _decode(bytes(self.buf))
            self.buf.clear()
            self.cut = False
            self.on_line(self.name, line)
        if not self.cut:
            room = max(0, self.max_line - len(self.buf))
            self.buf.extend(rest[:room])
            self.cut = len(rest) > room

    def flush(self) -> None:
        if self.buf:
            line = _decode(bytes(self.buf))
            self.buf.clear()
            self.on_line(self.name, line)


async def stream(conn: Any, command: str, *, deadline: float, on_line: Callable[[str, str], None],
                 max_line: int = MAX_LINE_BYTES) -> tuple[int | None, bool]:  # fmt: skip
    """Run ``command``, handing each stdout/stderr line to ``on_line(stream, line)`` as it comes.

    For long-running commands (a workload, a diagnostic) whose output is
    consumed line by line: the caller decides what it keeps (see
    :class:`KeptLines`); here a line is at most ``max_line`` bytes (the rest
    of a longer line is dropped) and the command is stopped at ``deadline``
    (``time.monotonic()``). Lines end at ``\\n``, ``\\r\\n`` or ``\\r``
    (gpu-burn rewrites its progress line with ``\\r``). ``on_line`` may raise
    to stop reading (it has kept all it may): the command is stopped and the
    exception goes on to the caller.

    Returns:
        (exit status, timed out): the status is None when it timed out or the host sent none.
    """
    splitters = {name: _Lines(name, on_line, max_line) for name in ("stdout", "stderr")}
    status, timed_out = await _execute(conn, command, on_data=lambda data, name: splitters[name].feed(data), deadline=deadline)
    if not timed_out:
        for sp in splitters.values():
            sp.flush()
    return status, timed_out


class KeptLines:
    """Lines kept within a byte budget: the first ``head`` bytes of lines and the last ``tail`` bytes; the middle is counted.

    For a long run's output whose beginning (names, a header) and end (the
    verdict) matter, e.g. gpu-burn's; with ``tail=0`` it keeps the beginning
    only and ``overflowed`` says that something was dropped (a JSON document
    then cannot be read whole: the caller reports it).
    """

    def __init__(self, head: int, tail: int = 0) -> None:
        self.head_budget = head
        self.tail_budget = tail
        self._head: list[str] = []
        self._head_bytes = 0
        self._tail: deque[str] = deque()
        self._tail_bytes = 0
        self.dropped_lines = 0
        self.dropped_bytes = 0

    def add(self, line: str) -> None:
        """Keep ``line`` if the budget allows (its size counted as UTF-8 bytes, plus one for its end)."""
        size = len(line.encode("utf-8", errors="replace")) + 1
        if not self._tail and self._head_bytes + size <= self.head_budget:
            self._head.append(line)
            self._head_bytes += size
            return
        if size > self.tail_budget:
            self._drop(size)
            return
        self._tail.append(line)
        self._tail_bytes += size
        while self._tail_bytes > self.tail_budget:
            old = self._tail.popleft()
            old_size = len(old.encode("utf-8", errors="replace")) + 1
            self._tail_bytes -= old_size
            self._drop(old_size)

    def _drop(self, size: int) -> None:
        self.dropped_lines += 1
        self.dropped_bytes += size

    @property
    def overflowed(self) -> bool:
        """Some line was dropped."""
        return self.dropped_lines > 0

    @property
    def kept_bytes(self) -> int:
        return self._head_bytes + self._tail_bytes

    def lines(self) -> list[str]:
        """The kept lines in order (the head, then the tail)."""
        return [*self._head, *self._tail]

    def text(self) -> str:
        return "\n".join(self.lines())


# --- the runner: one SSH connection per host, every read above bounded ----------------------------------------------


class HostUnreachable(DriverError):
    """No SSH session could be opened to a host; the message names the endpoint and why."""


class Session:
    """One open SSH connection to ``target`` (:func:`connect`); the reads of this module, bound to it.

    Errors are named after ``target.name``. A broken connection raises
    asyncssh's error or OSError (the caller reports it for the host).
    """

    def __init__(self, conn: Any, target: HostTarget) -> None:
        self.conn = conn
        self.target = target

    async def run(self, command: str, *, timeout: float, max_bytes: int = MAX_OUTPUT_BYTES,
                  max_stderr: int = MAX_STDERR_BYTES) -> Output:  # fmt: skip
        """:func:`run` on this host."""
        return await run(self.conn, command, host=self.target.name, timeout=timeout, max_bytes=max_bytes, max_stderr=max_stderr)

    async def stream(self, command: str, *, deadline: float, on_line: Callable[[str, str], None],
                     max_line: int = MAX_LINE_BYTES) -> tuple[int | None, bool]:  # fmt: skip
        """:func:`stream` on this host."""
        return await stream(self.conn, command, deadline=deadline, on_line=on_line, max_line=max_line)

    async def batch(self, commands: Mapping[str, str], *, timeout: float, max_bytes: int = MAX_OUTPUT_BYTES) -> dict[str, BatchPart]:
        """Several shell commands in one round trip: one process on the host, one SSH channel.

        Each command runs in turn in the same shell (``{ command; }``), its
        stdout framed by markers of a token made for this batch, so a
        command's own output cannot end its part. The whole batch's stdout is
        bounded by ``max_bytes`` and its time by ``timeout``, as one command.
        A command's exit status is its own; the batch's is ignored. A part
        whose markers are missing (the shell died) is absent from the result.

        Raises:
            HostOutputError: the batch printed more than ``max_bytes`` or did not end within ``timeout``.
        """
        script, token = batch_script(commands)
        done = await self.run(script, timeout=timeout, max_bytes=max_bytes)
        return parse_batch(done.stdout, token)


def batch_script(commands: Mapping[str, str]) -> tuple[str, str]:
    """The shell script of a batch, and its marker token (see :meth:`Session.batch`)."""
    token = secrets.token_hex(6)
    parts = []
    for name in commands:
        if not name.isidentifier():
            raise ValueError(f"a batch part's name must be an identifier, not {name!r}")
        # the end marker starts on a line of its own: a last line printed without a newline stays the command's
        parts.append(f"echo {shlex.quote(f'@@{token} {name}')}; {{ {commands[name]}\n}}; printf '\\n@@{token} {name} rc %s\\n' $?")
    return "\n".join(parts) + "\ntrue", token


def parse_batch(stdout: str, token: str) -> dict[str, BatchPart]:
    """The parts of a batch's stdout (:func:`batch_script`), by name."""
    out: dict[str, BatchPart] = {}
    pos = 0
    head = re.compile(rf"^@@{token} (\w+)\n", re.M)
    while (m := head.search(stdout, pos)) is not None:
        name = m.group(1)
        end = re.compile(rf"\n@@{token} {name} rc (\d*)\n").search(stdout, m.end())
        if end is None:  # the shell died within this part
            break
        out[name] = BatchPart(stdout[m.end() : end.start()], int(end.group(1)) if end.group(1) else None)
        pos = end.end()
    return out


@asynccontextmanager
async def connect(target: HostTarget, *, timeout: float) -> AsyncIterator[Session]:
    """An SSH session to ``target``, closed on leaving; the connection (TCP, SSH, login) within ``timeout`` seconds.

    No agent is asked (only the site's key); the host key is checked against
    ``target.known_hosts`` when ``target.strict``.

    Raises:
        HostUnreachable: ``ssh USER@ADDRESS:PORT: why`` (refused, timed out, the key refused, a host key mismatch).
    """
    import asyncssh

    keys = [target.key_file] if target.key_file else None
    kh = target.known_hosts if target.strict else None
    try:
        conn = await asyncio.wait_for(asyncssh.connect(target.address, port=target.port, username=target.user, client_keys=keys,
                                                       known_hosts=kh, agent_path=None, connect_timeout=timeout), timeout)  # fmt: skip
    except (TimeoutError, OSError, asyncssh.Error) as e:
        raise HostUnreachable(f"ssh {target.where}: {e or type(e).__name__}") from e
    async with conn:
        yield Session(conn, target)


async def each(items: Iterable[T], fn: Callable[[T], Awaitable[R]], *, concurrency: int) -> list[R]:
    """``fn(item)`` for every item, at most ``concurrency`` at once; the results in the items' order."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(item: T) -> R:
        async with gate:
            return await fn(item)

    return list(await asyncio.gather(*(one(i) for i in items)))


# --- a command in a session of its own, so that a hung one is killed whole ------------------------------------------


def stop_leftover_script(work: str) -> str:
    """Kill the session a previous run left running (its id in ``<work>/pgid``), then forget it; prints ``stopped PGID``."""
    d = shlex.quote(work)
    return (f"mkdir -p {d} && if [ -f {d}/pgid ]; then p=$(cat {d}/pgid); "
            f'if [ -n "$p" ] && env kill -0 -- -"$p" 2>/dev/null; then env kill -KILL -- -"$p" 2>/dev/null; echo "stopped $p"; fi; '
            f"rm -f {d}/pgid; fi; true")  # fmt: skip


def session_script(work: str, body: str) -> str:
    """``body`` in a new session whose id is written to ``<work>/pgid`` (removed when it ends)."""
    d = shlex.quote(work)
    inner = f"echo $$ > {d}/pgid; {body}; rc=$?; rm -f {d}/pgid; exit $rc"
    return f"mkdir -p {d} && exec setsid -w sh -c {shlex.quote(inner)}"
