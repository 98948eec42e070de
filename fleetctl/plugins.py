"""Driver registries, one per kind of driver, filled from entry points.

Third parties ship a driver by declaring an entry point in one of these
groups; fleetctl never needs to know their module names. Names are sorted and
a name registered twice is refused rather than silently shadowed.

Every target names its driver (``BMCTarget.driver``, ``SwitchTarget.driver``,
``SnmpTarget.driver``). The core never loads a driver by a name of its own: a
fleet operation goes through :func:`sweep` (or :func:`sweep_async`), which
groups the targets by driver, runs each group through its driver class's
``sweep`` and gives the results back in the targets' order. A batch that
opens BMCs one at a time shares their connections through
:class:`FleetSessions`.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from functools import cache
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from fleetctl.errors import FleetError

GROUPS = {
    "bmc": "fleetctl.bmc",
    "switch": "fleetctl.switch",
    "snmp": "fleetctl.snmp",
    "accel": "fleetctl.accel",
    "k8s": "fleetctl.k8s",  # Kubernetes cluster clients (fleetctl.interfaces.k8s.ClusterClient)
}

T = TypeVar("T")


@cache
def _entry_points(kind: str) -> dict[str, Any]:
    group = GROUPS[kind]
    found: dict[str, Any] = {}
    for ep in entry_points(group=group):
        if ep.name in found and found[ep.name].value != ep.value:
            raise FleetError(f"driver {ep.name!r} is registered twice in {group}: {found[ep.name].value} and {ep.value}")
        found[ep.name] = ep
    return dict(sorted(found.items()))


def driver_names(kind: str) -> list[str]:
    """The names of the drivers of one kind, sorted."""
    return list(_entry_points(kind))


def load_driver(kind: str, name: str) -> Any:
    """The class registered as ``name`` for ``kind``."""
    eps = _entry_points(kind)
    if name not in eps:
        known = ", ".join(eps) or "none"
        raise FleetError(f"no {kind} driver named {name!r} (installed: {known})", exit_code=2)
    return eps[name].load()


def driver_for(kind: str, target: Any) -> Any:
    """The driver class of one target: the one its ``driver`` names in ``kind``."""
    return load_driver(kind, target.driver)


def drivers_for(kind: str, targets: Iterable[T]) -> dict[Any, list[T]]:
    """The targets grouped by driver: ``{driver class: [target, ...]}``.

    Groups come in the order of their first target and keep the targets'
    order. Every driver is loaded before anything is done, so a driver that is
    not installed stops the operation before it touches a device.

    Raises:
        FleetError: (exit 2) a target names a driver that is not installed;
            the message names the targets.
    """
    items = list(targets)
    return {cls: [items[i] for i in idx] for cls, idx in _groups(kind, items)}


def _groups(kind: str, targets: Sequence[Any]) -> list[tuple[Any, list[int]]]:
    """[(driver class, [index in targets, ...])], in order of first appearance."""
    classes: dict[str, Any] = {}
    groups: dict[Any, list[int]] = {}
    for i, t in enumerate(targets):
        if t.driver not in classes:
            try:
                classes[t.driver] = load_driver(kind, t.driver)
            except FleetError as e:
                names = ", ".join(dict.fromkeys(x.name for x in targets if x.driver == t.driver))
                raise FleetError(f"{names}: {e}", exit_code=e.exit_code) from e
        groups.setdefault(classes[t.driver], []).append(i)
    return list(groups.items())


def sweep(kind: str, targets: Iterable[Any], *args: Any, progress: Any = None, **kwargs: Any) -> list[Any]:
    """Run a sweep over targets of mixed drivers, for callers without an event loop.

    Each driver's targets go through that driver class's ``sweep(targets,
    *args, progress=..., **kwargs)``: for BMCs ``(operation, concurrency=,
    per_target_timeout=, ...)``, for switches ``(operation, concurrency=)``,
    for SNMP ``(what=, concurrency=, previous=)``. The results, one per
    target, come back in the order of ``targets`` (a target given twice gets
    two results).

    Drivers whose ``sweep`` is a coroutine (BMC, SNMP) run in one event loop
    made here; synchronous ones (switches) run in the calling thread, one
    thread per driver when there are several. The ``concurrency`` bound
    applies to each driver's group. ``progress(done, total, result)`` counts
    over all the targets, one call at a time.

    Raises:
        FleetError: a target names a driver that is not installed (before any work).
    """
    targets = list(targets)
    if not targets:
        return []
    groups = _groups(kind, targets)
    if any(_is_async(cls) for cls, _ in groups):
        return asyncio.run(_sweep_groups(targets, groups, args, progress, kwargs, None))
    if len(groups) == 1:
        return groups[0][0].sweep(targets, *args, progress=progress, **kwargs)
    report = _merged_progress(progress, len(targets))
    with ThreadPoolExecutor(max_workers=len(groups), thread_name_prefix=f"{kind}-sweep") as pool:
        futures = [pool.submit(cls.sweep, [targets[i] for i in idx], *args, progress=report, **kwargs) for cls, idx in groups]
        return _merge(targets, groups, [f.result() for f in futures])


async def sweep_async(
    kind: str,
    targets: Iterable[Any],
    *args: Any,
    progress: Any = None,
    fleets: FleetSessions | None = None,
    **kwargs: Any,
) -> list[Any]:
    """:func:`sweep` inside a running event loop.

    A synchronous driver's sweep runs in a worker thread. ``fleets`` (BMCs
    only) gives each driver's group the session that driver shares for the
    batch (``fleet=`` of its ``sweep``); without it each sweep opens its own.
    """
    targets = list(targets)
    if not targets:
        return []
    return await _sweep_groups(targets, _groups(kind, targets), args, progress, kwargs, fleets)


class Stream(Generic[T]):
    """One driver's targets, made as its sweep takes them: never listed (the sweep's BMC targets, built from the store a
    chunk at a time with their expectations, so that what a sweep holds does not grow with the fleet).

    ``len`` is an upper bound (the servers the stream is cut from; one that cannot be reached is judged without a
    target); iterate it once. The driver's ``sweep`` takes it as it takes a list (:meth:`BMC.sweep`).
    """

    def __init__(self, driver: str, total: int, items: Iterator[T], names: Sequence[str] = ()) -> None:
        self.driver = driver
        self.total = total
        self.items = items
        self.names = names  # for the message that names the targets of a driver that is not installed

    def __len__(self) -> int:
        return self.total

    def __iter__(self) -> Iterator[T]:
        return self.items


async def sweep_streams(kind: str, streams: Sequence[Stream[Any]], *args: Any, progress: Any = None,
                        fleets: FleetSessions | None = None, **kwargs: Any) -> None:  # fmt: skip
    """:func:`sweep_async` over streams, one per driver (each through its driver class's ``sweep``, at once, the
    ``concurrency`` bound for each), for a caller that takes every result through ``progress``: none is given back.
    Each stream is taken in this event loop: its driver's ``sweep`` must be a coroutine (a BMC driver's is).

    Raises:
        FleetError: (exit 2) a stream names a driver that is not installed, or one whose ``sweep`` is not a
            coroutine, before any stream is taken.
    """
    classes = []
    for s in streams:
        names = ", ".join(list(s.names[:5]) + (["..."] if len(s.names) > 5 else []))
        try:
            cls = load_driver(kind, s.driver)
        except FleetError as e:
            raise FleetError(f"{names}: {e}" if names else str(e), exit_code=e.exit_code) from e
        if not _is_async(cls):
            raise FleetError(f"{names or s.driver}: {kind} driver {s.driver!r} cannot take a stream (its sweep is not a coroutine)",
                             exit_code=2)  # fmt: skip
        classes.append(cls)
    report = progress if len(streams) == 1 else _merged_progress(progress, sum(len(s) for s in streams))

    async def one(cls: Any, stream: Stream[Any]) -> None:
        if not len(stream):
            return
        extra = {"fleet": await fleets.session(cls)} if fleets is not None else {}
        await cls.sweep(stream, *args, progress=report, **kwargs, **extra)

    await asyncio.gather(*(one(cls, s) for cls, s in zip(classes, streams, strict=True)))


def _is_async(cls: Any) -> bool:
    return inspect.iscoroutinefunction(cls.sweep)


async def _sweep_groups(
    targets: list[Any],
    groups: list[tuple[Any, list[int]]],
    args: tuple[Any, ...],
    progress: Any,
    kwargs: dict[str, Any],
    fleets: FleetSessions | None,
) -> list[Any]:
    report = progress if len(groups) == 1 else _merged_progress(progress, len(targets))

    async def one(cls: Any, idx: list[int]) -> list[Any]:
        mine = targets if len(groups) == 1 else [targets[i] for i in idx]
        extra = {"fleet": await fleets.session(cls)} if fleets is not None else {}
        if _is_async(cls):
            return await cls.sweep(mine, *args, progress=report, **kwargs, **extra)
        return await asyncio.to_thread(cls.sweep, mine, *args, progress=report, **kwargs, **extra)

    return _merge(targets, groups, await asyncio.gather(*(one(cls, idx) for cls, idx in groups)))


def _merged_progress(progress: Any, total: int) -> Any:
    """``progress`` counting over every group's targets, one call at a time."""
    if progress is None:
        return None
    lock = threading.Lock()
    done = 0

    def report(_done: int, _total: int, result: Any) -> Any:
        nonlocal done
        with lock:
            done += 1
            return progress(done, total, result)

    return report


def _merge(targets: list[Any], groups: list[tuple[Any, list[int]]], results: list[list[Any]]) -> list[Any]:
    out: list[Any] = [None] * len(targets)
    for (cls, idx), got in zip(groups, results, strict=True):
        if len(got) != len(idx):
            raise FleetError(f"driver {cls.__name__} returned {len(got)} results for {len(idx)} targets")
        for i, r in zip(idx, got, strict=True):
            out[i] = r
    return out


class FleetSessions:
    """What the BMCs of one batch share: one session per BMC driver, opened on first use.

    ``BMC.fleet_session()`` of each driver the batch meets is entered once and
    left when the batch ends::

        async with FleetSessions() as fleets:
            async with fleets.connect(target, task_poll_interval=1.0) as bmc:
                await bmc.power.on()
            results = await sweep_async("bmc", targets, op, fleets=fleets)
    """

    def __init__(self) -> None:
        self._stack = AsyncExitStack()
        self._open: dict[Any, Any] = {}
        self._lock: asyncio.Lock | None = None

    async def __aenter__(self) -> FleetSessions:
        self._lock = asyncio.Lock()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._open.clear()
        await self._stack.aclose()

    async def session(self, driver_cls: Any) -> Any:
        """The session ``driver_cls`` shares in this batch (``fleet=`` of its constructor and sweep)."""
        if driver_cls not in self._open:
            assert self._lock is not None, "FleetSessions used outside `async with`"
            async with self._lock:
                if driver_cls not in self._open:
                    self._open[driver_cls] = await self._stack.enter_async_context(driver_cls.fleet_session())
        return self._open[driver_cls]

    @asynccontextmanager
    async def connect(self, target: Any, **options: Any) -> AsyncIterator[Any]:
        """One BMC, opened with its driver and that driver's shared session; closed on leaving.

        ``options`` are the driver's own (for Redfish ``task_poll_interval``).
        """
        cls = driver_for("bmc", target)
        async with cls(target, fleet=await self.session(cls), **options) as bmc:
            yield bmc


def accel_driver(board_kind: str) -> Any:
    """The accelerator driver (an :class:`~fleetctl.interfaces.accel.AccelDriver`) of a board kind.

    Accelerator drivers register one entry point per board kind they serve in
    ``fleetctl.accel`` (``mncore2``, ``gpu``); a kind no driver serves gets a
    :class:`~fleetctl.interfaces.accel.NoopAccel`, whose every use says so
    (the server's error, never the run's end).
    """
    from fleetctl.interfaces.accel import NoopAccel

    if board_kind not in _entry_points("accel"):
        return NoopAccel(board_kind)
    return load_driver("accel", board_kind)()
