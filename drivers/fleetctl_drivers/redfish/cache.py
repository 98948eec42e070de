"""The documents a BMC gave an ETag for, kept on disk, so that the next sweep asks ``If-None-Match``.

A daily sweep of an unchanged inventory (firmware, PCIe devices, processors,
log services: most of what a sweep reads does not change from one day to the
next) should cost a 304 per resource, not a document. The BMC answers a GET
with an ``ETag``; the document and its ETag are kept here; the next read of
that URI sends ``If-None-Match`` with it, and a ``304 Not Modified`` is judged
on the kept document. The kept document is exactly the one the BMC sent (the
same JSON, parsed the same way): the verdicts are those of a full read.

Why a file of its own (SQLite in the user's data folder, ``redfish-cache.sqlite``)
rather than the store: it is a per-machine optimisation, never a record. Losing
it costs one full read per resource; the fleet's database (often PostgreSQL,
shared, backed up) should not carry megabytes of BMC documents that only this
machine's next sweep can use, and a Temporal worker on another machine keeps
its own. Bounded: past ``max_bytes`` the least recently used documents go.

What is never conditional (:meth:`RedfishClient.get`): a request with a query
(``$expand``: the Redfish specification gives an expanded answer no ETag of
its own, and a BMC that reuses the collection's would hide a changed member),
the service root (read before login), and any write. A BMC that sends no ETag
is asked as before; one that ignores ``If-None-Match`` answers 200, which
replaces what was kept. Only the sweep uses the cache (``read_once`` work).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

try:
    import orjson as _json

    def _dumps(obj: Any) -> bytes:
        return _json.dumps(obj)

    def _loads(data: bytes) -> Any:
        return _json.loads(data)

except ImportError:  # pragma: no cover - orjson is optional
    import json as _stdjson

    def _dumps(obj: Any) -> bytes:
        return _stdjson.dumps(obj).encode()

    def _loads(data: bytes) -> Any:
        return _stdjson.loads(data)


#: What the cache may hold on disk in all: a sweep of 10,000 BMCs keeps about 60 KB of documents each.
DEFAULT_MAX_BYTES = 1024 * 1024 * 1024


_SHARED: dict[str, ReadingCache] = {}
_SHARED_LOCK = threading.Lock()


def default_path() -> Path:
    """``redfish-cache.sqlite`` in the user's data folder (``FLEETCTL_DATA_DIR`` or XDG)."""
    from fleetctl.config import data_dir

    return data_dir() / "redfish-cache.sqlite"


class ReadingCache:
    """Documents by (BMC, URI) with their ETag, in one SQLite file; thread-safe, one writer at a time.

    The event loop never waits on it: a client loads its BMC's entries once (:meth:`load`) and saves what
    changed once, at its close (:meth:`save`), each in a thread.
    """

    def __init__(self, path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._size = 0

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS doc (bmc TEXT NOT NULL, uri TEXT NOT NULL, etag TEXT NOT NULL, "
                       "body BLOB NOT NULL, used REAL NOT NULL, PRIMARY KEY (bmc, uri))")  # fmt: skip
            db.execute("CREATE INDEX IF NOT EXISTS doc_used ON doc (used)")
            with contextlib.suppress(OSError):
                self.path.chmod(0o600)  # the BMCs' documents: serials, addresses
            self._size = db.execute("SELECT COALESCE(SUM(LENGTH(body)), 0) FROM doc").fetchone()[0]
            self._db = db
        return self._db

    def load_sync(self, bmc: str) -> dict[str, tuple[str, bytes]]:
        """{uri: (etag, document as JSON)} kept for this BMC."""
        with self._lock:
            rows = self._conn().execute("SELECT uri, etag, body FROM doc WHERE bmc = ?", (bmc,)).fetchall()
        return {uri: (etag, bytes(body)) for uri, etag, body in rows}

    def save_sync(self, bmc: str, fresh: dict[str, tuple[str, Any]], used: list[str]) -> None:
        """Keep ``fresh`` ({uri: (etag, parsed document)}) and mark ``used`` (answered 304) as used now."""
        now = time.time()
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                for uri, (etag, doc) in fresh.items():
                    body = _dumps(doc)
                    old = db.execute("SELECT LENGTH(body) FROM doc WHERE bmc = ? AND uri = ?", (bmc, uri)).fetchone()
                    self._size += len(body) - (old[0] if old else 0)
                    db.execute("INSERT OR REPLACE INTO doc (bmc, uri, etag, body, used) VALUES (?, ?, ?, ?, ?)",
                               (bmc, uri, etag, body, now))  # fmt: skip
                if used:
                    db.executemany("UPDATE doc SET used = ? WHERE bmc = ? AND uri = ?", [(now, bmc, u) for u in used])
                if self._size > self.max_bytes:
                    self._evict(db)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def _evict(self, db: sqlite3.Connection) -> None:
        """Drop the least recently used documents until the cache holds 90 % of its bound."""
        goal = int(self.max_bytes * 0.9)
        for bmc, uri, size in db.execute("SELECT bmc, uri, LENGTH(body) FROM doc ORDER BY used").fetchall():
            if self._size <= goal:
                break
            db.execute("DELETE FROM doc WHERE bmc = ? AND uri = ?", (bmc, uri))
            self._size -= size

    @classmethod
    def shared(cls, path: str | Path) -> ReadingCache:
        """The one cache of this process on ``path`` (a sweep's BMCs share it)."""
        key = str(Path(path).expanduser().resolve())
        with _SHARED_LOCK:
            if key not in _SHARED:
                _SHARED[key] = cls(key)
            return _SHARED[key]

    async def load(self, bmc: str) -> dict[str, tuple[str, bytes]]:
        return await asyncio.to_thread(self.load_sync, bmc)

    async def save(self, bmc: str, fresh: dict[str, tuple[str, Any]], used: list[str]) -> None:
        if fresh or used:
            await asyncio.to_thread(self.save_sync, bmc, fresh, used)

    @property
    def size(self) -> int:
        """Bytes of documents held (after the first load or save)."""
        return self._size

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def parse_kept(body: bytes) -> Any:
    """A kept document, parsed as the client parses an answer."""
    return _loads(body)
