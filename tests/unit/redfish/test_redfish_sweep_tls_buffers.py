"""A sweep's TLS connections get a 32 KiB read buffer, not asyncio's 256 KiB, and read every answer whole (issue 24).

asyncio gives each TLS connection a ``max_size`` read buffer for its whole life; at ``--concurrency`` 250
those buffers were half of a sweep's peak RSS (docs/sweep.md, "Memory"). ``run_many`` lowers it for the
connections it opens (:data:`SWEEP_TLS_READ_BUFFER`) and gives the process's own setting back after.
"""

from __future__ import annotations

import asyncio
import weakref
from asyncio import sslproto
from pathlib import Path
from typing import Any

import pytest
from fleetctl_drivers.redfish import run_many
from fleetctl_drivers.redfish.sweep import SWEEP_TLS_READ_BUFFER, sweep_tls_buffers

from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.sweep.collect import bmc_operation

fleetctl_lab = pytest.importorskip("fleetctl_lab.bmc")

ASYNCIO_DEFAULT = sslproto.SSLProtocol.max_size


def test_the_sweeps_connections_read_big_answers_whole_through_small_buffers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    buffers: list[int] = []
    live: weakref.WeakSet[Any] = weakref.WeakSet()
    real_init = sslproto.SSLProtocol.__init__

    def init(self: Any, *a: Any, **kw: Any) -> None:
        real_init(self, *a, **kw)
        buffers.append(len(self._ssl_buffer))
        live.add(self)

    monkeypatch.setattr(sslproto.SSLProtocol, "__init__", init)
    # AMI reads its log services 3 levels deep: 450 entries make one answer of about 150 KB, several times
    # the buffer, which must arrive in pieces and be read whole.
    (spec,) = fleetctl_lab.generate_specs(1, prefix="tlsbuf", flavours=("ami",))
    with fleetctl_lab.run_lab_in_thread([spec], fleetctl_lab.LabConfig(state_dir=tmp_path / "lab")) as lab:
        bmc = lab.lab.bmcs[spec.name]
        lab.call(lambda: [bmc.log("Warning", f"Correctable ECC error {i:04d} on DIMM_B2", "Memory.1.0.CorrectableError")
                          for i in range(450)])  # fmt: skip
        target = BMCTarget(name=spec.name, url=lab.url_of(spec.name), username=spec.username, password=spec.password,
                           fingerprint=lab.fingerprint_of(spec.name), timeout=20, retries=0)  # fmt: skip
        (r,) = asyncio.run(run_many([target], bmc_operation({}), read_once=True, expand=True))
    assert r.ok, r.error
    assert buffers and set(buffers) == {SWEEP_TLS_READ_BUFFER}, buffers
    messages = [e.message for e in r.value.logs]
    assert sum("Correctable ECC error" in m for m in messages) >= 400, len(messages)  # read whole, not cut
    assert sslproto.SSLProtocol.max_size == ASYNCIO_DEFAULT  # the process's own setting is back


def test_overlapping_sweeps_give_it_back_when_the_last_ends() -> None:
    with sweep_tls_buffers():
        with sweep_tls_buffers():
            assert sslproto.SSLProtocol.max_size == SWEEP_TLS_READ_BUFFER
        assert sslproto.SSLProtocol.max_size == SWEEP_TLS_READ_BUFFER  # the first sweep still runs
    assert sslproto.SSLProtocol.max_size == ASYNCIO_DEFAULT


def test_a_smaller_buffer_of_the_process_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", 8 * 1024)
    with sweep_tls_buffers():
        assert sslproto.SSLProtocol.max_size == 8 * 1024
    assert sslproto.SSLProtocol.max_size == 8 * 1024
