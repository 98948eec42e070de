"""This host's processes, as the recovery code asks about them: is a pid alive, and which process is it.

A dead run's leftovers (its locks, its Ansible, its BMC sessions) are judged by
the pid it recorded. A pid is reused once its process is gone, so where it
matters the process's start time (``/proc/PID/stat``, Linux) says whether the
pid is still the same process.
"""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (another user's counts: it cannot be judged gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def stat_fields(stat: str) -> list[str]:
    """The fields of a ``/proc/PID/stat`` line after ``pid (comm)``: index 0 is field 3 of stat(5), the state.

    The command name may hold spaces and parentheses: the fields start after its last ``)``.
    """
    return stat[stat.rfind(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22), None where it cannot be read."""
    try:
        fields = stat_fields(Path(f"/proc/{pid}/stat").read_text())
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None
