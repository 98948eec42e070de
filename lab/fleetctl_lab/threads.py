"""Run a lab (anything with ``async start()`` / ``async stop()``) on its own thread.

Tests drive the lab from their own thread while it serves on an event loop of
its own; calls into it go through :meth:`LoopProxy.call`, on the lab's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from fleetctl.errors import FleetError


class LoopProxy:
    """Base of the thread-safe handles the tests get."""

    def __init__(self, lab: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.lab = lab
        self.loop = loop

    @property
    def control_url(self) -> str:
        return self.lab.control_url

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on the lab's loop and return its result."""

        async def run() -> Any:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def status(self) -> dict[str, Any]:
        return self.call(self.lab.status)


@contextlib.contextmanager
def serve_in_thread(lab: Any, *, name: str, timeout: float = 120.0) -> Iterator[asyncio.AbstractEventLoop]:
    """Start ``lab`` on a new loop in a daemon thread; stop it when the block ends."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    failure: list[BaseException] = []

    def main() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(lab.start())
        except BaseException as e:  # noqa: BLE001 - reported to the caller's thread
            failure.append(e)
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(lab.stop())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    thread = threading.Thread(target=main, name=name, daemon=True)
    thread.start()
    if not ready.wait(timeout):
        raise FleetError(f"{name} did not start within {timeout:.0f}s")
    if failure:
        raise failure[0]
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
