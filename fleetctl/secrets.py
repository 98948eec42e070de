"""Credential references: where a secret lives, never the secret itself.

A reference is stored in the inventory; the secret is read only when a driver
needs it and is carried in a :class:`Secret` whose ``repr`` and ``str`` hide
it, so that it cannot leak into logs, tables, JSON output or Ansible vars by
accident.

Forms:
- ``env:PREFIX``: ``PREFIX_USERNAME`` and ``PREFIX_PASSWORD`` from the environment;
- ``file:/ABS/PATH`` (or ``file:~/PATH``): a file readable by its owner only,
  ``username`` on the first line and the password on the second (or
  ``username:password`` on one line);
- ``cmd:NAME``: a secret source NAMEd in the operator's own secrets
  configuration (:func:`secrets_config_path`, owner-only), which maps NAME to
  a command (an argument list, run without a shell) whose output is read the
  same way as a file.

The inventory may be shared by several operators (one PostgreSQL database),
so it never holds a command: a ``cmd:`` reference only names a source, and
what runs is what the operator who resolves it wrote in their own file. See
docs/security.md.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetctl.errors import SecretError

SCHEMES = ("env", "file", "cmd")
ENV_SECRETS_CONFIG = "FLEETCTL_SECRETS_CONFIG"
CMD_TIMEOUT_S = 30
_ENV_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: A secret source name (``cmd:NAME``): a plain identifier, never a command.
_SOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
#: Said instead of the value: what was given may be the secret itself.
FORMS = "env:PREFIX, file:/ABS/PATH, cmd:NAME"


class BadReference(SecretError):
    """A reference that no environment can make work: malformed, an unknown source NAME, or an unusable secrets config.

    Unlike a secret that is merely absent (a variable not set, a file not
    there), this is wrong for every operator until the inventory or the
    secrets configuration is fixed.
    """


class Secret:
    """A string that does not show itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    def __str__(self) -> str:
        return "********"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class Credential:
    username: str
    password: Secret


def validate_ref(ref: str) -> str:
    """Check the form of a reference (not that the secret exists) and return it.

    The messages never repeat what was given: a pasted password or a command
    line with a secret in it must not end up in a terminal's scrollback, a
    CI log or the event log.

    Raises:
        BadReference: not one of the forms.
    """
    scheme, sep, rest = ref.partition(":")
    if not sep or scheme not in SCHEMES or not rest.strip():
        raise BadReference(f"not a credential reference ({FORMS}); the value is not shown")
    if scheme == "env" and not _ENV_PREFIX.match(rest):
        raise BadReference("env: takes a variable prefix (letters, digits, _; not starting with a digit); the value is not shown")
    if scheme == "file" and not (rest.startswith("/") or rest.startswith("~/")):
        raise BadReference("file: takes an absolute path (file:/ABS/PATH or file:~/PATH): a relative one would depend on "
                           "the directory the command runs in")  # fmt: skip
    if scheme == "cmd" and not _SOURCE_NAME.match(rest):
        raise BadReference(
            "cmd: takes the NAME of a secret source, not a command (the inventory is shared; commands stay in each "
            f'operator\'s own {_config_hint()}): add NAME = ["program", "arg", ...] under [commands] there and write '
            "cmd:NAME; the value is not shown"
        )
    return ref


def _config_hint() -> str:
    try:
        return str(secrets_config_path())
    except Exception:  # noqa: BLE001 - only a hint in a message; platformdirs may not know a home
        return f"secrets config (${ENV_SECRETS_CONFIG})"


def secrets_config_path() -> Path:
    """The operator's secrets configuration: ``$FLEETCTL_SECRETS_CONFIG``, else ``secrets.toml`` in the user config folder."""
    explicit = os.environ.get(ENV_SECRETS_CONFIG, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    from platformdirs import user_config_dir

    return Path(user_config_dir("fleetctl", appauthor=False)) / "secrets.toml"


def load_sources(path: Path | None = None) -> dict[str, list[str]]:
    """The ``[commands]`` table of the operator's secrets configuration: {NAME: argv}.

    The file must be a regular file owned by the user running fleetctl and
    neither readable nor writable by group or others (anyone who can write
    it chooses what runs as this operator). A missing file is an empty
    table: every ``cmd:NAME`` is then unknown.

    Raises:
        BadReference: the file is not owner-only, not the user's, not TOML,
            or a NAME does not map to a list of strings.
    """
    import tomllib

    path = path or secrets_config_path()
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise BadReference(f"secrets config {path}: {e.strerror}") from e
    if not stat.S_ISREG(st.st_mode):
        raise BadReference(f"secrets config {path}: not a regular file")
    if st.st_uid != os.getuid():
        raise BadReference(f"secrets config {path}: owned by uid {st.st_uid}, not by you (uid {os.getuid()}); it decides what runs as you")
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise BadReference(f"secrets config {path}: must be readable and writable by its owner only (chmod 600)")
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise BadReference(f"secrets config {path}: cannot read it ({e.__class__.__name__})") from e
    except tomllib.TOMLDecodeError as e:
        raise BadReference(f"secrets config {path}: not valid TOML ({e})") from None
    unknown = sorted(set(data) - {"commands"})
    if unknown:
        raise BadReference(f"secrets config {path}: unknown key {unknown[0]!r} (the file holds a [commands] table)")
    table = data.get("commands", {})
    if not isinstance(table, dict):
        raise BadReference(f'secrets config {path}: commands must be a table: [commands] NAME = ["program", "arg", ...]')
    out: dict[str, list[str]] = {}
    for name, argv in table.items():
        if not _SOURCE_NAME.match(name):
            raise BadReference(f"secrets config {path}: {name!r} is not a source name (letters, digits, . _ -)")
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv) and argv[0]):
            # No shell and no splitting: a string would have to be split, and quoting is where it goes wrong.
            raise BadReference(f"secrets config {path}: commands.{name} must be a list of strings, program first "
                               "([\"pass\", \"show\", \"bmc\"]); no shell runs it")  # fmt: skip
        out[name] = list(argv)
    return out


def source_command(ref: str) -> list[str]:
    """The argv a ``cmd:NAME`` reference runs, from the operator's secrets config.

    Raises:
        BadReference: malformed, the config is unusable, or NAME is not in it.
    """
    validate_ref(ref)
    name = ref.partition(":")[2]
    path = secrets_config_path()
    argv = load_sources(path).get(name)
    if argv is None:
        where = "which does not exist" if not path.exists() else "which has no such entry"
        raise BadReference(f"{ref}: unknown secret source {name!r}: define it in {path} ({where}) as "
                           f"[commands] {name} = [\"program\", \"arg\", ...]")  # fmt: skip
    return argv


def _parse_pair(text: str, origin: str) -> Credential:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) >= 2:
        return Credential(lines[0], Secret(lines[1]))
    if len(lines) == 1 and ":" in lines[0]:
        user, _, password = lines[0].partition(":")
        return Credential(user, Secret(password))
    raise SecretError(f"{origin}: expected a username and a password")


def _read(ref: str, what: str) -> str:
    """The text behind a ``file:`` (owner-only) or ``cmd:`` reference."""
    scheme, _, rest = ref.partition(":")
    if scheme == "file":
        path = Path(rest).expanduser()
        try:
            st = path.stat()
        except OSError as e:
            raise SecretError(f"{what} {ref}: cannot read {path}: {e.strerror}") from e
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise SecretError(f"{what} {ref}: {path} must be readable by its owner only (chmod 600)")
        return path.read_text()
    argv = source_command(ref)
    # The command's own error output may name the secret store; keep it
    # out of our message, only the exit status is shown.
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=CMD_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SecretError(f"{what} {ref}: command failed to run: {e.__class__.__name__}") from e
    if done.returncode != 0:
        raise SecretError(f"{what} {ref}: command exited with {done.returncode}")
    return done.stdout


def resolve(ref: str) -> Credential:
    """Read the credential that ``ref`` points at.

    Raises:
        BadReference: the reference itself is wrong (see :class:`BadReference`).
        SecretError: the secret is not where the reference says.
    """
    validate_ref(ref)
    scheme, _, rest = ref.partition(":")
    if scheme == "env":
        user = os.environ.get(f"{rest}_USERNAME")
        password = os.environ.get(f"{rest}_PASSWORD")
        if user is None or password is None:
            raise SecretError(f"credential {ref}: set {rest}_USERNAME and {rest}_PASSWORD")
        return Credential(user, Secret(password))
    return _parse_pair(_read(ref, "credential"), f"credential {ref}")


def resolve_token(ref: str) -> Secret:
    """Read a single secret value (a join token, an API key) that ``ref`` points at.

    ``env:NAME`` is the variable NAME itself; ``file:`` and ``cmd:`` give
    their first non-empty line. The file must be owner-only, as for credentials.
    """
    validate_ref(ref)
    scheme, _, rest = ref.partition(":")
    if scheme == "env":
        value = os.environ.get(rest)
        if not value:
            raise SecretError(f"secret {ref}: set {rest}")
        return Secret(value.strip())
    line = next((x.strip() for x in _read(ref, "secret").splitlines() if x.strip()), "")
    if not line:
        raise SecretError(f"secret {ref}: empty")
    return Secret(line)
