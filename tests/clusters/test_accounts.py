"""Per-org AWS sessions: one assume_role per org, reused until shortly before expiry, with the org's
external id, and clients that land in the org's own account."""

from __future__ import annotations

from bot.clusters.accounts import REFRESH_BEFORE_EXPIRY, SESSION_SECONDS, AwsAccounts
from tests.conftest import SeededAws


def test_assume_role_once_then_refresh_before_expiry(seeded_aws: SeededAws) -> None:
    now = [1_000_000.0]
    accounts = AwsAccounts(clock=lambda: now[0])
    kumo, sakura = seeded_aws.program.org("kumo-labs"), seeded_aws.program.org("sakura-ai")
    assert kumo is not None and sakura is not None
    for _ in range(3):
        accounts.client(kumo, "sagemaker")
        accounts.credentials(kumo)
    assert accounts.assume_role_calls == 1
    accounts.client(sakura, "ec2")
    assert accounts.assume_role_calls == 2
    # moto's credentials expire an hour after they were issued, in real time; move the clock there.
    (expiry,) = [entry.expires_at for key, entry in accounts._sessions.items() if key[0] == "kumo-labs"]
    now[0] = expiry - REFRESH_BEFORE_EXPIRY - 1
    accounts.client(kumo, "sagemaker")
    assert accounts.assume_role_calls == 2
    now[0] = expiry - REFRESH_BEFORE_EXPIRY + 1
    accounts.client(kumo, "sagemaker")
    assert accounts.assume_role_calls == 3
    assert SESSION_SECONDS >= 900  # STS's minimum


def test_clients_reach_the_orgs_own_account(seeded_aws: SeededAws) -> None:
    accounts = AwsAccounts()
    for org_id in ("kumo-labs", "sakura-ai"):
        org = seeded_aws.program.org(org_id)
        assert org is not None
        identity = accounts.client(org, "sts").get_caller_identity()
        assert identity["Account"] == org.aws.account_id
        assert f"assumed-role/PitcrewOps/pitcrew-{org_id}" in identity["Arn"]
        names = [c["ClusterName"] for c in accounts.client(org, "sagemaker").list_clusters()["ClusterSummaries"]]
        assert names == [c.name for c in seeded_aws.report.clusters if c.org_id == org_id and c.backend == "hyperpod"]
