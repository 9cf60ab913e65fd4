"""Per-org bearer tokens for the ingest API. A token is printed once (`pitcrew token create ORG`); only its
sha256 is stored, so a leaked database reveals no usable token."""

from __future__ import annotations

import hashlib
import secrets

from storage import crud
from storage.db import Database
from storage.models import ApiToken, utcnow

TOKEN_PREFIX = "pct_"  # "pitcrew token": recognisable in a config file or a secret scanner's rules
PREFIX_SHOWN = 12  # characters of a token kept in clear, to tell tokens apart in lists


def new_token() -> str:
    """A fresh random token: "pct_" and 43 URL-safe characters (256 bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The sha256 hex of a token: what is stored and looked up."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


async def create_token(db: Database, *, org_id: str, created_by: str) -> str:
    """Create and store (as a hash) a token of one org; returns the token, to be shown once."""
    token = new_token()
    row = ApiToken(
        org_id=org_id,
        token_hash=hash_token(token),
        prefix=token[:PREFIX_SHOWN],
        created_at=utcnow(),
        created_by=created_by[:64],
    )
    async with db.session() as session:
        await crud.add_token(session, token=row)
    return token


async def org_for_token(db: Database, token: str) -> str | None:
    """The org a token belongs to; None for an unknown or revoked token."""
    if not token:
        return None
    async with db.session() as session:
        row = await crud.token_by_hash(session, token_hash=hash_token(token))
    return row.org_id if row is not None else None


async def list_tokens(db: Database, *, org_id: str) -> list[ApiToken]:
    async with db.session() as session:
        return list(await crud.org_tokens(session, org_id=org_id))


async def revoke_token(db: Database, *, prefix: str) -> int:
    """Revoke a token by the prefix `pitcrew token list` shows; its next request gets 401."""
    async with db.session() as session:
        return await crud.revoke_tokens(session, prefix=prefix, at=utcnow())
