"""The Home tab: app_home_opened publishes the person's Home (bot.home.tab); its Open alerts button lists the
org's open alerts in a modal. Launch… (B's launch modal) and Add a record (the /track button) are answered by
their own listeners."""

from __future__ import annotations

import logging
from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.access import Action
from bot.home.render import alerts_modal
from bot.services import Services
from storage.models import Outcome

log = logging.getLogger(__name__)


async def app_home_opened_callback(ack: AsyncAck, event: dict[str, Any], context: dict[str, Any]) -> None:
    await ack()
    services: Services = context["services"]
    user_id = event.get("user")
    if event.get("tab", "home") != "home" or not isinstance(user_id, str) or not user_id or services.home is None:
        return  # the Messages tab, or no Home in this build
    try:
        await services.home.opened(user_id[:24])
    except Exception:  # the Home stays as it was; the next opening tries again
        log.exception("publishing the Home of %s failed", user_id[:24])


async def open_alerts_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger) -> None:
    await ack()
    services: Services = context["services"]
    user_id = body["user"]["id"]
    org_id = str(body["actions"][0].get("value") or "")[:40]
    org = services.program.org(org_id)
    decision = services.access.decide(user_id=user_id, action=Action.VIEW, org_id=org_id)
    refused = not decision.allowed or org is None or services.home is None
    services.audit.record(
        at=services.clock(),
        user_id=user_id,
        channel_id="",
        command="home open alerts",
        text=org_id,
        outcome=Outcome.REFUSED if refused else Outcome.ALLOWED,
        org_id=org_id if org else None,
        detail=decision.reason if not decision.allowed else ("" if org else "no such org"),
    )
    if refused or org is None or services.home is None:
        # Home buttons have no response URL: the refreshed Home is the answer (it shows only what they may see).
        if services.home is not None:
            await services.home.opened(user_id)
        return
    alerts = await services.home.open_alerts(org.id)
    view = alerts_modal(org_name=org.name, alerts=alerts, tz=services.tz)
    try:
        await services.poster.open_view(trigger_id=str(body.get("trigger_id") or ""), view=view)
    except Exception:  # an expired trigger (over 3 s): the Home is still there to press again
        logger.exception("opening the open-alerts modal failed")
