"""Cluster templates: the shipped set loads, every kind of problem is named with its path, parameters resolve
strictly, and the renderers produce what HyperPod's model and ParallelCluster's configuration expect."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import botocore.session
import pytest
import yaml
from botocore.validate import ParamValidator
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.clusters.templates import (
    ORG_TAG,
    TEMPLATE_TAG,
    ParameterError,
    PriceTable,
    Template,
    TemplateError,
    TemplateSet,
    check_launch_defaults,
    estimated_cost,
    launch_problems,
    load_templates,
    render_hyperpod_request,
    render_pcluster_config,
    slurm_orchestrator_supported,
    validate_cluster_name,
)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "bot" / "templates"
ROLE = "arn:aws:iam::111111111111:role/SageMakerHyperPodExecutionRole"
LIFECYCLE = "s3://sagemaker-kumo-labs-lifecycle/base-config/"
SUBNET = "subnet-0123456789abcdef0"
SG = "sg-0123456789abcdef0"
CR = "cr-0123456789abcdef0"
FS = "fs-0123456789abcdef0"
HYPERPOD_REQUIRED = {"execution_role_arn": ROLE, "lifecycle_s3_uri": LIFECYCLE}


@cache
def shipped_once() -> TemplateSet:
    return load_templates(SHIPPED)


@pytest.fixture
def shipped() -> TemplateSet:
    return shipped_once()


def template(shipped: TemplateSet, template_id: str) -> Template:
    found = shipped.get(template_id)
    assert found is not None
    return found


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A writable copy of the shipped templates, to break one thing at a time."""
    for path in SHIPPED.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def edit(folder: Path, file: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = folder / file
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def problems_of(folder: Path) -> list[str]:
    with pytest.raises(TemplateError) as caught:
        load_templates(folder)
    assert str(caught.value) == "; ".join(caught.value.problems)
    return caught.value.problems


def test_a_folder_read_again_unchanged_is_not_parsed_again_and_a_changed_one_is(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = load_templates(folder)
    reads: list[str] = []
    real_read = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda path, *a, **k: reads.append(path.name) or real_read(path, *a, **k))
    assert load_templates(folder) is first
    assert reads == [], "nothing read: the files are as they were"

    any_template = sorted(p.name for p in folder.glob("*.yaml") if p.name != "prices.yaml")[0]
    edit(folder, any_template, lambda data: data.update(description="Edited while Pitcrew was running."))
    changed = load_templates(folder)
    assert changed is not first and reads, "an edited file is read again"
    assert [t.description for t in changed.templates if t.description.startswith("Edited")] == [
        "Edited while Pitcrew was running."
    ]


def test_a_refused_folder_is_read_again_once_it_is_mended(folder: Path) -> None:
    original = (folder / "prices.yaml").read_text()
    (folder / "prices.yaml").write_text("currency: [")
    assert any("prices.yaml" in problem for problem in problems_of(folder))
    (folder / "prices.yaml").write_text(original)
    assert load_templates(folder).prices.currency == "USD"


# ---------------------------------------------------------------- the shipped set


def test_the_shipped_templates_load_in_id_order(shipped: TemplateSet) -> None:
    assert [t.id for t in shipped] == ["hyperpod-p5", "hyperpod-trn1", "pcluster-p5-efa", "pcluster-trn1"]
    assert shipped.ids == [t.id for t in shipped]
    assert len(shipped) == 4
    assert shipped.get("nope") is None
    assert all(t.version == 1 for t in shipped)
    assert template(shipped, "hyperpod-p5").key == "hyperpod-p5@1"


def test_each_template_names_its_reference_architecture_first(shipped: TemplateSet) -> None:
    for t in shipped:
        first = (SHIPPED / f"{t.id}.yaml").read_text().splitlines()[0]
        assert first.startswith("# Reference architecture: aws-samples/awsome-distributed-training")
        assert t.reference.startswith("aws-samples/awsome-distributed-training 1.architectures/")


def test_the_shipped_templates_follow_the_reference_shapes(shipped: TemplateSet) -> None:
    for template_id, worker in (("hyperpod-p5", "ml.p5.48xlarge"), ("hyperpod-trn1", "ml.trn1.32xlarge")):
        spec = template(shipped, template_id).hyperpod
        assert spec is not None
        controller, workers = spec.instance_groups
        assert (controller.instance_type, controller.instance_count) == ("ml.m5.12xlarge", 1)
        assert (workers.instance_type, workers.instance_count) == (worker, "count")
        assert {g.threads_per_core for g in spec.instance_groups} == {1}
        assert {g.on_create for g in spec.instance_groups} == {"on_create.sh"}
    for template_id, compute in (("pcluster-p5-efa", "p5.48xlarge"), ("pcluster-trn1", "trn1.32xlarge")):
        pc = template(shipped, template_id).pcluster
        assert pc is not None
        assert pc.head_node.instance_type == "m5.8xlarge"
        assert pc.queue_update_strategy == "DRAIN"
        assert [(r.instance_type, r.efa) for r in pc.queue.compute_resources] == [(compute, True)]
    p5 = template(shipped, "pcluster-p5-efa").pcluster
    assert p5 is not None and p5.queue.placement_group is False
    assert template(shipped, "pcluster-p5-efa").parameters["os"].default == "ubuntu2204"


def test_the_price_table_covers_every_shipped_instance_type(shipped: TemplateSet) -> None:
    for t in shipped:
        params = t.resolve({**HYPERPOD_REQUIRED} if t.backend == "hyperpod" else {"subnet_id": SUBNET})
        for instance_type in t.instances(params):
            entry = shipped.prices.entry(instance_type)
            assert entry is not None, instance_type
            assert entry.source.startswith("https://aws.amazon.com/")
    assert shipped.prices.taken == date(2026, 11, 29)
    assert shipped.prices.region == "us-east-1"
    assert shipped.prices.price_per_hour("p5.48xlarge") == 55.04
    assert shipped.prices.price_per_hour("trn1.32xlarge") == 21.50
    assert shipped.prices.price_per_hour("m5.8xlarge") == 1.536
    assert shipped.prices.price_per_hour("p4d.24xlarge") is None
    unconfirmed = {name for name, entry in shipped.prices.prices.items() if not entry.confirmed}
    assert unconfirmed == {"ml.p5.48xlarge", "ml.trn1.32xlarge"}


# ---------------------------------------------------------------- problems, each with file and path


def test_a_bound_that_makes_no_sense_is_named_with_its_path(folder: Path) -> None:
    edit(folder, "hyperpod-p5.yaml", lambda d: d["parameters"]["count"].update(min=10, max=5, default=7))
    problems = problems_of(folder)
    assert "hyperpod-p5.yaml: parameters.count.max: must be >= min" in problems
    assert "hyperpod-p5.yaml: parameters.count.default: must be between min and max (10 to 5)" in problems


def test_unknown_keys_are_errors_at_every_level(folder: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        d["owner"] = "someone"
        d["parameters"]["count"]["maximum"] = 8
        d["hyperpod"]["instance_groups"][0]["spot"] = True

    edit(folder, "hyperpod-p5.yaml", change)
    problems = problems_of(folder)
    assert "hyperpod-p5.yaml: unknown key 'owner'" in problems
    assert "hyperpod-p5.yaml: parameters.count: unknown key 'maximum'" in problems
    assert "hyperpod-p5.yaml: hyperpod.instance_groups[0]: unknown key 'spot'" in problems


def test_missing_and_mistyped_keys_are_named(folder: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        del d["description"]
        d["version"] = "1"
        d["pcluster"]["queue"]["compute_resources"][0]["efa"] = "on"
        d["pcluster"]["queue"]["compute_resources"][0]["instance_count"] = 0

    edit(folder, "pcluster-p5-efa.yaml", change)
    problems = problems_of(folder)
    assert "pcluster-p5-efa.yaml: description: required key is missing" in problems
    assert "pcluster-p5-efa.yaml: version: Input should be a valid integer" in problems
    assert "pcluster-p5-efa.yaml: pcluster.queue.compute_resources[0].efa: Input should be a valid boolean" in problems
    assert any(
        p.startswith("pcluster-p5-efa.yaml: pcluster.queue.compute_resources[0].instance_count: must be")
        for p in problems
    )


def test_ids_must_follow_the_pattern_and_match_the_file_and_the_backend(folder: Path) -> None:
    edit(folder, "hyperpod-p5.yaml", lambda d: d.update(id="HyperPod_P5"))
    edit(folder, "hyperpod-trn1.yaml", lambda d: d.update(id="hyperpod-trn1-big"))
    edit(folder, "pcluster-trn1.yaml", lambda d: d.update(id="hyperpod-trn1", backend="pcluster"))
    problems = problems_of(folder)
    assert (
        "hyperpod-p5.yaml: id: 'HyperPod_P5' is not <backend>-<family>[-<variant>] (e.g. hyperpod-p5, "
        "pcluster-trn1-efa)" in problems
    )
    assert (
        "hyperpod-trn1.yaml: id: 'hyperpod-trn1-big' does not match the file name (expected hyperpod-trn1-big.yaml)"
        in problems
    )
    assert "pcluster-trn1.yaml: backend: is pcluster, but the id 'hyperpod-trn1' names hyperpod" in problems


def test_family_must_match_the_id_and_the_accelerated_instances(folder: Path) -> None:
    edit(
        folder,
        "hyperpod-p5.yaml",
        lambda d: d["hyperpod"]["instance_groups"][1].update(instance_type="ml.trn1.32xlarge"),
    )
    edit(folder, "pcluster-trn1.yaml", lambda d: d.update(family="p5"))
    problems = problems_of(folder)
    assert (
        "hyperpod-p5.yaml: hyperpod.instance_groups[1].instance_type: ml.trn1.32xlarge is a trn1 instance, "
        "but the template's family is p5"
    ) in problems
    assert "pcluster-trn1.yaml: family: is 'p5', but the id 'pcluster-trn1' names 'trn1'" in problems


def test_instance_types_must_be_known_to_botocore_and_named_for_the_backend(folder: Path) -> None:
    edit(
        folder, "hyperpod-p5.yaml", lambda d: d["hyperpod"]["instance_groups"][0].update(instance_type="ml.m5.13xlarge")
    )
    edit(
        folder, "hyperpod-trn1.yaml", lambda d: d["hyperpod"]["instance_groups"][0].update(instance_type="m5.12xlarge")
    )
    edit(folder, "pcluster-p5-efa.yaml", lambda d: d["pcluster"]["head_node"].update(instance_type="ml.m5.8xlarge"))
    edit(folder, "pcluster-trn1.yaml", lambda d: d["pcluster"]["head_node"].update(instance_type="t2.micro"))
    problems = problems_of(folder)
    assert (
        "hyperpod-p5.yaml: hyperpod.instance_groups[0].instance_type: unknown instance type 'ml.m5.13xlarge' "
        "(not in the installed botocore models)"
    ) in problems
    assert any(
        p.startswith(
            "hyperpod-trn1.yaml: hyperpod.instance_groups[0].instance_type: HyperPod instance types start with ml."
        )
        for p in problems
    )
    assert any(
        p.startswith("pcluster-p5-efa.yaml: pcluster.head_node.instance_type: ParallelCluster uses EC2")
        for p in problems
    )
    # t2.micro is a fine head node type for a family check: only the accelerated resources carry the family.
    assert not any(p.startswith("pcluster-trn1.yaml") for p in problems)


def test_the_backend_section_must_be_the_right_one(folder: Path) -> None:
    def swap(d: dict[str, Any]) -> None:
        d["pcluster"] = {"head_node": {"instance_type": "m5.8xlarge"}}
        del d["hyperpod"]

    edit(folder, "hyperpod-p5.yaml", swap)
    problems = problems_of(folder)
    assert any(p.startswith("hyperpod-p5.yaml: pcluster.") for p in problems)  # structurally incomplete too
    edit(folder, "hyperpod-p5.yaml", lambda d: d.pop("pcluster"))
    assert "hyperpod-p5.yaml: hyperpod: required for backend hyperpod" in problems_of(folder)


def test_parameters_must_be_known_typed_and_self_consistent(folder: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        params = d["parameters"]
        params["colour"] = {"type": "str", "description": "Paint."}
        params["subnet_id"]["pattern"] = "subnet-(["
        params["security_group_id"]["default"] = "not-a-group"
        params["os"]["choices"] = ["ubuntu2204", "windows"]
        params["capacity_type"]["min"] = 1
        params["count"]["type"] = "str"
        del params["os"]["default"]

    edit(folder, "pcluster-p5-efa.yaml", change)
    problems = problems_of(folder)
    file = "pcluster-p5-efa.yaml"
    assert any(
        p.startswith(f"{file}: parameters.colour: not a pcluster parameter (known: count, os,") for p in problems
    )
    assert any(p.startswith(f"{file}: parameters.subnet_id.pattern: not a valid regular expression") for p in problems)
    assert f"{file}: parameters.security_group_id.default: 'not-a-group' does not match the pattern" in problems
    assert any(p.startswith(f"{file}: parameters.os.choices: 'windows' is not one of alinux2,") for p in problems)
    assert f"{file}: parameters.capacity_type.min: does not apply to enum parameters" in problems
    assert f"{file}: parameters.count.type: must be int for count" in problems
    assert f"{file}: parameters.os: must be required or have a default (the pcluster request needs it)" in problems


def test_a_needed_parameter_cannot_be_left_out(folder: Path) -> None:
    edit(folder, "hyperpod-trn1.yaml", lambda d: d["parameters"].pop("lifecycle_s3_uri"))
    assert problems_of(folder) == [
        "hyperpod-trn1.yaml: parameters: lifecycle_s3_uri is missing (the hyperpod request needs it)"
    ]


def test_group_rules_are_checked(folder: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        groups = d["hyperpod"]["instance_groups"]
        groups[1]["name"] = groups[0]["name"]
        groups[1]["instance_count"] = 2
        groups[0]["partition"] = "dev"

    edit(folder, "hyperpod-p5.yaml", change)
    problems = problems_of(folder)
    assert (
        "hyperpod-p5.yaml: hyperpod.instance_groups[1].name: 'controller-machine' is used by another group" in problems
    )
    assert (
        "hyperpod-p5.yaml: hyperpod.instance_groups[0].partition: a Controller group belongs to no partition"
        in problems
    )
    assert (
        "hyperpod-p5.yaml: hyperpod.instance_groups: no group has instance_count: count, so the count parameter "
        "would change nothing"
    ) in problems


def test_pcluster_names_follow_parallelcluster_rules(folder: Path) -> None:
    edit(folder, "pcluster-trn1.yaml", lambda d: d["pcluster"]["queue"].update(name="Compute_Trn1"))
    assert problems_of(folder) == [
        "pcluster-trn1.yaml: pcluster.queue.name: lowercase letters, digits and hyphens, starting with a letter, "
        "at most 25, not 'default'"
    ]


def test_every_problem_of_every_file_comes_at_once(folder: Path) -> None:
    (folder / "hyperpod-trn1.yaml").write_text("id: hyperpod-trn1\nversion: [1\n")
    (folder / "notes.yaml").write_text("- just a list\n")
    (folder / "old.yml").write_text("id: old\n")
    edit(folder, "pcluster-p5-efa.yaml", lambda d: d["parameters"]["count"].update(max=0))
    problems = problems_of(folder)
    assert any(p.startswith("hyperpod-trn1.yaml: line 3, column 1: not valid YAML") for p in problems)
    assert "notes.yaml: the file must be a mapping of keys to values" in problems
    assert "old.yml: templates use the .yaml extension; rename it to old.yaml" in problems
    assert "pcluster-p5-efa.yaml: parameters.count.max: must be >= min" in problems


def test_the_price_table_is_checked_too(folder: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        d["prices"]["p5.48xlarge"]["hourly"] = -1
        d["prices"]["p5.48xlarge"]["vendor"] = "aws"
        d["prices"]["p9.huge"] = {"hourly": 1.0, "taken": date(2026, 11, 29), "source": "x"}
        del d["prices"]["m5.8xlarge"]["taken"]

    edit(folder, "prices.yaml", change)
    problems = problems_of(folder)
    assert "prices.yaml: prices.p5.48xlarge.hourly: Input should be greater than 0" in problems
    assert "prices.yaml: prices.p5.48xlarge: unknown key 'vendor'" in problems
    assert "prices.yaml: prices.m5.8xlarge.taken: required key is missing" in problems
    (folder / "prices.yaml").unlink()
    assert problems_of(folder) == [
        "prices.yaml: missing (the on-demand price table, one entry per instance type the templates use)"
    ]


def test_an_empty_or_absent_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TemplateError) as caught:
        load_templates(tmp_path / "absent")
    assert caught.value.problems == [f"{tmp_path / 'absent'}: not a folder"]
    shutil.copy(SHIPPED / "prices.yaml", tmp_path / "prices.yaml")
    assert problems_of(tmp_path) == [f"{tmp_path}: no templates (*.yaml) found"]


# ---------------------------------------------------------------- resolve()


def test_resolve_applies_defaults_and_converts(shipped: TemplateSet) -> None:
    t = template(shipped, "pcluster-p5-efa")
    assert t.resolve({"subnet_id": SUBNET}) == {
        "count": 4,
        "os": "ubuntu2204",
        "subnet_id": SUBNET,
        "head_node_subnet_id": None,
        "security_group_id": None,
        "capacity_reservation_id": None,
        "capacity_type": "ONDEMAND",
        "fsx_file_system_id": None,
    }
    got = t.resolve(
        {
            "subnet-id": f" {SUBNET} ",
            "count": "+16",
            "os": "Alinux2023",
            "capacity_type": "capacity_block",
            "capacity_reservation_id": CR,
        }
    )
    assert (got["count"], got["os"], got["subnet_id"], got["capacity_type"]) == (
        16,
        "alinux2023",
        SUBNET,
        "CAPACITY_BLOCK",
    )
    assert t.resolve({"subnet_id": SUBNET}, count=64)["count"] == 64


@pytest.mark.parametrize(
    ("params", "count", "message"),
    [
        ({"count": "200"}, None, "count must be between 1 and 64; got 200."),
        ({}, 0, "count must be between 1 and 64; got 0."),
        ({"count": "4.5"}, None, "count must be a whole number between 1 and 64; got '4.5'."),
        (
            {"count": "99999999999999999999999"},
            None,
            "count must be a whole number between 1 and 64; got '99999999999999999999999'.",
        ),
        ({"count": "8"}, 8, "count is given twice (--count and --param count); give it once."),
        ({"count": " "}, None, "count is empty; give a whole number between 1 and 64."),
        (
            {"subnet_id": "subnet-xyz"},
            None,
            "subnet_id must look like subnet-0123456789abcdef0 (pattern subnet-[0-9a-f]{8}([0-9a-f]{9})?); "
            "got 'subnet-xyz'.",
        ),
        (
            {"capacity_reservation_id": "cr-123"},
            None,
            "capacity_reservation_id must look like cr-0123456789abcdef0 (pattern cr-[0-9a-f]{17}); got 'cr-123'.",
        ),
        ({"os": "windows"}, None, "os must be one of ubuntu2204, ubuntu2004, alinux2023, alinux2; got 'windows'."),
        (
            {"capacity_type": "CAPACITY_BLOCK"},
            None,
            "capacity_reservation_id is required when capacity_type is CAPACITY_BLOCK "
            "(give the Capacity Block's cr- id).",
        ),
        (
            {"colour": "red"},
            None,
            "pcluster-p5-efa has no parameter 'colour'; its parameters are count, os, subnet_id, "
            "head_node_subnet_id, security_group_id, capacity_reservation_id, capacity_type, fsx_file_system_id.",
        ),
    ],
)
def test_resolve_refuses_with_one_sentence(
    shipped: TemplateSet, params: dict[str, str], count: int | None, message: str
) -> None:
    with pytest.raises(ParameterError) as caught:
        template(shipped, "pcluster-p5-efa").resolve({"subnet_id": SUBNET, **params}, count=count)
    assert caught.value.message == message
    assert str(caught.value) == message


def test_resolve_requires_what_has_no_default(shipped: TemplateSet) -> None:
    with pytest.raises(ParameterError) as caught:
        template(shipped, "pcluster-trn1").resolve({})
    assert caught.value.message.startswith("subnet_id is required: ")
    # Which parameter, what it takes, and both ways to give it.
    assert "Give a value like subnet-0123456789abcdef0 with `--param subnet_id=VALUE`" in caught.value.message
    assert "in the program file (orgs[].launch.subnet_id)" in caught.value.message
    assert caught.value.field == "subnet_id"
    with pytest.raises(ParameterError, match=r"^execution_role_arn is required"):
        template(shipped, "hyperpod-p5").resolve({"lifecycle_s3_uri": LIFECYCLE})


ROLE = "arn:aws:iam::111111111111:role/SageMakerHyperPodExecutionRole"


def test_launch_defaults_fill_what_is_not_given_and_param_overrides(shipped: TemplateSet) -> None:
    hyperpod = template(shipped, "hyperpod-p5")
    defaults: dict[str, str | int] = {
        "execution_role_arn": ROLE,
        "lifecycle_s3_uri": LIFECYCLE,
        "count": 8,
        "os": "ubuntu2204",
    }
    params = hyperpod.resolve(hyperpod.with_defaults({}, defaults))
    assert (params["execution_role_arn"], params["lifecycle_s3_uri"], params["count"]) == (ROLE, LIFECYCLE, 8)
    assert "os" not in params  # a default of another template's parameter is not this one's
    other = "s3://sagemaker-other/x/"
    given = hyperpod.with_defaults({"lifecycle-s3-uri": other}, defaults, count=16)
    params = hyperpod.resolve(given, count=16)  # --count and --param win over the defaults
    assert (params["lifecycle_s3_uri"], params["count"]) == (other, 16)


def test_a_launch_default_a_template_refuses_says_it_comes_from_the_program_file(shipped: TemplateSet) -> None:
    with pytest.raises(ParameterError) as caught:
        template(shipped, "hyperpod-p5").with_defaults({}, {"subnet_id": "subnet-nope"})
    assert caught.value.field == "subnet_id"
    assert "orgs[].launch.subnet_id in the program file" in caught.value.message
    assert "`--param subnet_id=VALUE`" in caught.value.message
    # Given on the command line, the bad default is not used, so not refused.
    assert template(shipped, "hyperpod-p5").with_defaults({"subnet_id": SUBNET}, {"subnet_id": "subnet-nope"})


def test_check_launch_defaults_names_unknown_parameters_with_a_did_you_mean(shipped: TemplateSet) -> None:
    assert check_launch_defaults(shipped, {"subnet_id": SUBNET, "execution_role_arn": ROLE, "count": 4}) == []
    (problem,) = check_launch_defaults(shipped, {"subnet_idd": SUBNET})
    assert problem == "launch.subnet_idd: no template has a parameter 'subnet_idd'. Did you mean `subnet_id`?"
    (problem,) = check_launch_defaults(shipped, {"colour": "red"})
    assert problem.startswith("launch.colour: no template has a parameter 'colour'. The templates' parameters are ")
    (problem,) = check_launch_defaults(shipped, {"os": "windows"})
    assert problem.startswith("launch.os: os must be one of ") and problem.endswith("(template pcluster-p5-efa)")
    (problem,) = check_launch_defaults(shipped, {"count": 100000})
    assert problem.startswith("launch.count: count must be between 1 and ")


def test_hyperpod_lifecycle_scripts_must_live_in_a_sagemaker_bucket(shipped: TemplateSet) -> None:
    t = template(shipped, "hyperpod-trn1")
    with pytest.raises(ParameterError, match=r"^lifecycle_s3_uri must look like s3://sagemaker-"):
        t.resolve({**HYPERPOD_REQUIRED, "lifecycle_s3_uri": "s3://my-bucket/lifecycle/"})
    assert t.resolve(HYPERPOD_REQUIRED)["lifecycle_s3_uri"] == LIFECYCLE


def test_hyperpod_pairs_go_together(shipped: TemplateSet) -> None:
    t = template(shipped, "hyperpod-p5")
    with pytest.raises(ParameterError) as caught:
        t.resolve({**HYPERPOD_REQUIRED, "subnet_id": SUBNET})
    assert (
        caught.value.message
        == "security_group_id is missing: subnet_id and security_group_id are given together or not at all."
    )
    with pytest.raises(ParameterError, match=r"^fsx_dns_name is missing"):
        t.resolve({**HYPERPOD_REQUIRED, "fsx_mount_name": "abcdefgh"})


@settings(max_examples=300, deadline=None)
@given(
    params=st.dictionaries(
        st.one_of(
            st.sampled_from(
                [
                    "count",
                    "os",
                    "subnet_id",
                    "capacity_type",
                    "capacity_reservation_id",
                    "fsx_file_system_id",
                    "custom_ami_id",
                ]
            ),
            st.text(),
        ),
        st.text(),
        max_size=6,
    ),
    count=st.one_of(st.none(), st.integers(min_value=-(10**30), max_value=10**30)),
)
def test_resolve_raises_nothing_but_parameter_error(params: dict[str, str], count: int | None) -> None:
    for t in shipped_once():
        try:
            resolved = t.resolve(params, count=count)
        except ParameterError as exc:
            assert exc.message.endswith(".")
            continue
        assert set(resolved) == set(t.parameters)
        assert isinstance(resolved["count"], int) and 1 <= resolved["count"] <= 64


def test_launch_problems_names_every_bad_field_at_once_and_resolve_still_raises_the_first(
    shipped: TemplateSet,
) -> None:
    pcluster = template(shipped, "pcluster-p5-efa")
    given = {"subnet_id": "subnet-zz", "security_group_id": "sg-?", "fsx_file_system_id": "nope"}
    problems = launch_problems(pcluster, name="1-bad", given=given, defaults={}, count=999)
    assert set(problems) == {"name", "count", "subnet_id", "security_group_id", "fsx_file_system_id"}, problems
    assert problems["name"] == validate_cluster_name("1-bad", "pcluster")
    with pytest.raises(ParameterError) as caught:
        pcluster.resolve(given, count=999)
    assert caught.value.message == pcluster.problems(given, count=999)[0].message
    # The org's launch defaults fill what is not given; a good launch has no problems.
    hyperpod = template(shipped, "hyperpod-p5")
    assert launch_problems(hyperpod, name="kumo-ok", given={}, defaults=HYPERPOD_REQUIRED, count=2) == {}
    assert set(launch_problems(hyperpod, name="kumo-ok", given={}, defaults={}, count=2)) == {
        "execution_role_arn",
        "lifecycle_s3_uri",
    }


# ---------------------------------------------------------------- HyperPod request


def create_cluster_shape() -> Any:
    return botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateCluster").input_shape


@pytest.mark.parametrize("template_id", ["hyperpod-p5", "hyperpod-trn1"])
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"subnet_id": SUBNET, "security_group_id": SG},
        {
            "subnet_id": SUBNET,
            "security_group_id": SG,
            "fsx_dns_name": f"{FS}.fsx.us-east-1.amazonaws.com",
            "fsx_mount_name": "abcdefgh",
            "training_plan_arn": "arn:aws:sagemaker:us-east-1:111111111111:training-plan/kumo-reserved-p5",
        },
    ],
)
def test_the_hyperpod_request_passes_botocores_own_validation(
    shipped: TemplateSet, template_id: str, extra: dict[str, str]
) -> None:
    t = template(shipped, template_id)
    params = t.resolve({**HYPERPOD_REQUIRED, **extra}, count=16)
    request = render_hyperpod_request(t, name="kumo-train-1", org_id="kumo-labs", params=params)
    report = ParamValidator().validate(request, create_cluster_shape())
    assert not report.has_errors(), report.generate_report()


def test_the_hyperpod_request_has_the_exact_shape(shipped: TemplateSet) -> None:
    t = template(shipped, "hyperpod-p5")
    params = t.resolve({**HYPERPOD_REQUIRED, "subnet_id": SUBNET, "security_group_id": SG}, count=16)
    request = render_hyperpod_request(t, name="kumo-train-1", org_id="kumo-labs", params=params)
    lifecycle = {"SourceS3Uri": LIFECYCLE, "OnCreate": "on_create.sh"}
    controller, workers = request["InstanceGroups"]
    assert request["ClusterName"] == "kumo-train-1"
    assert {k: controller[k] for k in ("InstanceGroupName", "InstanceType", "InstanceCount", "ThreadsPerCore")} == {
        "InstanceGroupName": "controller-machine",
        "InstanceType": "ml.m5.12xlarge",
        "InstanceCount": 1,
        "ThreadsPerCore": 1,
    }
    assert {k: workers[k] for k in ("InstanceGroupName", "InstanceType", "InstanceCount", "ThreadsPerCore")} == {
        "InstanceGroupName": "worker-group-1",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceCount": 16,
        "ThreadsPerCore": 1,
    }
    for group in request["InstanceGroups"]:
        assert group["LifeCycleConfig"] == lifecycle
        assert group["ExecutionRole"] == ROLE
        assert group["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
    assert request["VpcConfig"] == {"SecurityGroupIds": [SG], "Subnets": [SUBNET]}
    assert request["NodeRecovery"] == "Automatic"
    assert request["Tags"] == [{"Key": ORG_TAG, "Value": "kumo-labs"}, {"Key": TEMPLATE_TAG, "Value": "hyperpod-p5@1"}]
    # botocore 1.44.8 has Orchestrator.Slurm (Overwrite|Managed|Merge) and per-group SlurmConfig.
    assert slurm_orchestrator_supported()
    assert request["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Managed"}}
    assert controller["SlurmConfig"] == {"NodeType": "Controller"}
    assert workers["SlurmConfig"] == {"NodeType": "Compute", "PartitionNames": ["dev"]}


def test_optional_hyperpod_parts_appear_only_when_given(shipped: TemplateSet) -> None:
    t = template(shipped, "hyperpod-trn1")
    bare = render_hyperpod_request(t, name="a", org_id="kumo-labs", params=t.resolve(HYPERPOD_REQUIRED))
    assert "VpcConfig" not in bare
    assert all("TrainingPlanArn" not in g for g in bare["InstanceGroups"])
    plan = "arn:aws:sagemaker:us-east-1:111111111111:training-plan/trn1-plan"
    fsx = {"fsx_dns_name": f"{FS}.fsx.us-east-1.amazonaws.com", "fsx_mount_name": "abcdefgh", "training_plan_arn": plan}
    full = render_hyperpod_request(t, name="a", org_id="kumo-labs", params=t.resolve({**HYPERPOD_REQUIRED, **fsx}))
    controller, workers = full["InstanceGroups"]
    mount = {"FsxLustreConfig": {"DnsName": fsx["fsx_dns_name"], "MountName": "abcdefgh", "MountPath": "/fsx"}}
    assert mount in controller["InstanceStorageConfigs"] and mount in workers["InstanceStorageConfigs"]
    assert workers["TrainingPlanArn"] == plan and "TrainingPlanArn" not in controller


def test_renderers_refuse_bad_names_and_the_wrong_backend(shipped: TemplateSet) -> None:
    hp = template(shipped, "hyperpod-p5")
    params = hp.resolve(HYPERPOD_REQUIRED)
    with pytest.raises(ParameterError, match=r"^HyperPod cluster names are 1 to 63"):
        render_hyperpod_request(hp, name="-bad", org_id="kumo-labs", params=params)
    with pytest.raises(ValueError, match="not a ParallelCluster template"):
        render_pcluster_config(hp, name="ok", org_id="kumo-labs", region="us-east-1", params=params)
    pc = template(shipped, "pcluster-p5-efa")
    with pytest.raises(ValueError, match="not a HyperPod template"):
        render_hyperpod_request(pc, name="ok", org_id="kumo-labs", params=params)
    with pytest.raises(ParameterError, match=r"^region must be an AWS region"):
        render_pcluster_config(
            pc, name="ok", org_id="kumo-labs", region="nowhere", params=pc.resolve({"subnet_id": SUBNET})
        )


# ---------------------------------------------------------------- ParallelCluster configuration


def render(shipped: TemplateSet, template_id: str, given: dict[str, str], count: int | None = None) -> dict[str, Any]:
    t = template(shipped, template_id)
    text = render_pcluster_config(
        t, name="kumo-p5", org_id="kumo-labs", region="us-east-1", params=t.resolve(given, count=count)
    )
    assert text.startswith(f"# Rendered by Pitcrew from template {t.key} for org kumo-labs.\n")
    config = yaml.safe_load(text)
    assert isinstance(config, dict)
    return config


def test_the_pcluster_config_has_the_reference_values(shipped: TemplateSet) -> None:
    config = render(
        shipped,
        "pcluster-p5-efa",
        {"subnet_id": SUBNET, "security_group_id": SG, "capacity_reservation_id": CR, "fsx_file_system_id": FS},
        count=16,
    )
    assert config["Region"] == "us-east-1"
    assert config["Image"] == {"Os": "ubuntu2204"}
    assert config["HeadNode"] == {
        "InstanceType": "m5.8xlarge",
        "Networking": {"SubnetId": SUBNET, "AdditionalSecurityGroups": [SG]},
    }
    scheduling = config["Scheduling"]
    assert scheduling["Scheduler"] == "slurm"
    assert scheduling["SlurmSettings"] == {"QueueUpdateStrategy": "DRAIN"}
    (queue,) = scheduling["SlurmQueues"]
    assert queue["Name"] == "compute-gpu"
    assert queue["CapacityType"] == "ONDEMAND"  # a targeted ODCR stays ONDEMAND, as in the reference
    assert queue["Networking"] == {
        "SubnetIds": [SUBNET],
        "PlacementGroup": {"Enabled": False},
        "AdditionalSecurityGroups": [SG],
    }
    assert queue["ComputeResources"] == [
        {
            "Name": "distributed-ml",
            "InstanceType": "p5.48xlarge",
            "MinCount": 16,
            "MaxCount": 16,
            "Efa": {"Enabled": True},
            "CapacityReservationTarget": {"CapacityReservationId": CR},
        }
    ]
    assert config["SharedStorage"] == [
        {"MountDir": "/fsx", "Name": "fsx", "StorageType": "FsxLustre", "FsxLustreSettings": {"FileSystemId": FS}}
    ]
    assert config["Tags"] == [
        {"Key": ORG_TAG, "Value": "kumo-labs"},
        {"Key": TEMPLATE_TAG, "Value": "pcluster-p5-efa@1"},
    ]


def test_capacity_blocks_and_placement_groups(shipped: TemplateSet) -> None:
    block = render(
        shipped,
        "pcluster-trn1",
        {"subnet_id": SUBNET, "capacity_type": "CAPACITY_BLOCK", "capacity_reservation_id": CR},
    )
    (queue,) = block["Scheduling"]["SlurmQueues"]
    assert queue["CapacityType"] == "CAPACITY_BLOCK"
    assert queue["Networking"]["PlacementGroup"] == {"Enabled": False}  # ParallelCluster warns against PG + CB
    assert queue["ComputeResources"][0]["CapacityReservationTarget"] == {"CapacityReservationId": CR}
    plain = render(
        shipped, "pcluster-trn1", {"subnet_id": SUBNET, "os": "alinux2023", "custom_ami_id": "ami-0123456789abcdef0"}
    )
    (queue,) = plain["Scheduling"]["SlurmQueues"]
    assert queue["Networking"]["PlacementGroup"] == {"Enabled": True}  # trn1 template, nothing reserved
    assert "CapacityReservationTarget" not in queue["ComputeResources"][0]
    assert "SharedStorage" not in plain
    assert plain["Image"] == {"Os": "alinux2023", "CustomAmi": "ami-0123456789abcdef0"}
    assert "AdditionalSecurityGroups" not in plain["HeadNode"]["Networking"]
    head = render(shipped, "pcluster-p5-efa", {"subnet_id": SUBNET, "head_node_subnet_id": "subnet-0fedcba9876543210"})
    assert head["HeadNode"]["Networking"]["SubnetId"] == "subnet-0fedcba9876543210"
    assert head["Scheduling"]["SlurmQueues"][0]["Networking"]["SubnetIds"] == [SUBNET]


# ---------------------------------------------------------------- instances, cost, names


def test_instances_count_the_controller_and_head_node(shipped: TemplateSet) -> None:
    hp = template(shipped, "hyperpod-p5")
    assert hp.instances(hp.resolve(HYPERPOD_REQUIRED, count=16)) == {"ml.m5.12xlarge": 1, "ml.p5.48xlarge": 16}
    pc = template(shipped, "pcluster-trn1")
    assert pc.instances(pc.resolve({"subnet_id": SUBNET})) == {"m5.8xlarge": 1, "trn1.32xlarge": 4}
    with pytest.raises(ParameterError, match="count is missing"):
        pc.instances({})


def test_estimated_cost_per_hour_and_per_day(shipped: TemplateSet) -> None:
    pc = template(shipped, "pcluster-p5-efa")
    cost = estimated_cost(shipped.prices, pc.instances(pc.resolve({"subnet_id": SUBNET}, count=16)))
    assert cost is not None
    hourly, daily = cost
    assert hourly == pytest.approx(1.536 + 16 * 55.04)  # 882.176
    assert daily == pytest.approx(hourly * 24)  # 21172.224
    hp = template(shipped, "hyperpod-trn1")
    cost = estimated_cost(shipped.prices, hp.instances(hp.resolve(HYPERPOD_REQUIRED, count=2)))
    assert cost == pytest.approx((2.765 + 2 * 21.50, (2.765 + 2 * 21.50) * 24))
    assert estimated_cost(shipped.prices, {"p5.48xlarge": 2, "p4d.24xlarge": 1}) is None
    assert estimated_cost(shipped.prices, {}) == (0.0, 0.0)


def test_price_lookup_is_exact_and_the_table_date_is_the_oldest() -> None:
    table = PriceTable.model_validate(
        {
            "currency": "USD",
            "region": "us-east-1",
            "prices": {
                "p5.48xlarge": {"hourly": 55.04, "taken": date(2026, 11, 29), "source": "a"},
                "ml.p5.48xlarge": {"hourly": 113.14, "taken": date(2026, 10, 1), "source": "b", "confirmed": False},
            },
        }
    )
    assert table.price_per_hour("p5.48xlarge") == 55.04
    assert table.price_per_hour("ml.p5.48xlarge") == 113.14
    assert table.price_per_hour("trn1.32xlarge") is None
    assert table.taken == date(2026, 10, 1)


@pytest.mark.parametrize(
    ("name", "hyperpod_ok", "pcluster_ok"),
    [
        ("kumo-train-1", True, True),
        ("a", True, False),  # ParallelCluster's API pattern needs two characters
        ("1st-run", True, False),  # ParallelCluster names start with a letter
        ("run-", False, True),  # HyperPod needs a letter or digit last; ParallelCluster does not
        ("run--two", True, True),
        ("run_two", False, False),
        ("", False, False),
        ("x" * 60, True, True),
        ("x" * 61, True, False),
        ("x" * 63, True, False),
        ("x" * 64, False, False),
        ("kumo.p5", False, False),
    ],
)
def test_cluster_names(name: str, hyperpod_ok: bool, pcluster_ok: bool) -> None:
    assert (validate_cluster_name(name, "hyperpod") is None) is hyperpod_ok
    assert (validate_cluster_name(name, "pcluster") is None) is pcluster_ok


def test_cluster_name_messages_say_the_rule() -> None:
    assert validate_cluster_name("-x", "hyperpod") == (
        "HyperPod cluster names are 1 to 63 letters, digits and hyphens, starting and ending with a letter or digit; "
        "got '-x'."
    )
    assert validate_cluster_name("9x", "pcluster") == (
        "ParallelCluster cluster names are 2 to 60 letters, digits and hyphens, starting with a letter; got '9x'."
    )
    with pytest.raises(ValueError, match="unknown backend"):
        validate_cluster_name("x", "batch")
