"""No inventory row runs a command for another operator; bad references refused where they enter; preflight (issue #13).

- ``cmd:NAME`` names a secret source; the command is in the operator's own
  owner-only secrets config (an argv, no shell). An unknown NAME, or a config
  anyone else could read or write, is a clear error.
- A reference that is not one (a pasted ``admin:PASSWORD``, an old-style
  ``cmd:some command``, ``file:relative``) is refused where it enters, and
  what was given is never repeated.
- A malformed reference already in a store (written before this check)
  fails its own server with a one-line reason; it never reaches a shell
  splitter and never stops the other servers.
- ``provision`` resolves every secret it will need before it touches
  anything, and refuses with one line (exit 2); ``--dry-run`` lists the same.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from fleetctl.errors import SecretError
from fleetctl.secrets import BadReference, resolve, resolve_token, validate_ref

PASSWORD = "Pw-7zq-PASTED-NEVER-ECHO"
sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, mode: int = 0o600) -> Path:
    cfg = tmp_path / "op" / "secrets.toml"
    cfg.parent.mkdir(exist_ok=True)
    cfg.write_text(body)
    cfg.chmod(mode)
    monkeypatch.setenv("FLEETCTL_SECRETS_CONFIG", str(cfg))
    return cfg


def _print_script(tmp_path: Path, *lines: str) -> str:
    script = tmp_path / "print_secret.py"
    script.write_text("".join(f"print({line!r})\n" for line in lines))
    return str(script)


# --- cmd:NAME and the operator's secrets config ------------------------------------------


def test_cmd_name_runs_the_argv_the_operators_config_maps_it_to_without_a_shell(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    script = _print_script(tmp_path, "admin", PASSWORD)
    # The last argument would run `touch` under a shell; as an argv element it is only text.
    _config(tmp_path, monkeypatch, f'[commands]\nbmc-tyo1 = ["{sys.executable}", "{script}", "$(touch {marker})"]\n')
    cred = resolve("cmd:bmc-tyo1")
    assert (cred.username, cred.password.reveal()) == ("admin", PASSWORD)
    assert not marker.exists()
    _config(tmp_path, monkeypatch, f'[commands]\njoin = ["{sys.executable}", "{_print_script(tmp_path, "abcdef.0123456789abcdef")}"]\n')
    assert resolve_token("cmd:join").reveal() == "abcdef.0123456789abcdef"


def test_an_unknown_name_names_the_name_and_the_config_file(tmp_path, monkeypatch):
    cfg = _config(tmp_path, monkeypatch, '[commands]\nother = ["true"]\n')
    with pytest.raises(BadReference) as e:
        resolve("cmd:bmc-tyo1")
    assert "'bmc-tyo1'" in str(e.value) and str(cfg) in str(e.value) and "has no such entry" in str(e.value)
    cfg.unlink()
    with pytest.raises(BadReference, match="does not exist"):
        resolve("cmd:bmc-tyo1")


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o660, 0o644])
def test_a_config_others_can_read_or_write_is_refused(tmp_path, monkeypatch, mode):
    marker = tmp_path / "ran"
    _config(tmp_path, monkeypatch, f'[commands]\nbmc = ["touch", "{marker}"]\n', mode=mode)
    with pytest.raises(BadReference, match=r"owner only \(chmod 600\)"):
        resolve("cmd:bmc")
    assert not marker.exists()


def test_a_config_owned_by_someone_else_is_refused(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    cfg = _config(tmp_path, monkeypatch, f'[commands]\nbmc = ["touch", "{marker}"]\n')
    owner = cfg.stat().st_uid
    monkeypatch.setattr("fleetctl.secrets.os.getuid", lambda: owner + 1)  # as seen by another operator
    with pytest.raises(BadReference, match="not by you"):
        resolve("cmd:bmc")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("body", "fragment"),
    [('[commands]\nbmc = "pass show bmc"\n', "must be a list of strings"),  # a string would need a shell's splitting
     ("[commands]\nbmc = []\n", "must be a list of strings"),
     ('[commands]\n"a b" = ["true"]\n', "is not a source name"),
     ('[cmds]\nbmc = ["true"]\n', "unknown key 'cmds'"),
     ("[commands\n", "not valid TOML")],
)  # fmt: skip
def test_a_malformed_config_is_refused(tmp_path, monkeypatch, body, fragment):
    _config(tmp_path, monkeypatch, body)
    with pytest.raises(BadReference, match=fragment):
        resolve("cmd:bmc")


# --- refused where it enters, never echoed -------------------------------------------------


@pytest.mark.parametrize(
    "ref", [f"admin:{PASSWORD}", PASSWORD, f"cmd:echo '{PASSWORD}", f"cmd:pass show {PASSWORD}", f"env:{PASSWORD}-x", f"file:{PASSWORD}"]
)
def test_a_bad_reference_is_refused_without_repeating_it(ref):
    with pytest.raises(BadReference) as e:
        validate_ref(ref)
    assert PASSWORD not in str(e.value)


def test_an_old_style_cmd_reference_says_how_to_migrate():
    with pytest.raises(BadReference) as e:
        validate_ref("cmd:echo 'x")
    msg = str(e.value)
    assert "not a command" in msg and "[commands]" in msg and "cmd:NAME" in msg and "echo" not in msg


def test_a_relative_file_reference_is_refused():
    with pytest.raises(BadReference, match="absolute path"):
        validate_ref("file:secrets/bmc")
    assert validate_ref("file:/etc/fleetctl/bmc") and validate_ref("file:~/.fleetctl/bmc")


SITE = """\
models:
- {name: srv1u, kind: server, vendor: ACME, model: S1}
sites:
- name: lab1
  racks:
  - name: r1
    servers:
    - name: s1
      serial: SER-1
      model: srv1u
      position: 1
      bmc: https://10.0.0.1
      credential: {ref}
"""


@sqlite_only
@pytest.mark.parametrize(
    ("ref", "fragment"),
    [("\"cmd:echo 'x\"", "cmd: takes the NAME of a secret source, not a command"),
     (f"'admin:{PASSWORD}'", "not a credential reference"),
     ("file:relative/bmc", "absolute path")],
)  # fmt: skip
def test_a_site_file_with_a_bad_reference_is_refused_at_its_line(db_url, cli, tmp_path, ref, fragment):
    path = tmp_path / "site.yaml"
    path.write_text(SITE.replace("{ref}", ref))
    r = cli("inventory", "import", str(path))
    assert r.code == 2, r.err
    line = SITE.splitlines().index("      credential: {ref}") + 1
    assert f"{path}:{line}: sites[0].racks[0].servers[0].credential: " in r.err and fragment in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and PASSWORD not in r.err and "echo" not in r.err


@sqlite_only
@pytest.mark.parametrize("command", ["server", "switch"])
def test_server_and_switch_set_refuse_a_pasted_secret_without_echoing_it(example_loaded, cli, command):
    name = "mn-tyo1-r12-01" if command == "server" else "leaf-tyo1-r12-a"
    r = cli(command, "set", name, "--credential", f"admin:{PASSWORD}")
    assert r.code == 2, r.err
    assert "not a credential reference" in r.err and "the value is not shown" in r.err
    assert PASSWORD not in r.err + r.out
    r = cli(command, "set", name, "--credential", "cmd:echo 'x")
    assert r.code == 2 and "not a command" in r.err, r.err
    assert PASSWORD not in cli("inventory", "export").out


# --- a bad reference already stored fails its own server only --------------------------------


def test_a_malformed_stored_reference_fails_its_server_alone_and_never_reaches_a_splitter(monkeypatch):
    import shlex
    import subprocess

    from fleetctl.targets import ServerRef, bmc_targets

    def forbidden(*a: object, **k: object) -> None:
        raise AssertionError("a malformed reference reached a shell splitter or a process")

    monkeypatch.setattr(shlex, "split", forbidden)
    monkeypatch.setattr(subprocess, "run", forbidden)
    monkeypatch.setenv("BMC_OK_USERNAME", "admin")
    monkeypatch.setenv("BMC_OK_PASSWORD", PASSWORD)
    bad = ServerRef(1, "s-bad", "https://10.0.0.1", None, "cmd:echo 'x", None, "registered", "r1")
    good = ServerRef(2, "s-good", "https://10.0.0.2", None, "env:BMC_OK", None, "registered", "r1")
    targets, unreachable = bmc_targets([bad, good])
    assert [t.name for t in targets] == ["s-good"]
    assert "not a command" in unreachable["s-bad"]
    with pytest.raises(SecretError):  # a SecretError (exit 2), never ValueError: No closing quotation (exit 3)
        resolve("cmd:echo 'x")


# --- preflight -------------------------------------------------------------------------------------


def _store_untouched(cli) -> dict[str, object]:  # type: ignore[no-untyped-def]
    jobs = json.loads(cli("jobs", "list", "--output", "json").out)
    servers = json.loads(cli("server", "list", "--output", "json").out)
    return {"jobs": jobs, "servers": [(s["name"], s["state"]) for s in servers]}


@sqlite_only
def test_provision_without_the_join_token_is_refused_before_anything_is_touched(example_loaded, cli, monkeypatch):
    for var in ("BMC_TYO1", "SWITCH"):
        monkeypatch.setenv(f"{var}_USERNAME", "admin")
        monkeypatch.setenv(f"{var}_PASSWORD", PASSWORD)
    monkeypatch.delenv("FLEETCTL_K8S_TOKEN", raising=False)
    before = _store_untouched(cli)
    # The example fleet's addresses never answer (and the test guard refuses a packet to them):
    # a refusal that comes after any device contact would fail differently.
    r = cli("provision", "rack-12", "--output", "json")
    assert r.code == 2, (r.out, r.err)
    err = [x for x in r.err.strip().splitlines() if not x.startswith("fleet: ")]  # JSON output: the fleet line goes to stderr
    assert len(err) == 1 and err[0].startswith("error: provision refused: site tyo1: provisioning.k8s.token"), err
    assert "set FLEETCTL_K8S_TOKEN" in err[0] and "nothing was touched" in err[0]
    assert _store_untouched(cli) == before
    # The dry run refuses the same way and lists every problem.
    r = cli("provision", "rack-12", "--dry-run", "--output", "json")
    assert r.code == 2 and r.err.strip().splitlines()[-1] == err[0]
    doc = json.loads(r.out)
    assert doc["refused"] and [p["who"] for p in doc["problems"]] == [["site tyo1"]]


@sqlite_only
def test_provision_collects_every_problem_into_one_line(example_loaded, cli, monkeypatch, tmp_path):
    for var in ("BMC_TYO1_USERNAME", "BMC_TYO1_PASSWORD", "SWITCH_USERNAME", "SWITCH_PASSWORD", "FLEETCTL_K8S_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    r = cli("provision", "mn-tyo1-r12-01", "mn-tyo1-r12-02", "--dry-run", "--output", "json")
    assert r.code == 2
    line = r.err.strip().splitlines()[-1]
    assert line == ("error: provision refused: server mn-tyo1-r12-01 (and 1 more): credential env:BMC_TYO1: set BMC_TYO1_USERNAME "
                    "and BMC_TYO1_PASSWORD (and 2 more problems; nothing was touched)")  # fmt: skip
    problems = {p["problem"]: p["who"] for p in json.loads(r.out)["problems"]}
    assert problems == {
        "credential env:BMC_TYO1: set BMC_TYO1_USERNAME and BMC_TYO1_PASSWORD": ["server mn-tyo1-r12-01", "server mn-tyo1-r12-02"],
        "SSH credential env:SWITCH: set SWITCH_USERNAME and SWITCH_PASSWORD": ["switch leaf-tyo1-r12-a", "switch leaf-tyo1-r12-b"],
        "provisioning.k8s.token: secret env:FLEETCTL_K8S_TOKEN: set FLEETCTL_K8S_TOKEN": ["site tyo1"],
    }


def test_the_sweep_refuses_only_on_the_operators_own_secrets_config(tmp_path, monkeypatch):
    from fleetctl.preflight import PreflightError, for_sweep
    from fleetctl.targets import ServerRef

    monkeypatch.delenv("BMC_NOPE_USERNAME", raising=False)
    env_only = [ServerRef(1, "s1", "https://10.0.0.1", None, "env:BMC_NOPE", None, "ready", "r1"),
                ServerRef(2, "s2", "https://10.0.0.2", None, None, None, "ready", "r1")]  # fmt: skip
    for_sweep(env_only, []).refuse()  # a server's own missing secret stays its finding
    with_cmd = [*env_only, ServerRef(3, "s3", "https://10.0.0.3", None, "cmd:bmc", None, "ready", "r1")]
    monkeypatch.setenv("FLEETCTL_SECRETS_CONFIG", str(tmp_path / "absent.toml"))
    with pytest.raises(PreflightError, match=r"absent\.toml does not exist"):
        for_sweep(with_cmd, []).refuse()
    _config(tmp_path, monkeypatch, '[commands]\nbmc = ["true"]\n', mode=0o644)
    with pytest.raises(PreflightError, match="owner only"):
        for_sweep(with_cmd, []).refuse()
    os.chmod(os.environ["FLEETCTL_SECRETS_CONFIG"], 0o600)
    for_sweep(with_cmd, []).refuse()


@pytest.mark.parametrize(
    ("token", "fragment"),
    [("cmd:vault kv get -field=token k8s", "cmd: takes the NAME of a secret source"), ("file:token", "absolute path"),
     ("abcdef.0123456789abcdef", "never the token itself")],
)  # fmt: skip
def test_the_join_token_reference_is_checked_like_a_credential_and_never_repeated(token, fragment):
    from pydantic import ValidationError

    from fleetctl.inventory.schema import K8sJoinSpec

    with pytest.raises(ValidationError) as e:
        K8sJoinSpec.model_validate({"endpoint": "k8s-api.lab1:6443", "token": token, "ca_cert_hash": "sha256:" + "ab" * 32})
    msg = e.value.errors()[0]["msg"]
    assert fragment in msg and token not in msg
    assert K8sJoinSpec.model_validate({"endpoint": "k8s-api.lab1:6443", "token": "cmd:k8s-join", "ca_cert_hash": "sha256:" + "ab" * 32})
