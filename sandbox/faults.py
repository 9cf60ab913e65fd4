"""Sandbox faults: fail a HyperPod node on request (`POST /sandbox/fail-node`, the console's button),
so a newcomer sees the node monitor's alert without waiting for real hardware to break.

Works on moto's in-process backends, as the demo runs moto (sandbox.moto_support)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bot.config import ProgramConfig
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
    """What the sandbox page's buttons act on; the demo fills in its simulated training jobs."""

    simulator: TrainingSimulator | None = None


def faults_app(program: ProgramConfig, controls: Controls) -> Any:
    async def job_mode(request: Request) -> JSONResponse:
        try:
            data = await request.json()
        except ValueError:
            data = {}
        mode = str(data.get("mode") or "") if isinstance(data, dict) else ""
        if controls.simulator is None:
            return JSONResponse({"error": "no simulated training jobs in this sandbox"}, status_code=404)
        try:
            jobs = controls.simulator.set_mode(mode)
        except ValueError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        if not jobs:
            return JSONResponse({"error": "every simulated job is already hung or slow; recover them first"}, 409)
        return JSONResponse({"mode": mode, "jobs": jobs})

    async def fail_node(request: Request) -> JSONResponse:
        try:
            data = await request.json()
        except ValueError:
            data = {}
        org_id = data.get("org") if isinstance(data, dict) else None
        try:
            failed = fail_a_node(program, org_id=str(org_id) if org_id else None)
        except LookupError as error:
            return JSONResponse({"error": str(error)}, status_code=404)
        return JSONResponse(failed)

    return Starlette(
        routes=[
            Route("/sandbox/fail-node", fail_node, methods=["POST"]),
            Route("/sandbox/job", job_mode, methods=["POST"]),
        ]
    )
