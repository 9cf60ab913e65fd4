"""Pitcrew against moto with IAM enforcement on: Pitcrew runs as an IAM user of its own account (123456789012),
and each org's role is what `pitcrew onboard` prints, deployed through moto's CloudFormation into the org's account.

Why the suite's moto and not a second server: moto keeps its state, and the switch that turns enforcement on, in
module globals of this process, so a second in-process server would share both; and the sandbox's ParallelCluster
API emulator reads that in-process state, so a server in another process could not serve the sandbox. Instead,
enforcement is on only inside a test (`enforced`), each process runs one test at a time (pytest-xdist included),
and every test here resets moto afterwards, so the next test that needs the seeded program gets it afresh
(tests/conftest.py seeded_aws), without the roles and users made here.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from bot.clusters.accounts import AwsAccounts
from bot.config import MonitorConfig, ProgramConfig, load_program
from bot.iam.onboard import stack_name, template_yaml
from bot.iam.policy import Tier, pitcrew_document
from sandbox.moto_support import hyperpod_progress, reset_moto_server
from sandbox.world import EXAMPLE_PROGRAM, Sandbox
from tests.conftest import SeededAws
from tests.iam.moto_iam import apply_iam_patches, enforcing
from tests.scenarios.conftest import sandbox_factory  # noqa: F401  (the scenarios' fixture, used here too)

PITCREW_ACCOUNT = "123456789012"
PITCREW_USER = "pitcrew"
PRINCIPAL = f"arn:aws:iam::{PITCREW_ACCOUNT}:user/{PITCREW_USER}"
QUEUE = "pitcrew-events"


def in_account(client: Any, account: str) -> Any:
    """Requests of `client` made in `account` (moto's x-moto-account-id header): set-up as the org's admin."""

    def add_header(request: Any, **_: Any) -> None:
        request.headers["x-moto-account-id"] = account

    client.meta.events.register("before-sign", add_header)
    return client


@dataclass
class IamAws:
    endpoint: str
    session: boto3.Session  # Pitcrew's own credentials: the IAM user's access key
    queue_url: str
    calls: list[str] = field(default_factory=list)  # "service.Operation" of every call Pitcrew's clients made

    def program(self, org_ids: Sequence[str]) -> ProgramConfig:
        """The example program with only these orgs (the others have no role in moto) and the events queue."""
        # The sandbox's emulator answers for API `pcluster`, stage `prod` (tests/iam/moto_iam.py, gap (e)): the
        # templates are made for that API, so the scoping to one API and stage is checked too.
        program = load_program(EXAMPLE_PROGRAM).with_aws(
            lambda org: (
                {"parallelcluster_api": f"https://pcluster.execute-api.{org.aws.region}.amazonaws.com/prod"}
                if org.aws.parallelcluster_api
                else {}
            )
        )
        orgs = [org for org in program.orgs if org.id in org_ids]
        return program.model_copy(
            update={"orgs": orgs, "monitor": MonitorConfig(node_sweep_seconds=3600, event_queue_url=self.queue_url)}
        )

    def deploy(self, program: ProgramConfig, org_id: str, tier: Tier) -> str:
        """The org's template, as `pitcrew onboard ORG --principal PRINCIPAL --tier TIER` prints it, deployed in
        the org's account through CloudFormation (before enforcement: as the org's admin would); its RoleArn."""
        org = program.org(org_id)
        assert org is not None
        cfn = in_account(boto3.client("cloudformation", region_name=org.aws.region), org.aws.account_id)
        body = template_yaml(program, org, principal=PRINCIPAL, tier=tier)
        cfn.create_stack(StackName=stack_name(org), TemplateBody=body, Capabilities=["CAPABILITY_NAMED_IAM"])
        (stack,) = cfn.describe_stacks(StackName=stack_name(org))["Stacks"]
        assert stack["StackStatus"] == "CREATE_COMPLETE", stack
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
        assert outputs["RoleArn"] == org.aws.role_arn  # the program file names the role the stack makes
        return outputs["RoleArn"]

    def accounts(self) -> AwsAccounts:
        """Pitcrew's per-org sessions from its own credentials; every call its clients make is recorded."""

        def record(event_name: str, **_: Any) -> None:
            _, service, operation = event_name.split(".", 2)
            # Events name a service by its hyphenized service id; the table, as boto3.client() names it.
            service = {"cloudwatch-logs": "logs"}.get(service, service)
            self.calls.append(f"{service}.{operation}")

        credentials = self.session.get_credentials()
        assert credentials is not None
        session = boto3.Session(
            aws_access_key_id=credentials.access_key,
            aws_secret_access_key=credentials.secret_key,
            region_name="us-east-1",
        )
        session.events.register("before-call", record)  # clients made from the session inherit the handler
        return AwsAccounts(base_session=session)


@pytest.fixture
def iam_aws(seeded_aws: SeededAws, moto_endpoint: str) -> Iterator[IamAws]:
    """The seeded program, Pitcrew's IAM user with what `bot.iam.policy.pitcrew_document` says it needs, and the
    central events queue; moto is reset afterwards (these tests add roles, users and stacks, and change clusters)."""
    apply_iam_patches()
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue_url = sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    iam = boto3.client("iam", region_name="us-east-1")
    iam.create_user(UserName=PITCREW_USER)
    key = iam.create_access_key(UserName=PITCREW_USER)["AccessKey"]
    program = load_program(EXAMPLE_PROGRAM).model_copy(update={"monitor": MonitorConfig(event_queue_url=queue_url)})
    document = pitcrew_document(program)
    iam.put_user_policy(UserName=PITCREW_USER, PolicyName="pitcrew", PolicyDocument=json.dumps(document))
    session = boto3.Session(
        aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"], region_name="us-east-1"
    )
    try:
        with hyperpod_progress(0.3, create_seconds=0.3, delete_seconds=0.3):
            yield IamAws(endpoint=moto_endpoint, session=session, queue_url=queue_url)
    finally:
        reset_moto_server(moto_endpoint)


@contextlib.asynccontextmanager
async def enforced_world(
    make_sandbox: Callable[..., Any],
    iam_aws: IamAws,
    *,
    tier: Tier,
    org_ids: Sequence[str] = ("kumo-labs",),
    **kwargs: Any,
) -> AsyncIterator[Sandbox]:
    """The sandbox with only `org_ids`, each with the tier's role deployed, and IAM enforcement on throughout."""
    program = iam_aws.program(org_ids)
    for org_id in org_ids:
        iam_aws.deploy(program, org_id, tier)

    def only_these(sandboxed: ProgramConfig) -> ProgramConfig:
        orgs = [org for org in sandboxed.orgs if org.id in org_ids]
        return sandboxed.model_copy(update={"orgs": orgs, "monitor": program.monitor})

    with enforcing(iam_aws.endpoint):
        async with make_sandbox(
            accounts=iam_aws.accounts(), program_transform=only_these, pcluster_progress_seconds=0.3, **kwargs
        ) as world:
            await world.pitcrew.ready.wait()
            await world.pitcrew.services.drain()
            world.pitcrew.services.operations.first_poll = 0.2  # seconds here, where AWS takes minutes
            world.pitcrew.services.operations.max_poll = 0.5
            yield world
