"""Credential references: where a secret lives, never the secret itself.

A reference is stored in the inventory; the secret is read only when a driver
needs it and is carried in a :class:`Secret` whose ``repr`` and ``str`` hide
it, so that it cannot leak into logs, tables, JSON output or Ansible vars by
accident.

Forms:
- ``env:PREFIX``: ``PREFIX_USERNAME`` and ``PREFIX_PASSWORD`` from the environment;
- ``file:PATH``: a file readable by its owner only, ``username`` on the first
  line and the password on the second (or ``username:password`` on one line);
- ``cmd:COMMAND``: a command whose output is read the same way as a file.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from fleetctl.errors import SecretError

SCHEMES = ("env", "file", "cmd")
_ENV_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
    """Check the form of a reference (not that the secret exists) and return it."""
    scheme, sep, rest = ref.partition(":")
    if not sep or scheme not in SCHEMES or not rest.strip():
        raise SecretError(f"credential reference {ref!r} must be env:PREFIX, file:PATH or cmd:COMMAND")
    if scheme == "env" and not _ENV_PREFIX.match(rest):
        raise SecretError(f"credential reference {ref!r}: {rest!r} is not an environment variable prefix")
    return ref


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
    # cmd: the command's own error output may name the secret store; keep it
    # out of our message, only the exit status is shown.
    try:
        done = subprocess.run(shlex.split(rest), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SecretError(f"{what} {ref}: command failed to run: {e.__class__.__name__}") from e
    if done.returncode != 0:
        raise SecretError(f"{what} {ref}: command exited with {done.returncode}")
    return done.stdout


def resolve(ref: str) -> Credential:
    """Read the credential that ``ref`` points at."""
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
