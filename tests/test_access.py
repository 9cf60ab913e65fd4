"""Access rules, decided from the program file alone."""

import pytest

from bot.access import NOT_A_MEMBER, AccessPolicy, Action, Role
from bot.actor import acting_from
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
    reason = access.decide(user_id="U0NOBODY1", action=Action.VIEW, org_id="kumo-labs").reason
    assert "<@U0ADMIN01>" in reason and "program file" in reason  # who the admins are and how to be added
    assert "kumo" not in reason.lower() and "sakura" not in reason.lower()  # nothing about any org
    assert NOT_A_MEMBER.startswith(reason.split(" To be added")[0])


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


CONNECT = """
name: Test Program
coordination_channel: C0PROGRAM
admins: [U0ADMIN01]
orgs:
  - id: kumo-labs
    name: Kumo Labs
    channel: C0KUMOLAB
    members: {U0ALICE01: operator, U0TARO001: operator, U0SHARED1: viewer}
    aws: {account_id: "111111111111", region: us-east-1}
    slack_teams: [T0KUMOLAB]
  - id: sakura-ai
    name: Sakura AI
    channel: C0SAKURA1
    members: {U0CAROL01: operator, U0SHARED1: operator}
    aws: {account_id: "222222222222", region: us-west-2}
"""
HOME = "T0PROGRAM"


@pytest.fixture
def connect() -> AccessPolicy:
    return AccessPolicy(program=parse_program(CONNECT), home_team=HOME)


@pytest.mark.parametrize(
    ("team", "user", "org", "role"),
    [
        ("T0KUMOLAB", "U0TARO001", "kumo-labs", Role.OPERATOR),  # the org's own workspace
        (HOME, "U0TARO001", "kumo-labs", Role.OPERATOR),  # a guest in Pitcrew's workspace
        ("T0ELSEWHR", "U0TARO001", "kumo-labs", None),  # the same id from a third workspace: nobody
        ("T0ELSEWHR", "U0CAROL01", "sakura-ai", Role.OPERATOR),  # an org that lists no team takes any
        ("T0ELSEWHR", "U0SHARED1", "kumo-labs", None),  # per org: refused where the org lists teams...
        ("T0ELSEWHR", "U0SHARED1", "sakura-ai", Role.OPERATOR),  # ...kept where it does not
        (None, "U0TARO001", "kumo-labs", Role.OPERATOR),  # no Slack request (monitors): not held against anyone
        (HOME, "U0ADMIN01", "kumo-labs", Role.ADMIN),
        ("T0KUMOLAB", "U0ADMIN01", "kumo-labs", None),  # admins are program staff, from Pitcrew's workspace
    ],
)
def test_identity_is_user_and_team(
    connect: AccessPolicy, team: str | None, user: str, org: str, role: Role | None
) -> None:
    with acting_from(team):
        assert connect.role(user_id=user, org_id=org) is role
        assert (org in connect.visible_orgs(user)) is (role is not None)


def test_a_listed_user_from_another_team_is_unknown(connect: AccessPolicy) -> None:
    with acting_from("T0ELSEWHR"):
        assert not connect.is_known("U0TARO001")
        refused = connect.decide(user_id="U0TARO001", action=Action.VIEW, org_id="kumo-labs")
        assert not refused.allowed and "<@U0ADMIN01>" in refused.reason and "kumo" not in refused.reason.lower()
    with acting_from("T0KUMOLAB"):
        assert connect.is_known("U0TARO001")


def test_home_team_unknown_accepts_everyone_listed() -> None:
    access = AccessPolicy(program=parse_program(CONNECT))  # auth.test has not answered yet
    with acting_from("T0ELSEWHR"):
        assert access.is_admin("U0ADMIN01")
        assert access.role(user_id="U0TARO001", org_id="kumo-labs") is None  # the org's list still holds
