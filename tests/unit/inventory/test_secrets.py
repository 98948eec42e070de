"""Credential references: env:, file:, cmd:NAME; secrets never shown, never stored."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from invtest_sites import BASE
from sqlalchemy import inspect, text

from fleetctl.errors import SecretError
from fleetctl.secrets import Secret, resolve, validate_ref

PASSWORD = "Pw-9f3kq-NEVER-STORE"


def test_env_reference(monkeypatch):
    monkeypatch.setenv("BMC_LAB_USERNAME", "admin")
    monkeypatch.setenv("BMC_LAB_PASSWORD", PASSWORD)
    cred = resolve("env:BMC_LAB")
    assert cred.username == "admin"
    assert cred.password.reveal() == PASSWORD


def test_env_reference_missing_variables_names_them(monkeypatch):
    monkeypatch.delenv("NOPE_USERNAME", raising=False)
    monkeypatch.delenv("NOPE_PASSWORD", raising=False)
    with pytest.raises(SecretError, match="NOPE_USERNAME and NOPE_PASSWORD"):
        resolve("env:NOPE")


@pytest.mark.parametrize(
    "body",
    [f"admin\n{PASSWORD}\n", f"admin:{PASSWORD}\n"],
    ids=["two-lines", "user:password"],
)
def test_file_reference(tmp_path, body):
    p = tmp_path / "cred"
    p.write_text(body)
    p.chmod(0o600)
    cred = resolve(f"file:{p}")
    assert (cred.username, cred.password.reveal()) == ("admin", PASSWORD)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o610])
def test_file_reference_refuses_group_or_other_access(tmp_path, mode):
    p = tmp_path / "cred"
    p.write_text(f"admin\n{PASSWORD}\n")
    p.chmod(mode)
    with pytest.raises(SecretError, match="owner only") as e:
        resolve(f"file:{p}")
    assert PASSWORD not in str(e.value)


def test_file_reference_missing_file(tmp_path):
    with pytest.raises(SecretError, match="cannot read"):
        resolve(f"file:{tmp_path / 'absent'}")


def _sources(tmp_path, monkeypatch, **commands):  # type: ignore[no-untyped-def]
    """An owner-only secrets config mapping each NAME to an argv; FLEETCTL_SECRETS_CONFIG points at it."""
    import json

    cfg = tmp_path / "secrets.toml"
    cfg.write_text("[commands]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in commands.items()))
    cfg.chmod(0o600)
    monkeypatch.setenv("FLEETCTL_SECRETS_CONFIG", str(cfg))
    return cfg


def test_cmd_reference(tmp_path, monkeypatch):
    script = tmp_path / "secret.py"
    script.write_text(f"print('admin'); print('{PASSWORD}')\n")
    _sources(tmp_path, monkeypatch, bmc=[sys.executable, str(script)])
    cred = resolve("cmd:bmc")
    assert (cred.username, cred.password.reveal()) == ("admin", PASSWORD)


def test_cmd_reference_failure_keeps_the_commands_output_out(tmp_path, monkeypatch):
    script = tmp_path / "fail.py"
    script.write_text(
        f"import sys; print('{PASSWORD}', file=sys.stderr); sys.exit(3)\n"
    )
    _sources(tmp_path, monkeypatch, bmc=[sys.executable, str(script)])
    with pytest.raises(SecretError, match="exited with 3") as e:
        resolve("cmd:bmc")
    assert PASSWORD not in str(e.value)


@pytest.mark.parametrize(
    "ref", ["vault:x", "env:", "env:1BAD", "env:A-B", "nocolon", "file:", "cmd:  ", "cmd:echo x", "file:rel/path"]
)
def test_malformed_references_are_refused(ref):
    with pytest.raises(SecretError):
        validate_ref(ref)


def test_secret_never_shows_its_value():
    s = Secret(PASSWORD)
    for shown in (
        repr(s),
        str(s),
        f"{s}",
        f"{s!r}",
        repr([s]),
        repr({"p": s}),
        "%s" % s,  # noqa: UP031 (old-style formatting too)
    ):
        assert PASSWORD not in shown
    assert s.reveal() == PASSWORD
    assert s == Secret(PASSWORD) and s != Secret("other")
    from fleetctl.secrets import Credential

    assert PASSWORD not in repr(Credential("admin", s))


def test_the_inventory_never_holds_a_secret(db_url, cli, write, monkeypatch, tmp_path):
    monkeypatch.setenv("BMC_LAB_USERNAME", "admin")
    monkeypatch.setenv("BMC_LAB_PASSWORD", PASSWORD)
    monkeypatch.setenv("SWITCH_USERNAME", "admin")
    monkeypatch.setenv("SWITCH_PASSWORD", PASSWORD)
    text_ = BASE.replace(
        "      position: 10\n", "      position: 10\n      credential: env:SWITCH\n"
    )
    assert cli("inventory", "import", str(write(text_))).code == 0
    for args in (("inventory", "export"), ("inventory", "export", "-o", "json"), ("server", "list", "-o", "json"),
                 ("server", "show", "s1", "-o", "json"), ("switch", "show", "sw1", "-o", "json"),
                 ("events", "list", "-o", "json")):  # fmt: skip
        r = cli(*args)
        assert r.code == 0, r.err
        assert PASSWORD not in r.out
    assert (
        "env:BMC_LAB" in cli("server", "show", "s1", "-o", "json").out
    )  # the reference is kept

    from fleetctl.store import get_engine, reset_engines

    engine = get_engine(db_url)
    with engine.connect() as c:
        dump = []
        for table in inspect(c).get_table_names():
            dump += [
                str(tuple(row)) for row in c.execute(text(f'SELECT * FROM "{table}"'))
            ]
    joined = "\n".join(dump)
    assert "env:BMC_LAB" in joined and "env:SWITCH" in joined
    assert PASSWORD not in joined
    if db_url.startswith("sqlite"):
        reset_engines()  # checkpoint and close, then read the bytes on disk (WAL included)
        path = db_url.split(":///", 1)[1]
        raw = b"".join(
            Path(p).read_bytes() for p in (path, path + "-wal") if os.path.exists(p)
        )
        assert b"env:BMC_LAB" in raw
        assert PASSWORD.encode() not in raw


def test_resolve_token_reads_one_value_from_env_file_or_command(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    from fleetctl.errors import SecretError
    from fleetctl.secrets import resolve_token

    monkeypatch.setenv("JOIN_TOKEN", "abcdef.0123456789abcdef")
    tok = resolve_token("env:JOIN_TOKEN")
    assert tok.reveal() == "abcdef.0123456789abcdef" and "0123456789" not in repr(tok) + str(tok)
    f = tmp_path / "token"
    f.write_text("\n  abcdef.0123456789abcdef  \nignored\n")
    f.chmod(0o644)
    with pytest.raises(SecretError, match="owner only"):
        resolve_token(f"file:{f}")
    f.chmod(0o600)
    assert resolve_token(f"file:{f}").reveal() == "abcdef.0123456789abcdef"
    _sources(tmp_path, monkeypatch, join=["echo", "abcdef.0123456789abcdef"])
    assert resolve_token("cmd:join").reveal() == "abcdef.0123456789abcdef"
    monkeypatch.delenv("JOIN_TOKEN")
    with pytest.raises(SecretError, match="set JOIN_TOKEN"):
        resolve_token("env:JOIN_TOKEN")
