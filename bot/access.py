"""Who may do what to which org. Pure: decided from the program file and the acting person alone.

Access depends on the person, never on the channel; the channel only picks a default org. A person is a user id
together with their Slack workspace (bot.actor): an org that lists `slack_teams` accepts its members only from
those teams or from the workspace Pitcrew is installed in, and the same user id from any other team is nobody
there. Admins are program staff, accepted from the installed workspace.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bot.actor import current_team
from bot.config import OrgConfig, ProgramConfig


class Role(StrEnum):
    ADMIN = "admin"
    OPERATOR = "operator"
    VIEWER = "viewer"


class Action(StrEnum):
    """What a command needs; each maps to the least role that may do it."""

    VIEW = "view"  # list, status, nodes, templates, throughput, track show
    OPERATE = "operate"  # launch, scale, replace, reboot, delete, track writes
    ADMINISTER = "administer"  # digest send, program-wide views


_LEAST_ROLE = {Action.VIEW: Role.VIEWER, Action.OPERATE: Role.OPERATOR, Action.ADMINISTER: Role.ADMIN}
_RANK = {Role.VIEWER: 1, Role.OPERATOR: 2, Role.ADMIN: 3}

NOT_A_MEMBER = (
    "You are not a member of any organization in this program, so Pitcrew cannot show you anything. "
    "Ask a program admin to add your Slack user ID to the program file."
)


def not_a_member(admins: list[str]) -> str:
    """The one sentence for a person in no org: who the admins are and how to be added, nothing about any org."""
    if not admins:
        return NOT_A_MEMBER
    named = ", ".join(f"<@{admin}>" for admin in admins[:5])
    return (
        "You are not a member of any organization in this program, so Pitcrew cannot show you anything. "
        f"To be added, ask a program admin ({named}) to put your Slack user ID, and your workspace if you are "
        "in another company's Slack, in the program file."
    )


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


class AccessPolicy:
    """Answers every access question the handlers ask; keyword-only so call sites read clearly."""

    def __init__(self, *, program: ProgramConfig, home_team: str | None = None) -> None:
        self._program = program
        self._admins = frozenset(program.admins)
        self.home_team = home_team  # the workspace Pitcrew is installed in (auth.test), once known

    @property
    def not_a_member(self) -> str:
        return not_a_member(list(self._program.admins))

    def _from_home(self, team: str | None) -> bool:
        # No team said (no Slack request, or Slack left it out) or the home team not yet known: not held against
        # anyone; a team that is known to differ from the home team is another company's workspace.
        return team is None or self.home_team is None or team == self.home_team

    def _admits(self, org: OrgConfig, user_id: str) -> bool:
        """Whether the acting person is `org`'s member `user_id`: listed, and from a team the org accepts."""
        if user_id not in org.members:
            return False
        team = current_team()
        # Strict while the home team is unknown: the org's own list still holds (only a moment at start).
        return not org.slack_teams or team is None or team in org.slack_teams or team == self.home_team

    def is_external(self, team_id: str | None) -> bool:
        """Whether a team is another workspace than the one Pitcrew is installed in (Slack Connect)."""
        return not self._from_home(team_id)

    def is_admin(self, user_id: str) -> bool:
        return user_id in self._admins and self._from_home(current_team())

    def role(self, *, user_id: str, org_id: str) -> Role | None:
        if self.is_admin(user_id):
            return Role.ADMIN
        org = self._program.org(org_id)
        if org is None or not self._admits(org, user_id):
            return None
        return Role(org.members[user_id])

    def is_known(self, user_id: str) -> bool:
        return self.is_admin(user_id) or bool(self.member_orgs(user_id))

    def member_orgs(self, user_id: str) -> list[str]:
        """Orgs the user belongs to as operator or viewer, in program-file order."""
        return [org.id for org in self._program.orgs if self._admits(org, user_id)]

    def visible_orgs(self, user_id: str) -> list[str]:
        if self.is_admin(user_id):
            return [org.id for org in self._program.orgs]
        return self.member_orgs(user_id)

    def decide(self, *, user_id: str, action: Action, org_id: str | None = None) -> Decision:
        if not self.is_known(user_id):
            return Decision(False, self.not_a_member)
        if action is Action.ADMINISTER or org_id is None:
            if self.is_admin(user_id):
                return Decision(True)
            return Decision(False, "Only program admins may do this.")
        role = self.role(user_id=user_id, org_id=org_id)
        if role is None:
            # Same words whether the org exists or not: refusals reveal nothing.
            return Decision(False, f"You have no access to org `{org_id}`.")
        if _RANK[role] >= _RANK[_LEAST_ROLE[action]]:
            return Decision(True)
        return Decision(False, f"Your role in `{org_id}` is {role.value}; this needs {_LEAST_ROLE[action].value}.")

    def may(self, *, user_id: str, action: Action, org_id: str | None = None) -> bool:
        return self.decide(user_id=user_id, action=action, org_id=org_id).allowed

    def default_org(self, *, user_id: str, channel_id: str) -> str | None:
        """The one org a command that acts on an org means when none is named: this channel's org if the
        user may see it, else the user's only org; None when that leaves a choice (an admin, say)."""
        channel_org = self._program.org_by_channel(channel_id)
        if channel_org and self.may(user_id=user_id, action=Action.VIEW, org_id=channel_org.id):
            return channel_org.id
        own = self.member_orgs(user_id)
        return own[0] if len(own) == 1 else None

    def default_orgs(self, *, user_id: str, channel_id: str) -> list[str]:
        """Orgs `/cluster list` with no argument shows (DESIGN.md, Which org)."""
        channel_org = self._program.org_by_channel(channel_id)
        if channel_org and self.may(user_id=user_id, action=Action.VIEW, org_id=channel_org.id):
            return [channel_org.id]
        own = self.member_orgs(user_id)
        if own:
            return own[:1]
        return self.visible_orgs(user_id)  # an admin outside any org channel: all orgs
