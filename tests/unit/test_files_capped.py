"""Files the operator names are read as regular files up to a cap: a device or a FIFO never fills the memory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetctl.files import FileRefused, read_capped


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/full"])
def test_a_device_is_refused(dev: str) -> None:
    with pytest.raises(FileRefused, match="not a regular file"):
        read_capped(Path(dev), 1024)


def test_a_fifo_and_a_folder_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(FileRefused, match="not a regular file"):
        read_capped(fifo, 1024)  # opened, it would block forever
    with pytest.raises(FileRefused, match="not a regular file"):
        read_capped(tmp_path, 1024)
    with pytest.raises(FileRefused, match="no such file"):
        read_capped(tmp_path / "nope", 1024)


def test_the_cap(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x" * 2048)
    assert read_capped(f, 2048) == b"x" * 2048
    with pytest.raises(FileRefused, match="larger than any file"):
        read_capped(f, 2047)


@pytest.mark.parametrize("argv", [["inventory", "import", "/dev/zero"], ["inventory", "check", "/dev/zero"],
                                  ["burnin", "--kind", "gpu", "--criteria", "/dev/zero", "x"],
                                  ["k8s", "publish", "--policy", "/dev/zero"]])  # fmt: skip
def test_commands_refuse_a_device_in_one_line(argv: list[str], cli: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETCTL_DB", str(tmp_path / "db.sqlite"))
    r = cli(*argv)  # type: ignore[operator]
    assert r.code == 2 and "not a regular file" in r.err and len(r.err.strip().splitlines()) == 1, r.err
