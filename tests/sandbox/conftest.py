"""Sandbox tests start from an empty moto: the session's server, emptied for the module and after it."""

from collections.abc import Iterator

import pytest

from sandbox.moto_support import reset_moto_server


@pytest.fixture(scope="module")
def endpoint(moto_endpoint: str) -> Iterator[str]:
    """moto keeps its state in this process, so other tests re-seed what they need (tests/conftest.py)."""
    reset_moto_server(moto_endpoint)
    yield moto_endpoint
    reset_moto_server(moto_endpoint)
