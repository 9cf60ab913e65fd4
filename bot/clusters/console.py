"""Links to a cluster's and a node's pages in the AWS console, for the region the org's clusters are in.
Pure: a URL from the backend, the region and the names, nothing read.

- HyperPod: the SageMaker console's cluster page, `.../sagemaker/home?region=R#/cluster-management/NAME` (the
  form the SageMaker HyperPod CLI prints as its "Console URL"). A HyperPod node runs in a service-owned
  account, so it has no EC2 page of the org's: a node links to its cluster's page, which lists the nodes.
- ParallelCluster: a cluster is a CloudFormation stack of its own name, so the cluster links to the stack list
  filtered by that name; a node is an EC2 instance of the org's, so it links to the instance's page.

The console's host depends on the partition: `R.console.aws.amazon.com`, `R.console.amazonaws.cn` for China,
`console.amazonaws-us-gov.com` for GovCloud.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from bot.clusters.model import Backend

_ARN = re.compile(r"^arn:aws[a-z-]*:sagemaker:(?P<region>[a-z0-9-]+):\d{12}:cluster/(?P<id>[A-Za-z0-9-]+)$")


def console_base(region: str) -> str:
    """The console's root for a region, in its partition."""
    if region.startswith("cn-"):
        return f"https://{region}.console.amazonaws.cn"
    if region.startswith("us-gov-"):
        return "https://console.amazonaws-us-gov.com"
    return f"https://{region}.console.aws.amazon.com"


def _part(value: str) -> str:
    """A name or id as one piece of a URL: nothing in it may end a Slack link (`|`, `>`) or the fragment."""
    return quote(value, safe="")


def _backend(backend: Backend | str) -> Backend:
    return backend if isinstance(backend, Backend) else Backend(backend)


def cluster_url(backend: Backend | str, region: str, cluster_name_or_arn: str) -> str:
    """The cluster's page. A HyperPod cluster's ARN gives its own region and the id at its end."""
    if _backend(backend) is Backend.HYPERPOD:
        found = _ARN.match(cluster_name_or_arn)
        if found:
            region, name = found["region"], found["id"]
        else:
            name = cluster_name_or_arn
        return f"{console_base(region)}/sagemaker/home?region={region}#/cluster-management/{_part(name)}"
    name = cluster_name_or_arn
    return (
        f"{console_base(region)}/cloudformation/home?region={region}"
        f"#/stacks?filteringText={_part(name)}&filteringStatus=active&viewNested=true"
    )


def node_url(backend: Backend | str, region: str, cluster: str, node_id: str) -> str:
    """The node's page: an EC2 instance's for ParallelCluster; for HyperPod, its cluster's (see above)."""
    if _backend(backend) is Backend.HYPERPOD:
        return cluster_url(Backend.HYPERPOD, region, cluster)
    return f"{console_base(region)}/ec2/home?region={region}#InstanceDetails:instanceId={_part(node_id)}"
