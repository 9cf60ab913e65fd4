"""A stop that meets a listing under way (its caller cancelled: the Home's, a command's) lets it finish before the
ParallelCluster API's HTTP client closes, instead of failing it and logging the org's listing as failed."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.clusters.fleet import Fleet
from sandbox.world import Sandbox
from tests.clusters.test_fleet import InFlight, counting_accounts
from tests.waiting import wait_for

PCLUSTER_API_ORG = "kumo-labs"  # read through its ParallelCluster API: HTTP GETs around an EC2 call


async def test_a_stop_lets_a_cancelled_callers_listing_finish_before_its_client_closes(
    sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    org = sandbox.program.org(PCLUSTER_API_ORG)
    assert org is not None and org.aws.parallelcluster_api
    wire = InFlight()
    # Each AWS request takes 0.3 s more: the listing's EC2 call (DescribeInstanceStatus) is on the wire, with the
    # configuration GET still to come over the HTTP client, when the caller is cancelled and the stop begins.
    accounts, _ = counting_accounts(network_delay=0.3, in_flight=wire)
    fleet = Fleet(program=sandbox.program, accounts=accounts, cache_seconds=0)
    await fleet.warm()
    listing = asyncio.create_task(fleet.list_orgs([PCLUSTER_API_ORG], fresh=True))
    await wait_for(lambda: wire.now > 0, timeout=30, what="the listing's AWS call on the wire")
    listing.cancel()
    with caplog.at_level(logging.WARNING, logger="bot.clusters.fleet"):
        await fleet.aclose()
    assert wire.now == 0, "the listing under way finished before the client closed"
    assert not [r.getMessage() for r in caplog.records], "no listing failed at the stop"
