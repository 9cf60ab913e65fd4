"""ParallelCluster changes: resize_queue (pure), and the API backend's update, compute fleet, delete and
configuration against the sandbox's API emulator over HTTP (SigV4, every request checked against the spec).

The emulator's clusters live in an account of their own, outside the example program, so the EC2 instances
they leave behind (moto keeps terminated ones) never show up in another test's fleet.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

import boto3
import httpx
import pytest
import yaml
from botocore.credentials import Credentials

from bot.clusters.hyperpod import GroupNotFound
from bot.clusters.model import ClusterNotFound
from bot.clusters.parallelcluster import (
    ParallelClusterApiBackend,
    ParallelClusterApiError,
    QueueResize,
    resize_queue,
)
from sandbox.asgi_server import serve_asgi
from sandbox.pcluster_api import FLEET_STOP_RULE, RESIZE_RULE, ParallelClusterApi

ACCOUNT = "246813579024"  # in no org of the example program
REGION = "us-east-1"
NAME = "kumo-pc-changes"
T = TypeVar("T")

# What real ParallelCluster (cli/src/pcluster/config/update_policy.py, 3.12) answers, fail reason and action
# joined as its API controller joins them.
REAL_RESIZE = (
    "All compute nodes must be stopped or QueueUpdateStrategy must be set to TERMINATE. Stop the compute fleet or "
    "set QueueUpdateStrategy:TERMINATE in config to remove nodes from the scheduler, terminate the associated "
    "instances & any running jobs"
)
REAL_FLEET_STOP = (
    "All compute nodes must be stopped. Stop the compute fleet with the pcluster update-compute-fleet command"
)
REAL_UNSUPPORTED = (
    "Update actions are not currently supported for the 'HeadNode.InstanceType' parameter. Restore "
    "'HeadNode.InstanceType' value to 'm5.8xlarge'. If you need this change, please consider creating a new "
    "cluster instead of updating the existing one."
)


def config(gpu: int = 2, *, head_type: str = "m5.8xlarge") -> str:
    """A configuration as Pitcrew's templates render one: a static GPU queue, a CPU queue with two resources."""
    document = {
        "Region": REGION,
        "Image": {"Os": "ubuntu2204"},
        "HeadNode": {
            "InstanceType": head_type,
            "Networking": {"SubnetId": "subnet-0123456789abcdef0"},
            "Ssh": {"KeyName": "kumo-ops"},
        },
        "Scheduling": {
            "Scheduler": "slurm",
            "SlurmSettings": {"QueueUpdateStrategy": "DRAIN"},
            "SlurmQueues": [
                {
                    "Name": "gpu",
                    "CapacityType": "ONDEMAND",
                    "Networking": {"SubnetIds": ["subnet-0123456789abcdef0"], "PlacementGroup": {"Enabled": False}},
                    "ComputeResources": [
                        {
                            "Name": "p5",
                            "InstanceType": "p5.48xlarge",
                            "MinCount": gpu,
                            "MaxCount": gpu,
                            "Efa": {"Enabled": True},
                        }
                    ],
                },
                {
                    "Name": "cpu",
                    "Networking": {"SubnetIds": ["subnet-0123456789abcdef0"]},
                    "ComputeResources": [
                        {"Name": "c5", "InstanceType": "c5.xlarge", "MinCount": 1, "MaxCount": 2},
                        {"Name": "m5", "Instances": [{"InstanceType": "m5.2xlarge"}], "MinCount": 0, "MaxCount": 4},
                    ],
                },
            ],
        },
        "Tags": [{"Key": "pitcrew:org", "Value": "kumo-labs"}],
    }
    return str(yaml.safe_dump(document, sort_keys=False))


# --- resize_queue ----------------------------------------------------------------------------------------


def _resources(text: str) -> dict[str, tuple[int, int]]:
    loaded = yaml.safe_load(text)
    return {
        f"{queue['Name']}/{resource['Name']}": (resource["MinCount"], resource["MaxCount"])
        for queue in loaded["Scheduling"]["SlurmQueues"]
        for resource in queue["ComputeResources"]
    }


def test_resize_a_queue_with_one_compute_resource() -> None:
    original = config(2)
    resize = resize_queue(original, group="gpu", count=6)
    assert resize == QueueResize(
        configuration=resize.configuration,
        queue="gpu",
        compute_resource="p5",
        instance_type="p5.48xlarge",
        before=2,
        after=6,
    )
    assert _resources(resize.configuration) == {"gpu/p5": (6, 6), "cpu/c5": (1, 2), "cpu/m5": (0, 4)}
    assert _resources(original)["gpu/p5"] == (2, 2)  # the input is not touched


def test_resize_names_queue_and_resource() -> None:
    resize = resize_queue(config(), group="cpu/m5", count=3)
    assert (resize.queue, resize.compute_resource, resize.instance_type, resize.before, resize.after) == (
        "cpu",
        "m5",
        "m5.2xlarge",  # from Instances, the flexible form
        0,
        3,
    )
    assert _resources(resize.configuration) == {"gpu/p5": (2, 2), "cpu/c5": (1, 2), "cpu/m5": (3, 3)}
    assert resize_queue(config(), group="gpu/p5", count=0).after == 0


def test_resize_refusals_name_the_choices() -> None:
    with pytest.raises(GroupNotFound) as unknown_queue:
        resize_queue(config(), group="trn", count=2)
    assert str(unknown_queue.value) == "The cluster has no Slurm queue trn; its queues: gpu, cpu."
    with pytest.raises(GroupNotFound) as ambiguous:
        resize_queue(config(), group="cpu", count=2)
    assert str(ambiguous.value) == "Queue cpu has 2 compute resources; name one of them: cpu/c5, cpu/m5."
    with pytest.raises(GroupNotFound) as unknown_resource:
        resize_queue(config(), group="cpu/g5", count=2)
    assert str(unknown_resource.value) == "Queue cpu has no compute resource g5; its resources: cpu/c5, cpu/m5."
    with pytest.raises(ValueError):
        resize_queue(config(), group="gpu", count=-1)


def test_resize_keeps_everything_else() -> None:
    original = config(2)
    resize = resize_queue(original, group="gpu", count=4)
    before, after = yaml.safe_load(original), yaml.safe_load(resize.configuration)
    resource = after["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]
    assert list(resource) == ["Name", "InstanceType", "MinCount", "MaxCount", "Efa"]  # key order kept
    resource["MinCount"] = resource["MaxCount"] = 2
    assert after == before
    assert list(after) == list(before)
    assert resize_queue(resize.configuration, group="gpu", count=2).configuration == original  # round trip


# --- ParallelClusterApiError.needs_fleet_stop -------------------------------------------------------------


def test_needs_fleet_stop_reads_parallelclusters_words() -> None:
    assert ParallelClusterApiError(400, "Update failure").update_errors == ()  # the old constructor still works
    assert not ParallelClusterApiError(400, "Update failure").needs_fleet_stop
    for words in ((REAL_RESIZE,), (REAL_FLEET_STOP,), (RESIZE_RULE,), (FLEET_STOP_RULE,), (REAL_RESIZE, RESIZE_RULE)):
        assert ParallelClusterApiError(400, "Update failure", words).needs_fleet_stop, words
    # Stopping the fleet would not get an unsupported change through.
    assert not ParallelClusterApiError(400, "Update failure", (REAL_UNSUPPORTED,)).needs_fleet_stop
    assert not ParallelClusterApiError(400, "Update failure", (REAL_RESIZE, REAL_UNSUPPORTED)).needs_fleet_stop


# --- against the emulator --------------------------------------------------------------------------------


class Clock:
    """A clock that stands still: the emulator's operations finish only when a test advances them."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Emulated:
    api: ParallelClusterApi
    backend: ParallelClusterApiBackend
    make_backend: Callable[[str, bool], ParallelClusterApiBackend]  # (org id, shared account)

    async def run(self, work: Callable[[], T]) -> T:
        """The backend is synchronous (a worker thread in the bot); the emulator serves on this loop."""
        return await asyncio.to_thread(work)

    def advance(self) -> str | None:
        return self.api.advance(ACCOUNT, REGION, NAME)

    def status(self) -> tuple[str, str]:
        cluster = self.backend.get_cluster(NAME)
        return cluster.status, cluster.extra["compute_fleet"]


@pytest.fixture
async def emulated(moto_endpoint: str) -> AsyncIterator[Emulated]:
    sts = boto3.client("sts", region_name=REGION)
    issued = sts.assume_role(
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/PitcrewOps", RoleSessionName="pitcrew-test", ExternalId="pitcrew-test"
    )["Credentials"]
    creds = Credentials(issued["AccessKeyId"], issued["SecretAccessKey"], issued["SessionToken"])
    ec2 = boto3.client(
        "ec2",
        region_name=REGION,
        aws_access_key_id=creds.access_key,
        aws_secret_access_key=creds.secret_key,
        aws_session_token=creds.token,
    )
    clock = Clock()
    api = ParallelClusterApi(progress_seconds=10, clock=clock)
    assert api.checks_spec
    async with serve_asgi(api) as base:
        with httpx.Client(timeout=10) as http:

            def make_backend(org_id: str, shared: bool) -> ParallelClusterApiBackend:
                return ParallelClusterApiBackend(
                    org_id=org_id,
                    api_url=api.api_url(base, ACCOUNT, REGION),
                    region=REGION,
                    credentials=lambda: creds,
                    ec2=ec2,
                    http=http,
                    shared_account=shared,
                )

            backend = make_backend("kumo-labs", False)
            emulated = Emulated(api, backend, make_backend)
            try:
                yield emulated
            finally:
                with contextlib.suppress(ClusterNotFound):  # the test deleted it
                    await emulated.run(lambda: backend.delete(name=NAME))
                api.advance(ACCOUNT, REGION)
    # Pitcrew's requests were all on the spec, and so were the emulator's answers.
    assert api.spec_violations == []


async def _created(emulated: Emulated, gpu: int = 2) -> None:
    await emulated.run(lambda: emulated.backend.create(name=NAME, configuration=config(gpu)))
    assert emulated.advance() == "CREATE_COMPLETE"


async def test_configuration_is_the_stored_yaml(emulated: Emulated) -> None:
    await _created(emulated)
    assert await emulated.run(lambda: emulated.backend.configuration(NAME)) == config(2)
    with pytest.raises(ClusterNotFound):
        await emulated.run(lambda: emulated.backend.configuration("no-such-cluster"))


async def test_grow_is_accepted_live(emulated: Emulated) -> None:
    await _created(emulated)
    backend = emulated.backend
    resize = resize_queue(await emulated.run(lambda: backend.configuration(NAME)), group="gpu", count=4)
    change_set = await emulated.run(lambda: backend.update(name=NAME, configuration=resize.configuration))
    gpu = "Scheduling.SlurmQueues[gpu].ComputeResources[p5]"
    assert change_set == [
        {"parameter": f"{gpu}.MinCount", "currentValue": "2", "requestedValue": "4"},
        {"parameter": f"{gpu}.MaxCount", "currentValue": "2", "requestedValue": "4"},
    ]
    assert await emulated.run(emulated.status) == ("UPDATE_IN_PROGRESS", "RUNNING")
    assert await emulated.run(lambda: backend.configuration(NAME)) == resize.configuration
    assert emulated.advance() == "UPDATE_COMPLETE"
    cluster = await emulated.run(lambda: backend.get_cluster(NAME))
    assert [group.target for group in cluster.groups if group.name == "gpu"] == [4]


async def test_dry_run_only_changes_nothing(emulated: Emulated) -> None:
    await _created(emulated)
    backend = emulated.backend
    resize = resize_queue(config(2), group="gpu", count=3)
    change_set = await emulated.run(
        lambda: backend.update(name=NAME, configuration=resize.configuration, dryrun_only=True)
    )
    assert len(change_set) == 2
    assert await emulated.run(emulated.status) == ("CREATE_COMPLETE", "RUNNING")
    assert await emulated.run(lambda: backend.configuration(NAME)) == config(2)


async def test_shrink_needs_the_fleet_stopped(emulated: Emulated) -> None:
    await _created(emulated, gpu=4)
    backend = emulated.backend
    resize = resize_queue(config(4), group="gpu", count=1)
    with pytest.raises(ParallelClusterApiError) as refused:
        await emulated.run(lambda: backend.update(name=NAME, configuration=resize.configuration))
    assert refused.value.status == 400
    assert refused.value.needs_fleet_stop
    assert len(refused.value.update_errors) == 2  # MinCount and MaxCount both shrink
    assert await emulated.run(emulated.status) == ("CREATE_COMPLETE", "RUNNING")  # nothing changed

    await emulated.run(lambda: backend.set_compute_fleet(name=NAME, status="STOP_REQUESTED"))
    assert await emulated.run(emulated.status) == ("CREATE_COMPLETE", "STOP_REQUESTED")
    emulated.advance()
    assert await emulated.run(emulated.status) == ("CREATE_COMPLETE", "STOPPED")

    change_set = await emulated.run(lambda: backend.update(name=NAME, configuration=resize.configuration))
    assert [change["requestedValue"] for change in change_set] == ["1", "1"]
    assert emulated.advance() == "UPDATE_COMPLETE"
    await emulated.run(lambda: backend.set_compute_fleet(name=NAME, status="START_REQUESTED"))
    emulated.advance()
    cluster = await emulated.run(lambda: backend.get_cluster(NAME))
    assert cluster.extra["compute_fleet"] == "RUNNING"
    assert sum(node.group == "gpu" for node in cluster.nodes) == 1


async def test_other_refusals_do_not_ask_for_a_fleet_stop(emulated: Emulated) -> None:
    await _created(emulated)
    backend = emulated.backend
    with pytest.raises(ParallelClusterApiError) as unsupported:
        await emulated.run(lambda: backend.update(name=NAME, configuration=config(2, head_type="m5.12xlarge")))
    assert not unsupported.value.needs_fleet_stop
    assert "HeadNode.InstanceType" in str(unsupported.value)
    with pytest.raises(ParallelClusterApiError) as unchanged:
        await emulated.run(lambda: backend.update(name=NAME, configuration=config(2)))
    assert "No changes found" in str(unchanged.value)
    assert not unchanged.value.needs_fleet_stop
    with pytest.raises(ParallelClusterApiError) as batch_only:
        await emulated.run(lambda: backend.set_compute_fleet(name=NAME, status="DISABLED"))
    assert batch_only.value.status == 400
    for change in (
        lambda: backend.update(name="no-such-cluster", configuration=config()),
        lambda: backend.set_compute_fleet(name="no-such-cluster", status="STOP_REQUESTED"),
        lambda: backend.delete(name="no-such-cluster"),
    ):
        with pytest.raises(ClusterNotFound):
            await emulated.run(change)


async def test_delete(emulated: Emulated) -> None:
    await _created(emulated)
    backend = emulated.backend
    await emulated.run(lambda: backend.delete(name=NAME))
    assert (await emulated.run(emulated.status))[0] == "DELETE_IN_PROGRESS"
    await emulated.run(lambda: backend.delete(name=NAME))  # again while it goes: still 202
    assert emulated.advance() is None
    with pytest.raises(ClusterNotFound):
        await emulated.run(lambda: backend.delete(name=NAME))
    with pytest.raises(ClusterNotFound):
        await emulated.run(lambda: backend.get_cluster(NAME))


async def test_another_orgs_cluster_in_a_shared_account_is_not_changed(emulated: Emulated) -> None:
    await _created(emulated)
    theirs = emulated.make_backend("sakura-ai", True)
    for change in (
        lambda: theirs.update(name=NAME, configuration=config(3)),
        lambda: theirs.set_compute_fleet(name=NAME, status="STOP_REQUESTED"),
        lambda: theirs.delete(name=NAME),
        lambda: theirs.configuration(NAME),
    ):
        with pytest.raises(ClusterNotFound):
            await emulated.run(change)
    assert await emulated.run(emulated.status) == ("CREATE_COMPLETE", "RUNNING")
