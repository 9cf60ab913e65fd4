"""moto 5.2.5 with IAM enforcement, made to judge Pitcrew's roles as AWS would: the gaps filled for the IAM tests.

moto checks every request's keys and the caller's identity policies once enforcement is on (`enforcing`), but:
(a) a role CloudFormation creates keeps its inline `Policies` as dicts, and enforcement then fails with a KeyError
    `policy_document` (a 500): AWS stores policy documents as JSON text, so they are stored as JSON text here;
(b) `AssumeRole` never evaluates the role's trust policy across accounts (moto looks the role up in the caller's
    account), so a wrong ExternalId or principal would be accepted: here the trust policy of a role that exists is
    checked as AWS does (the principal, and `sts:ExternalId` under StringEquals, a missing one included);
(c) moto names an action by the request's signing name and operation, so CloudWatch's calls are
    `monitoring:GetMetricData` and SQS's DeleteMessageBatch is `sqs:DeleteMessageBatch`: here they are named as IAM
    authorizes them (`cloudwatch:...`; an SQS batch as its single action, sqs:DeleteMessage);
(d) moto knows the resource of a request only for SQS, IAM and STS; for every other service it asks about "*", which
    a statement scoped to ARNs never matches, so every scoped grant would be denied: here such a request is
    allowed by a statement whose resources include one in the request's service, account and region (the template
    scopes to exactly these; a finer pattern, such as cluster/*, is not checked);
(e) the sandbox's ParallelCluster API emulator checks signatures but no IAM policy (API Gateway with AWS_IAM
    authorization does): under enforcement, execute-api:Invoke on the route's ARN is checked against the calling
    role's policies, and a refusal is API Gateway's 403.

The patches change moto's classes in this process; (a)-(d) act only under enforcement or on roles with a trust
policy, which only these tests create (and a restore of moto's snapshot removes), so other tests see moto as before.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx

_lock = threading.Lock()
_patched = False
SIGNING_TO_IAM = {"monitoring": "cloudwatch"}  # (c)
BATCH_TO_SINGLE = {  # (c): "permission for a batch action is the permission for its single action" (SQS docs)
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}
RESOURCE_KNOWN = frozenset({"sqs", "iam", "sts", "s3"})  # (d): services moto determines the resource of


def apply_iam_patches() -> None:
    global _patched
    with _lock:
        if _patched:
            return
        _patch_role_policies()
        _patch_assume_role_trust()
        _patch_action_names()
        _patch_unknown_resources()
        _patch_parallelcluster_api()
        _patched = True


@contextlib.contextmanager
def enforcing(endpoint: str) -> Iterator[None]:
    """IAM enforcement on for the block (moto's /moto-api/reset-auth), off again after it whatever happens."""
    base = endpoint.rstrip("/")
    httpx.post(f"{base}/moto-api/reset-auth", content=b"0", timeout=10).raise_for_status()
    try:
        yield
    finally:
        httpx.post(f"{base}/moto-api/reset-auth", content=b"inf", timeout=10).raise_for_status()


def _patch_role_policies() -> None:
    """(a) inline role policies as JSON text, as AWS keeps them."""
    from moto.iam.models import Role

    original = Role.put_policy

    @functools.wraps(original)
    def put_policy(self: Any, policy_name: str, policy_json: Any) -> None:
        original(self, policy_name, policy_json if isinstance(policy_json, str) else json.dumps(policy_json))

    setattr(Role, "put_policy", put_policy)  # noqa: B010


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _caller_arn(access_key_id: str) -> str | None:
    """The IAM user or assumed role behind an access key moto issued, as a trust policy names it."""
    from moto.iam.models import iam_backends
    from moto.sts.models import sts_backends

    for account, partitions in list(iam_backends.items()):
        backend = partitions["aws"]
        for user in list(backend.users.values()):
            if any(key.access_key_id == access_key_id for key in user.access_keys):
                return str(user.arn)
        for assumed in list(sts_backends[account]["aws"].assumed_roles):
            if assumed.access_key_id == access_key_id:
                return str(assumed.role_arn)
    return None


def trust_refusal(trust: dict[str, Any], *, caller: str | None, external_id: str | None) -> str | None:
    """Why a trust policy refuses sts:AssumeRole to `caller` with `external_id`, or None when one statement allows
    it. Only what Pitcrew's templates use: Allow, an AWS principal, StringEquals on sts:ExternalId."""
    reasons = []
    for statement in _listed(trust.get("Statement", [])):
        if statement.get("Effect") != "Allow" or "sts:AssumeRole" not in _listed(statement.get("Action", [])):
            continue
        principals = _listed((statement.get("Principal") or {}).get("AWS", []))
        if caller is not None and "*" not in principals and caller not in principals:
            reasons.append(f"{caller} is not a trusted principal")
            continue
        wanted = (statement.get("Condition") or {}).get("StringEquals", {}).get("sts:ExternalId")
        if wanted is not None and external_id not in _listed(wanted):
            reasons.append("the external id does not match")
            continue
        return None
    return "; ".join(reasons) or "no statement allows sts:AssumeRole"


def _patch_assume_role_trust() -> None:
    """(b) AssumeRole of a role that exists answers AccessDenied unless its trust policy allows the caller."""
    from moto.core.exceptions import AccessDeniedError
    from moto.iam.models import iam_backends
    from moto.sts.responses import TokenResponse

    original = TokenResponse.assume_role

    @functools.wraps(original)
    def assume_role(self: Any) -> Any:
        role_arn = str(self._get_param("RoleArn") or "")
        account = role_arn.split(":")[4] if role_arn.count(":") >= 5 else ""
        roles = iam_backends[account]["aws"].roles if account in iam_backends else {}
        role = next((r for r in list(roles.values()) if r.arn == role_arn), None)
        if role is not None:
            caller = _caller_arn(self.get_access_key())
            refusal = trust_refusal(
                json.loads(role.assume_role_policy_document),
                caller=caller,
                external_id=self._get_param("ExternalId"),
            )
            if refusal is not None:
                raise AccessDeniedError(user_arn=caller or "unknown", action=f"sts:AssumeRole on resource: {role_arn}")
        return original(self)

    setattr(TokenResponse, "assume_role", assume_role)  # noqa: B010


def _patch_action_names() -> None:
    """(c) the IAM prefix, not the signing name."""
    from moto.iam.access_control import IAMRequestBase

    original = IAMRequestBase.__init__

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        prefix, _, name = self._action.partition(":")
        action = f"{SIGNING_TO_IAM.get(prefix, prefix)}:{name}"
        self._action = BATCH_TO_SINGLE.get(action, action)

    setattr(IAMRequestBase, "__init__", init)  # noqa: B010


def _in_scope(pattern: str, service: str, region: str, account: str) -> bool:
    if pattern == "*":
        return True
    parts = pattern.split(":", 5)
    if len(parts) < 6:
        return False
    _, _, svc, reg, acct, _ = parts
    return (
        fnmatch.fnmatchcase(service, svc)
        and (not reg or fnmatch.fnmatchcase(region, reg))
        and (not acct or fnmatch.fnmatchcase(account, acct))
    )


def _patch_unknown_resources() -> None:
    """(d) a request whose resource moto does not know is judged against the statements' account and region."""
    from moto.iam.access_control import IAMPolicy, IAMRequestBase, PermissionResult

    original = IAMRequestBase.check_action_permitted

    @functools.wraps(original)
    def check_action_permitted(self: Any, resource: str) -> None:
        service = self._action.split(":", 1)[0]
        if resource != "*" or service in RESOURCE_KNOWN:
            original(self, resource)
            return
        permitted = False
        for policy in self._access_key.collect_policies():
            document = IAMPolicy(policy)._policy_json
            statements = []
            for statement in _listed(document.get("Statement", [])):
                if "Resource" in statement:
                    covered = any(
                        _in_scope(r, service, self._region, self.account_id) for r in _listed(statement["Resource"])
                    )
                    statement = {**statement, "Resource": "*" if covered else "arn:none"}
                statements.append(statement)
            result = IAMPolicy(json.dumps({**document, "Statement": statements})).is_action_permitted(self._action)
            if result == PermissionResult.DENIED:
                self._raise_access_denied()
            permitted = permitted or result == PermissionResult.PERMITTED
        if not permitted:
            self._raise_access_denied()

    setattr(IAMRequestBase, "check_action_permitted", check_action_permitted)  # noqa: B010


def enforced() -> bool:
    from moto import settings
    from moto.core.responses import ActionAuthenticatorMixin

    return ActionAuthenticatorMixin.request_count >= settings.INITIAL_NO_AUTH_ACTION_COUNT


def role_policies(account: str, access_key_id: str) -> tuple[str, list[str]] | None:
    """The assumed role behind a key moto issued and its policy documents (JSON text), or None."""
    from moto.iam.models import iam_backends
    from moto.sts.models import sts_backends

    assumed = next(
        (r for r in list(sts_backends[account]["aws"].assumed_roles) if r.access_key_id == access_key_id), None
    )
    if assumed is None:
        return None
    try:
        role = iam_backends[account]["aws"].get_role_by_arn(assumed.role_arn)
    except Exception:  # a role that does not exist has no policies
        return str(assumed.arn), []
    documents = [str(doc) for doc in role.policies.values()]
    documents += [str(policy.versions[-1].document) for policy in role.managed_policies.values()]
    return str(assumed.arn), documents


def _patch_parallelcluster_api() -> None:
    """(e) API Gateway's IAM authorizer: execute-api:Invoke on arn:aws:execute-api:REGION:ACCOUNT:API/STAGE/METHOD/PATH.
    The emulator serves every org's API under /pcluster/ACCOUNT/REGION: its API id here is `pcluster`, stage `prod`."""
    from moto.iam.access_control import IAMPolicy, PermissionResult

    from sandbox.pcluster_api import AUTH_PATTERN, ParallelClusterApi, _forbidden

    original = ParallelClusterApi._authorize

    @functools.wraps(original)
    def authorize(self: Any, request: Any, body: bytes = b"") -> Any:
        refusal = original(self, request, body)
        if refusal is not None or not enforced():
            return refusal
        match = AUTH_PATTERN.fullmatch(request.headers.get("authorization", "").strip())
        account, region = request.path_params["account_id"], request.path_params["region"]
        found = role_policies(account, match["key"]) if match else None
        route = request.url.path.split(f"/pcluster/{account}/{region}", 1)[-1]
        resource = f"arn:aws:execute-api:{region}:{account}:pcluster/prod/{request.method}{route}"
        results = [
            IAMPolicy(doc).is_action_permitted("execute-api:Invoke", resource) for doc in (found[1] if found else [])
        ]
        if PermissionResult.PERMITTED in results and PermissionResult.DENIED not in results:
            return None
        who = found[0] if found else "anonymous"
        return _forbidden(
            f"User: {who} is not authorized to perform: execute-api:Invoke on resource: {resource}",
            "AccessDeniedException",
        )

    setattr(ParallelClusterApi, "_authorize", authorize)  # noqa: B010
