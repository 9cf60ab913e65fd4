"""Benchmark (not a test): how soon a failed node is alerted in Slack, by each of the monitor's two paths.

- Sweep path: a node's status is set to Failure in moto; the alert comes with the next sweep
  (every `node_sweep_seconds`, here 10 s, the smallest the program file allows).
- Event path: the same, plus the EventBridge event SageMaker would send ("Cluster Node Health Event"),
  put on the default bus and delivered by a rule to the queue Pitcrew long-polls.

Both run in the same process and the same run, alternating, on the sandbox (moto seeded with the example
program, local Slack, Pitcrew with its monitor on). Measured: from the status change to the alert message
in the org's channel of the local Slack. After each round the node is set back to Running (with a Healthy
event) and the bench waits for the recovery edit, so rounds do not overlap.

    .venv/bin/python bench/alert_latency.py [--rounds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config import MonitorConfig, ProgramConfig, load_program
from sandbox.moto_support import set_hyperpod_node_status, start_moto_server
from sandbox.seed import seed_program
from sandbox.slack import Message
from sandbox.world import EXAMPLE_PROGRAM, aws_environment, run_sandbox

ACCOUNT, REGION, CLUSTER, KUMO = "111111111111", "us-east-1", "kumo-p5-train", "C0KUMOLAB"
SWEEP_SECONDS = 10
PATTERN = {
    "source": ["aws.sagemaker"],
    "detail-type": ["SageMaker HyperPod Cluster Node Health Event", "SageMaker HyperPod Cluster State Change"],
}


def wire_queue() -> tuple[Any, str]:
    sqs, events = boto3.client("sqs", region_name=REGION), boto3.client("events", region_name=REGION)
    url = sqs.create_queue(QueueName="pitcrew-bench-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="pitcrew-bench", EventPattern=json.dumps(PATTERN), State="ENABLED")
    events.put_targets(Rule="pitcrew-bench", Targets=[{"Id": "q", "Arn": arn}])
    return events, url


def health_event(events: Any, node: str, healthy: bool) -> None:
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/bench"
    detail = {
        "ClusterName": CLUSTER,
        "ClusterArn": arn,
        "InstanceId": node,
        "HealthSummary": {
            "HealthStatus": "Healthy" if healthy else "Unhealthy",
            "HealthStatusReason": "" if healthy else "XidHardwareFailure",
            "RepairAction": "None" if healthy else "Replace",
        },
    }
    entry = {
        "Source": "aws.sagemaker",
        "DetailType": "SageMaker HyperPod Cluster Node Health Event",
        "Detail": json.dumps(detail),
        "Resources": [arn],
    }
    assert events.put_events(Entries=[entry])["FailedEntryCount"] == 0


def workers() -> list[str]:
    from moto.sagemaker.models import sagemaker_backends

    cluster = sagemaker_backends[ACCOUNT][REGION].clusters[CLUSTER]
    return [i for i, n in cluster.nodes.items() if n.status == "Running" and "worker" in n.instance_group_name]


def alert_for(node: str, *, recovered: bool = False) -> Any:
    def matches(m: Message) -> bool:
        return m.channel == KUMO and m.thread_ts is None and node in m.text and (not recovered or "Recovered" in m.text)

    return matches


async def measure(rounds: int) -> None:
    events, queue_url = wire_queue()

    def transform(program: ProgramConfig) -> ProgramConfig:
        config = MonitorConfig(node_sweep_seconds=SWEEP_SECONDS, event_queue_url=queue_url)
        return program.model_copy(update={"monitor": config})

    async with run_sandbox(monitor=True, program_transform=transform) as world:
        await world.pitcrew.ready.wait()
        await asyncio.sleep(8)  # the first sweep alerts the seeded failures; start after it
        times: dict[str, list[float]] = {"sweep": [], "event": []}
        nodes = workers()
        rng = random.Random(7)
        for round_ in range(rounds * 2):
            path = "event" if round_ % 2 else "sweep"
            node = nodes[round_]
            # A random moment in the sweep cycle: rounds would otherwise lock to the sweep's phase.
            await asyncio.sleep(rng.uniform(0, SWEEP_SECONDS))
            started = time.perf_counter()
            set_hyperpod_node_status(ACCOUNT, REGION, CLUSTER, node, "Failure", "GPU XID 79 (bench)")
            if path == "event":
                health_event(events, node, healthy=False)
            await world.slack.wait_for(alert_for(node), timeout=SWEEP_SECONDS * 3)
            times[path].append(time.perf_counter() - started)
            set_hyperpod_node_status(ACCOUNT, REGION, CLUSTER, node, "Running")
            health_event(events, node, healthy=True)
            await world.slack.wait_for(alert_for(node, recovered=True), timeout=SWEEP_SECONDS * 3)
        print(f"\n{rounds} rounds per path, sweep every {SWEEP_SECONDS} s; status change -> alert in #kumo-labs")
        for path, values in times.items():
            print(
                f"{path:<6} p50 {statistics.median(values):6.2f} s   min {min(values):6.2f} s   "
                f"max {max(values):6.2f} s   ({', '.join(f'{v:.2f}' for v in values)})"
            )
        ratio = statistics.median(times["sweep"]) / statistics.median(times["event"])
        print(f"sweep p50 / event p50: x{ratio:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    print(f"{platform.node()} · {platform.machine()} · {os.cpu_count()} cpus · Python {platform.python_version()}")
    server, endpoint = start_moto_server()
    try:
        with aws_environment(endpoint):
            seed_program(load_program(EXAMPLE_PROGRAM), endpoint_url=endpoint)
            asyncio.run(measure(args.rounds))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
