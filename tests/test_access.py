"""Access rules, decided from the program file alone."""

import pytest

from bot.access import NOT_A_MEMBER, AccessPolicy, Action, Role
from bot.config import parse_program

PROGRAM = """
name: Test Program
coordination_channel: C0PROGRAM
admins: [U0ADMIN01]
orgs:
  - id: kumo-labs
    name: Kumo Labs
    channel: C0KUMOLAB
    members: {U0ALICE01: operator, U0BOB0001: viewer}
    aws: {account_id: "111111111111", region: us-east-1}
  - id: sakura-ai
    name: Sakura AI
    channel: C0SAKURA1
    members: {U0CAROL01: operator}
    aws: {account_id: "222222222222", region: us-west-2}
"""


@pytest.fixture
def access() -> AccessPolicy:
    return AccessPolicy(program=parse_program(PROGRAM))


def test_roles(access: AccessPolicy) -> None:
    assert access.role(user_id="U0ADMIN01", org_id="sakura-ai") is Role.ADMIN
    assert access.role(user_id="U0ALICE01", org_id="kumo-labs") is Role.OPERATOR
    assert access.role(user_id="U0BOB0001", org_id="kumo-labs") is Role.VIEWER
    assert access.role(user_id="U0BOB0001", org_id="sakura-ai") is None
    assert access.role(user_id="U0NOBODY1", org_id="kumo-labs") is None


@pytest.mark.parametrize(
    ("user", "action", "org", "allowed"),
    [
        ("U0ADMIN01", Action.OPERATE, "sakura-ai", True),
        ("U0ADMIN01", Action.ADMINISTER, None, True),
        ("U0ALICE01", Action.OPERATE, "kumo-labs", True),
        ("U0ALICE01", Action.VIEW, "sakura-ai", False),
        ("U0BOB0001", Action.VIEW, "kumo-labs", True),
        ("U0BOB0001", Action.OPERATE, "kumo-labs", False),
        ("U0ALICE01", Action.ADMINISTER, None, False),
        ("U0NOBODY1", Action.VIEW, "kumo-labs", False),
    ],
)
def test_decisions(access: AccessPolicy, user: str, action: Action, org: str | None, allowed: bool) -> None:
    assert access.decide(user_id=user, action=action, org_id=org).allowed is allowed


def test_refusal_reveals_nothing_about_other_orgs(access: AccessPolicy) -> None:
    real = access.decide(user_id="U0BOB0001", action=Action.VIEW, org_id="sakura-ai").reason
    made_up = access.decide(user_id="U0BOB0001", action=Action.VIEW, org_id="no-such-org").reason
    assert real.replace("sakura-ai", "X") == made_up.replace("no-such-org", "X")


def test_viewer_refusal_names_the_needed_role(access: AccessPolicy) -> None:
    reason = access.decide(user_id="U0BOB0001", action=Action.OPERATE, org_id="kumo-labs").reason
    assert "viewer" in reason and "operator" in reason


def test_stranger_is_told_how_to_get_access(access: AccessPolicy) -> None:
    assert access.decide(user_id="U0NOBODY1", action=Action.VIEW, org_id="kumo-labs").reason == NOT_A_MEMBER


def test_default_orgs_follow_the_user_not_the_channel(access: AccessPolicy) -> None:
    # In an org channel the user may see: that org.
    assert access.default_orgs(user_id="U0ADMIN01", channel_id="C0SAKURA1") == ["sakura-ai"]
    # In another org's channel: the user's own org, never the channel's.
    assert access.default_orgs(user_id="U0BOB0001", channel_id="C0SAKURA1") == ["kumo-labs"]
    # An admin outside any org channel: all orgs.
    assert access.default_orgs(user_id="U0ADMIN01", channel_id="C0PROGRAM") == ["kumo-labs", "sakura-ai"]
    assert access.visible_orgs("U0ALICE01") == ["kumo-labs"]
    assert access.visible_orgs("U0NOBODY1") == []


def test_default_org_for_commands_that_act_on_one_org(access: AccessPolicy) -> None:
    assert access.default_org(user_id="U0ALICE01", channel_id="C0KUMOLAB") == "kumo-labs"
    assert access.default_org(user_id="U0ALICE01", channel_id="C0SAKURA1") == "kumo-labs"  # her only org
    assert access.default_org(user_id="U0ADMIN01", channel_id="C0SAKURA1") == "sakura-ai"
    assert access.default_org(user_id="U0ADMIN01", channel_id="C0PROGRAM") is None  # an admin must say which
