"""Run a test's measured part in a forked child, where nothing else of the test worker runs.

tracemalloc counts every thread of its process. A pytest-xdist worker keeps what earlier tests started
in threads (session and module fixtures: labs, fakenos and mockup servers, event loops), and whatever
they allocate while a test measures counts in its peak: a CI run measured 4.7 and 21 MB where the
readers alone take 0.9 and 6. A fork keeps only the thread that forks, so a peak taken in the child is
the measured code's own. Servers the test started before the fork still answer the child from the
parent's threads.
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def in_child(fn: Callable[[], T], *, timeout: float = 120.0) -> T:
    """``fn()`` in a forked child: its return value (pickled back), or its failure, with its traceback, failing the test."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)

    def main() -> None:
        try:
            out: tuple[bool, Any] = (True, fn())
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the test, as text
            out = (False, "".join(traceback.format_exception(e)))
        child.send(out)

    proc = ctx.Process(target=main, daemon=True)
    proc.start()
    try:
        if not parent.poll(timeout):
            pytest.fail(f"the measured part did not end within {timeout:g} s")
        ok, value = parent.recv()
    except EOFError:
        ok, value = False, f"the measured part's process ended without a word (exit code {proc.exitcode})"
    finally:
        proc.kill()
        proc.join(5)
    if not ok:
        pytest.fail(value, pytrace=False)
    return value  # type: ignore[no-any-return]
