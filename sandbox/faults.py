"""Sandbox faults: fail a HyperPod node on request (`POST /sandbox/fail-node`, the console's button),
so a newcomer sees the node monitor's alert without waiting for real hardware to break; hang, slow or
recover a simulated training job (`POST /sandbox/job`); and the culprit buttons (`POST /sandbox/culprit`:
a throttled GPU, a degraded EFA link, a starved data loader, a stuck NeuronCore, ECC errors on a Trainium
device: sandbox.culprits), whose node metrics Prometheus scrapes at `GET /sandbox/node-metrics`.

Works on moto's in-process backends, as the demo runs moto (sandbox.moto_support)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from bot.config import ProgramConfig
from sandbox.culprits import SCRAPE_PATH, CulpritBusy, SandboxNodeMetrics
from sandbox.moto_support import set_hyperpod_node_status
from sandbox.training import TrainingSimulator

FAULTS = (
    "GPU XID 79: GPU has fallen off the bus (sandbox fault)",
    "EFA link down on rdmap0s31 (sandbox fault)",
    "Uncorrectable ECC error in HBM (sandbox fault)",
)


def fail_a_node(
    program: ProgramConfig, *, org_id: str | None = None, rng: random.Random | None = None
) -> dict[str, str]:
    """Set a Running worker node of a HyperPod cluster to Failure; which one it was."""
    from moto.sagemaker.models import sagemaker_backends

    rng = rng or random.Random()
    orgs = [org for org in program.orgs if org.id == org_id] or list(program.orgs)  # not an org's channel: any
    candidates = []
    for org in orgs:
        backend = sagemaker_backends[org.aws.account_id][org.aws.region]
        for name, cluster in list(backend.clusters.items()):
            for node_id, node in list(cluster.nodes.items()):
                if node.status == "Running" and "controller" not in node.instance_group_name:
                    candidates.append((org, name, node_id))
    if not candidates:
        raise LookupError(f"no Running HyperPod worker node in {org_id or 'any org'}")
    org, name, node_id = rng.choice(candidates)
    message = rng.choice(FAULTS)
    set_hyperpod_node_status(org.aws.account_id, org.aws.region, name, node_id, "Failure", message)
    return {"org": org.id, "cluster": name, "node": node_id, "message": message}


@dataclass
class Controls:
    """What the sandbox page's buttons act on: the demo fills in its simulated training jobs, and the sandbox
    its node metrics when its Prometheus runs (else `no_metrics` says why not and how to get them)."""

    simulator: TrainingSimulator | None = None
    node_metrics: SandboxNodeMetrics | None = None
    no_metrics: str = "this sandbox was started without node metrics"


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def faults_app(program: ProgramConfig, controls: Controls) -> Any:
    """The sandbox's fault endpoints. `program`: the bot's (its thresholds say when an alert will come)."""

    async def job_mode(request: Request) -> JSONResponse:
        mode = str((await _json_object(request)).get("mode") or "")
        if controls.simulator is None:
            return JSONResponse({"error": "no simulated training jobs in this sandbox"}, status_code=404)
        try:
            jobs = controls.simulator.set_mode(mode)
        except ValueError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        recovered = controls.node_metrics.recover() if controls.node_metrics and mode == "healthy" else []
        if not jobs:
            return JSONResponse({"error": "every simulated job is already hung or slow; recover them first"}, 409)
        return JSONResponse({"mode": mode, "jobs": jobs, "node_metrics_recovered": recovered})

    async def fail_node(request: Request) -> JSONResponse:
        org_id = (await _json_object(request)).get("org")
        try:
            failed = fail_a_node(program, org_id=str(org_id) if org_id else None)
        except LookupError as error:
            return JSONResponse({"error": str(error)}, status_code=404)
        return JSONResponse(failed)

    async def culprit(request: Request) -> JSONResponse:
        """`{"cause": "thermal" | "network" | "input" | "stuck_core" | "ecc", "org": optional}`: inject it (the
        last two on a Trainium cluster), slow its job down."""
        data = await _json_object(request)
        if controls.node_metrics is None:
            return JSONResponse({"error": f"no node metrics: {controls.no_metrics}"}, status_code=404)
        org_id = data.get("org")
        try:
            done = controls.node_metrics.inject(
                str(data.get("cause") or ""), org_id=str(org_id) if org_id else None, program=program
            )
        except ValueError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        except LookupError as error:
            return JSONResponse({"error": str(error)}, status_code=404)
        except CulpritBusy as error:
            return JSONResponse({"error": str(error)}, status_code=409)
        return JSONResponse(
            {
                "org": done.org,
                "cluster": done.cluster,
                "job": done.job,
                "cause": done.cause.value,
                "node": done.node,
                "gpu": done.gpu,
                "factor": done.factor,
                "alert_in_seconds": done.alert_in.total_seconds(),
                "message": done.message(),
            }
        )

    async def node_metrics(_request: Request) -> PlainTextResponse:
        if controls.node_metrics is None:
            return PlainTextResponse(f"no node metrics: {controls.no_metrics}\n", status_code=404)
        return PlainTextResponse(controls.node_metrics.scrape(), media_type="text/plain; version=0.0.4")

    return Starlette(
        routes=[
            Route("/sandbox/fail-node", fail_node, methods=["POST"]),
            Route("/sandbox/job", job_mode, methods=["POST"]),
            Route("/sandbox/culprit", culprit, methods=["POST"]),
            Route(SCRAPE_PATH, node_metrics, methods=["GET"]),
        ]
    )
