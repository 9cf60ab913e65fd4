"""An AWS refusal turned into what to deploy: "Pitcrew's role in ORG lacks ACTION; deploy the operate tier".

AWS says AccessDenied (JSON services AccessDeniedException, EC2 UnauthorizedOperation, API Gateway a bare 403), and
its message names the action ("... is not authorized to perform: sagemaker:UpdateCluster on resource: ...").
Where the message is missing or unreadable (moto answers SageMaker's refusals as XML, which botocore reports as
code "403"), the action comes from the call's operation through the table. The AWS error body is never shown.
"""

from __future__ import annotations

import re

from botocore.exceptions import ClientError

from bot.clusters.parallelcluster import ParallelClusterApiError
from bot.iam.actions import PERMISSIONS, Access, for_operation

DENIED_CODES = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess", "403"}
)
_PERFORM = re.compile(r"not authorized to perform:?\s+(?P<action>[a-z0-9-]+:[A-Za-z0-9*]+)")
API_INVOKE = "execute-api:Invoke"


class AccessProblem(Exception):
    """Pitcrew's access to an org's account is not what it needs; str() is the one sentence a person sees."""


class PermissionMissing(AccessProblem):
    def __init__(self, org_id: str, action: str, access: Access) -> None:
        super().__init__(org_id, action, access)
        self.org_id, self.action, self.access = org_id, action, access

    def __str__(self) -> str:
        # The ParallelCluster API's own resource policy refuses as IAM does: both are named.
        api = self.action == API_INVOKE
        lacks = f"Pitcrew's role in {self.org_id} lacks {self.action}" + (" on its ParallelCluster API" if api else "")
        if self.access is Access.CHANGE:
            return f"{lacks}; deploy the operate tier (`pitcrew onboard {self.org_id} --tier operate`)"
        policy = " and check that the API's resource policy admits the role" if api else ""
        return f"{lacks}, which every tier grants; deploy its template again (`pitcrew onboard {self.org_id}`){policy}"


class RoleNotAssumable(AccessProblem):
    def __init__(self, org_id: str) -> None:
        super().__init__(org_id)
        self.org_id = org_id

    def __str__(self) -> str:
        return (
            f"Pitcrew cannot assume its role in {self.org_id}: the role must trust Pitcrew's principal with the org's "
            f"aws.external_id (`pitcrew doctor --org {self.org_id}` says which is wrong)"
        )


def is_denied(error: BaseException) -> bool:
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return code in DENIED_CODES or status == 403
    if isinstance(error, ParallelClusterApiError):
        return error.status == 403
    return False


def _access(action: str, operation: str | None) -> Access:
    rows = [p for p in PERMISSIONS if p.action == action]
    if operation is not None:
        rows = [p for p in rows if any(call.endswith(f".{operation}") for call in p.calls)] or rows
    return Access.CHANGE if rows and all(p.access is Access.CHANGE for p in rows) else Access.READ


def refusal(org_id: str, error: BaseException, *, change: bool = False) -> AccessProblem | None:
    """What a refusal means for the org, or None when `error` is not a refusal. `change`: the call was a change
    (the ParallelCluster API's 403 does not say which route it refused)."""
    if not is_denied(error):
        return None
    if isinstance(error, ParallelClusterApiError):
        found = _PERFORM.search(error.message)
        return PermissionMissing(
            org_id, found["action"] if found else API_INVOKE, Access.CHANGE if change else Access.READ
        )
    assert isinstance(error, ClientError)
    operation = getattr(error, "operation_name", None)
    if operation == "AssumeRole":
        return RoleNotAssumable(org_id)
    message = str(error.response.get("Error", {}).get("Message", ""))
    found = _PERFORM.search(message)
    row = for_operation(operation) if operation else None
    action = found["action"] if found else (row.action if row else f"the permission for {operation or 'this call'}")
    return PermissionMissing(org_id, action, _access(action, operation))


def translated(org_id: str, error: BaseException, *, change: bool = False) -> BaseException:
    """`error` as the org's access problem where it is a refusal, else as it was."""
    return refusal(org_id, error, change=change) or error
