"""The doctor's tests use the scenarios' sandbox and the IAM tests' enforced moto (tests/iam/conftest.py)."""

from tests.iam.conftest import iam_aws  # noqa: F401
from tests.scenarios.conftest import sandbox, sandbox_factory  # noqa: F401
