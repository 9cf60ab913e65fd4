"""The throughput ingest endpoint: `POST /api/v1/throughput`, authenticated with a per-org bearer token.

Answers: 202 {"accepted": n, "duplicates": m} (n stored now; m already stored, or repeated in the batch: a
retried batch is stored once); 400/403 {"error": ..., "errors": [{"index"?, "reason"}]} with nothing stored,
naming every bad sample whatever is wrong with it (403 only when all that is wrong is samples of another org);
401 {"error": ...} without a valid token; 413 for a body over MAX_BODY_BYTES (gzip-decoded, if sent with
`Content-Encoding: gzip`); 415 for any other Content-Encoding; 500 {"error": "internal
error; logged"} for anything unexpected (never a stack trace).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.ingest.known_clusters import KnownClusters
from bot.ingest.samples import MAX_BATCH, IngestRefused, read_batch
from bot.ingest.tokens import org_for_token
from storage import crud
from storage.db import Database
from storage.models import ThroughputSample

log = logging.getLogger(__name__)

PATH = "/api/v1/throughput"
MAX_BODY_BYTES = 1024 * 1024  # 1000 samples of ~200 bytes each fit with room to spare
HOW_TO_GET_A_TOKEN = (
    "send 'Authorization: Bearer <token>' with your org's ingest token; "
    "program staff create one with `pitcrew token create ORG` (it is shown once)"
)

SamplesHook = Callable[[list[ThroughputSample]], Awaitable[None]]


def _error(status: int, message: str, **extra: object) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="pitcrew"'} if status == 401 else None
    return JSONResponse({"error": message, **extra}, status_code=status, headers=headers)


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class _TooLarge(Exception):
    pass


class _BadEncoding(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


ENCODINGS = ("gzip", "identity")


def _encodings(request: Request) -> list[str]:
    """The body's Content-Encoding, in the order applied (gzip and identity only: anything else is 415)."""
    codings = [c.strip().lower() for c in request.headers.get("content-encoding", "").split(",") if c.strip()]
    unknown = [c for c in codings if c not in ENCODINGS and c != "x-gzip"]
    if unknown:
        raise _BadEncoding(
            415,
            f"Content-Encoding {', '.join(unknown)} is not supported; send the JSON as is, or gzip it "
            "(Content-Encoding: gzip)",
        )
    return [c for c in codings if c != "identity"]


def _gunzip(data: bytes) -> bytes:
    """One gzip layer undone, never more than MAX_BODY_BYTES out (a small bomb must not fill memory)."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_BODY_BYTES + 1)
    except zlib.error as error:
        raise _BadEncoding(400, f"the body says Content-Encoding: gzip but is not gzip data ({error})") from None
    if len(out) > MAX_BODY_BYTES:
        raise _TooLarge
    if not inflater.eof:
        raise _BadEncoding(400, "the body says Content-Encoding: gzip but its gzip data is cut short")
    return out


async def _body(request: Request) -> bytes:
    codings = _encodings(request)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _TooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _TooLarge
        chunks.append(chunk)
    body = b"".join(chunks)
    for _ in reversed(codings):
        body = _gunzip(body)
    return body


def ingest_routes(
    *,
    db: Database,
    clock: Callable[[], datetime],
    max_age: timedelta,
    clusters: KnownClusters,
    on_samples: SamplesHook | None = None,
) -> list[Route]:
    """The ingest route, to mount on the app. `clock` gives aware UTC now; `max_age` is the oldest sample
    accepted (the raw retention); `clusters` says which clusters the token's org has (a sample for another
    is refused). `on_samples` (the live detector) gets the newly stored samples of each batch after the
    answer is sent (not those a retry sent again); its errors are logged, never returned to the sender."""

    async def after_storing(samples: list[ThroughputSample]) -> None:
        if on_samples is None:
            return
        try:
            await on_samples(samples)
        except Exception:
            log.exception("the throughput hook failed on %d stored sample(s)", len(samples))

    async def post_throughput(request: Request) -> Response:
        try:
            token = _bearer(request)
            if token is None:
                return _error(401, f"missing bearer token: {HOW_TO_GET_A_TOKEN}")
            org_id = await org_for_token(db, token)
            if org_id is None:
                return _error(401, f"unknown or revoked token: {HOW_TO_GET_A_TOKEN}")
            try:
                body = await _body(request)
            except _TooLarge:
                return _error(
                    413, f"body larger than {MAX_BODY_BYTES} bytes; send at most {MAX_BATCH} samples per request"
                )
            except _BadEncoding as bad:
                return _error(bad.status, f"{bad.message}; nothing stored", errors=[{"reason": bad.message}])
            try:
                batch = read_batch(body, org_id=org_id, now=clock(), max_age=max_age)
                # Checked even when other samples are bad already: the refusal names every problem at once.
                known = await clusters.check(org_id, batch.clusters)
                batch.check_clusters(unknown=known.unknown, clusters=known.clusters)
                samples = batch.samples()
            except IngestRefused as refused:
                return _error(refused.status, _summary(refused), errors=refused.errors)
            async with db.session() as session:
                stored = await crud.store_samples(session, samples=samples)
            return JSONResponse(
                {"accepted": len(stored), "duplicates": len(samples) - len(stored)},
                status_code=202,
                background=BackgroundTask(after_storing, stored) if on_samples and stored else None,
            )
        except Exception:
            log.exception("throughput ingest failed")
            return _error(500, "internal error; logged")

    return [Route(PATH, post_throughput, methods=["POST"])]


def _summary(refused: IngestRefused) -> str:
    bad = [e for e in refused.errors if "index" in e]
    if refused.status == 403:
        return f"{len(bad)} sample(s) name another org than this token's; nothing stored"
    if bad:
        return f"{len(bad)} sample(s) refused, so the request was refused; nothing stored"
    return f"{refused.errors[0]['reason']}; nothing stored"
