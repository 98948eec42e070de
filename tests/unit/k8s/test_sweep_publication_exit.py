"""The sweep's exit code after its verdicts' publication: a failed publication is not hidden behind a healthy sweep."""

from __future__ import annotations

import pytest

from fleetctl.cli.sweep import with_publication
from fleetctl.errors import EXIT_BREAKER, EXIT_PUBLISH, EXIT_STORE


@pytest.mark.parametrize(
    ("code", "published", "want"),
    [
        (0, 0, 0), (1, 0, 1), (5, 0, 5),
        (0, EXIT_PUBLISH, EXIT_PUBLISH), (1, EXIT_PUBLISH, EXIT_PUBLISH),  # the scheduler was not told: a unit alerts
        (4, EXIT_PUBLISH, 4), (5, EXIT_PUBLISH, 5), (EXIT_STORE, EXIT_PUBLISH, EXIT_STORE),  # each alerts already
        (0, EXIT_BREAKER, EXIT_BREAKER), (5, EXIT_BREAKER, EXIT_BREAKER),
    ],
)  # fmt: skip
def test_exit_codes(code: int, published: int, want: int) -> None:
    assert with_publication(code, published) == want
