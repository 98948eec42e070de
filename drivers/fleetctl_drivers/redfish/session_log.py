"""Which Redfish sessions this machine's fleetctl processes hold open, on disk, so a killed one's are closed.

A process killed with SIGKILL (or by the OOM killer, or a power cut) cannot log
out: its sessions stay open on the BMCs until they time out there (often 30
minutes or more), and a BMC has a handful of session slots (4 to 16). A
provisioning run killed and resumed a few times can fill a BMC, and the resumed
run is then refused a session on exactly the servers it was working.

Each process appends one line per session it opens and one per session it
closes to a file of its own (``<pid>-<start>.sessions`` in the user's data
folder, ``bmc-sessions/``; owner-only). The lines hold the session's URL, never
its token. Before a client logs in to a BMC, it looks for sessions on that BMC
left open by a process that is gone (its pid is free, or now another process's:
the start time says which) and deletes them, authenticated with HTTP Basic as
the Redfish specification requires every service to accept: no session slot is
needed to free one. A process that ends normally removes its file.

Sessions of processes on other machines (another Temporal worker) are not seen:
each machine cleans its own.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from pathlib import Path

from fleetctl.procs import pid_alive, start_ticks

log = logging.getLogger(__name__)

# A file older than this is dropped unread: every BMC has timed its sessions out long before.
MAX_AGE_S = 24 * 3600.0
# How often a long-lived process (a Temporal worker) looks again for processes killed since it last looked.
RESCAN_S = 10.0
SUFFIX = ".sessions"


def _gone(pid: int, start: int | None) -> bool:
    """Whether the process that wrote a file is gone (its pid free, or reused by a later process)."""
    if not pid_alive(pid):
        return True
    if start is None:
        return False
    now = start_ticks(pid)
    return now is not None and now != start


class SessionLog:
    """This process's record of open sessions, and the stale ones other (dead) processes left."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._pid = 0
        self._open = 0
        self._stale: dict[str, dict[Path, set[str]]] | None = None  # BMC base URL -> {dead file: session URLs}
        self._scanned_at = 0.0

    # ---------------------------------------------------------------- this process

    def opened(self, url: str) -> None:
        self._write(f"open {url}\n", +1)

    def closed(self, url: str) -> None:
        self._write(f"closed {url}\n", -1)

    def _write(self, line: str, delta: int) -> None:
        # A line is one write(2) on an O_APPEND file: whole in the file the moment it returns, a SIGKILL after
        # it loses nothing; no fsync (a power cut loses the BMC's sessions too, or they time out meanwhile).
        # The file is opened for each line, not held: a test process that changes its data folder per test
        # would otherwise hold a descriptor per folder.
        try:
            with self._lock:
                pid = os.getpid()
                if self._path is None or self._pid != pid:  # first line, or a forked child: a file of its own
                    self._pid, self._open = pid, 0
                    self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                    self._path = self.folder / f"{pid}-{start_ticks(pid) or 0}{SUFFIX}"
                    atexit.register(self.finish)
                fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, line.encode())
                finally:
                    os.close(fd)
                self._open += delta
        except OSError as e:  # a full or read-only disk must not stop the work: the BMC times the session out
            log.debug("session log %s: %s", self.folder, e)

    def finish(self) -> None:
        """At exit: the file goes if every session it lists was closed (parked ones that never were stay listed)."""
        with self._lock:
            if self._open <= 0 and self._path is not None and self._pid == os.getpid():
                with contextlib.suppress(OSError):
                    self._path.unlink()

    # ---------------------------------------------------------------- dead processes

    def stale(self, base: str) -> list[tuple[Path, str]]:
        """Sessions on the BMC at ``base`` that gone processes left open: (their file, the session URL)."""
        with self._lock:
            if self._stale is None or time.monotonic() - self._scanned_at > RESCAN_S:
                self._stale, self._scanned_at = self._scan(), time.monotonic()
            files = self._stale.get(base, {})
            return [(f, u) for f, urls in files.items() for u in sorted(urls)]

    def settled(self, file: Path, url: str) -> None:
        """A stale session is closed (or the BMC no longer has it): note it in its file, which goes once empty."""
        base = _base_of(url)
        with self._lock:
            files = (self._stale or {}).get(base, {})
            urls = files.get(file)
            if urls is None:
                return
            urls.discard(url)
            try:
                if not urls:
                    files.pop(file, None)
                    if not any(file in per_base for per_base in (self._stale or {}).values()):
                        file.unlink(missing_ok=True)
                        return
                fd = os.open(file, os.O_WRONLY | os.O_APPEND)
                try:
                    os.write(fd, f"closed {url}\n".encode())
                finally:
                    os.close(fd)
            except OSError as e:
                log.debug("session log %s: %s", file, e)

    def _scan(self) -> dict[str, dict[Path, set[str]]]:
        out: dict[str, dict[Path, set[str]]] = {}
        try:
            entries = list(self.folder.glob(f"*{SUFFIX}"))
        except OSError:
            return out
        now = time.time()
        for f in entries:
            if f == self._path:
                continue
            try:
                pid_s, start_s = f.name[: -len(SUFFIX)].split("-", 1)
                pid, start = int(pid_s), int(start_s)
                if now - f.stat().st_mtime > MAX_AGE_S:
                    f.unlink(missing_ok=True)
                    continue
                if not _gone(pid, start or None):
                    continue
                text = f.read_text(errors="replace")
            except (OSError, ValueError):
                continue
            still: set[str] = set()
            for line in text.splitlines():
                verb, _, url = line.partition(" ")
                if verb == "open":
                    still.add(url)
                elif verb == "closed":
                    still.discard(url)
            if not still:
                with contextlib.suppress(OSError):
                    f.unlink()
                continue
            for url in still:
                out.setdefault(_base_of(url), {}).setdefault(f, set()).add(url)
        return out


def _base_of(url: str) -> str:
    """``https://host:port`` of a session's URL."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


_logs: dict[Path, SessionLog] = {}
_logs_lock = threading.Lock()


# The log of the last environment asked for: (FLEETCTL_DATA_DIR, XDG_DATA_HOME, HOME) -> its log. A client asks
# three times per BMC (stale sessions, opened, closed), and data_dir() through platformdirs was 0.08 ms of CPU
# per BMC in a sweep (cProfile, issue 24); the variables it depends on are compared instead.
_last: tuple[tuple[str | None, str | None, str | None], SessionLog] | None = None


def session_log() -> SessionLog:
    """This process's log in ``FLEETCTL_DATA_DIR`` (or the user's data folder) ``/bmc-sessions``."""
    global _last
    from fleetctl.config import ENV_DATA, data_dir

    env = os.environ
    key = (env.get(ENV_DATA), env.get("XDG_DATA_HOME"), env.get("HOME"))
    last = _last
    if last is not None and last[0] == key:
        return last[1]
    folder = data_dir() / "bmc-sessions"
    with _logs_lock:
        found = _logs.get(folder)
        if found is None:
            found = _logs[folder] = SessionLog(folder)
        _last = (key, found)
        return found
