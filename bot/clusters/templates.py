"""Cluster templates: versioned YAML reference architectures, their typed parameters, and what they render.

A template file (`templates/<id>.yaml`) names its backend and instance family, describes its instance groups
(HyperPod) or head node and Slurm queue (ParallelCluster), and declares the parameters a launch may set. The
renderers turn a template plus resolved parameters into the exact HyperPod `create_cluster` kwargs or the
ParallelCluster v3 cluster YAML. `templates/prices.yaml` holds on-demand prices for the cost line of a plan.

Pure: files are read only by `load_templates`, AWS is never called. The installed botocore service models are
read (lazily, once) to know the valid instance types and whether CreateCluster takes a Slurm orchestrator.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.clusters.model import ORG_TAG
from bot.config import known_instance_types, normalize_instance_type
from bot.names import did_you_mean

PRICES_FILE = "prices.yaml"
TEMPLATE_TAG = "pitcrew:template"
COUNT = "count"  # the parameter that sizes the accelerated group; `instance_count: count` refers to it

# <backend>-<family>[-<variant>] (DESIGN.md, Contracts: Templates).
TEMPLATE_ID_PATTERN = re.compile(r"(hyperpod|pcluster)-([a-z][a-z0-9]*)(?:-([a-z0-9]+))?")
# botocore 1.44.8 sagemaker model: ClusterName and InstanceGroupName share this pattern, 1 to 63 characters.
HYPERPOD_NAME_PATTERN = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*")
HYPERPOD_NAME_MAX = 63
# ParallelCluster: the API spec's clusterName pattern (so at least 2 characters) and the CLI's 60-character
# limit (aws-parallelcluster cli/src/pcluster/constants.py PCLUSTER_NAME_MAX_LENGTH; 40 with Slurm accounting,
# which these templates do not enable).
PCLUSTER_NAME_PATTERN = re.compile(r"[a-zA-Z][a-zA-Z0-9-]+")
PCLUSTER_NAME_MAX = 60
# ParallelCluster queue and compute resource names (cluster_validators.py NameValidator): 25 characters.
PCLUSTER_RESOURCE_NAME_PATTERN = re.compile(r"[a-z][a-z0-9-]*")
PCLUSTER_RESOURCE_NAME_MAX = 25
# Image.Os values ParallelCluster 3.12 supports (constants.py SUPPORTED_OSES), matching the API spec in use.
PCLUSTER_OSES = ("alinux2", "alinux2023", "ubuntu2004", "ubuntu2204", "rhel8", "rocky8", "rhel9", "rocky9")
PCLUSTER_CAPACITY_TYPES = ("ONDEMAND", "CAPACITY_BLOCK", "SPOT")
HYPERPOD_MAX_INSTANCE_COUNT = 6758  # ClusterInstanceGroupSpecification.InstanceCount max in botocore 1.44.8
_REGION_PATTERN = re.compile(r"[a-z]{2}(-[a-z]+)+-\d")
_BIG_INT_DIGITS = 12  # longer digit strings are out of range anyway; int() of huge strings is slow or refused

Backend = Literal["hyperpod", "pcluster"]
ModelT = TypeVar("ModelT", bound=BaseModel)
ParameterType = Literal["int", "str", "enum"]

# The parameters each renderer understands, with their type. A template may declare any of them; declaring
# another name is an error because no renderer would use it. NEEDED ones must be required or have a default.
_KNOWN_PARAMETERS: dict[str, dict[str, ParameterType]] = {
    "hyperpod": {
        COUNT: "int",
        "execution_role_arn": "str",
        "lifecycle_s3_uri": "str",
        "subnet_id": "str",
        "security_group_id": "str",
        "fsx_dns_name": "str",
        "fsx_mount_name": "str",
        "training_plan_arn": "str",
    },
    "pcluster": {
        COUNT: "int",
        "os": "enum",
        "subnet_id": "str",
        "head_node_subnet_id": "str",
        "security_group_id": "str",
        "capacity_reservation_id": "str",
        "capacity_type": "enum",
        "fsx_file_system_id": "str",
        "custom_ami_id": "str",
    },
}
_NEEDED_PARAMETERS: dict[str, tuple[str, ...]] = {
    "hyperpod": (COUNT, "execution_role_arn", "lifecycle_s3_uri"),
    "pcluster": (COUNT, "os", "subnet_id"),
}
_ENUM_VALUES: dict[str, tuple[str, ...]] = {"os": PCLUSTER_OSES, "capacity_type": PCLUSTER_CAPACITY_TYPES}
# HyperPod parameters that only make sense as a pair: VpcConfig needs both lists, FSx needs both names.
_TOGETHER: dict[str, tuple[tuple[str, str], ...]] = {
    "hyperpod": (("subnet_id", "security_group_id"), ("fsx_dns_name", "fsx_mount_name")),
    "pcluster": (),
}


class TemplateError(Exception):
    """Templates that cannot be used; carries every problem found, each naming the file and the path in it."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class ParameterError(ValueError):
    """A launch parameter that cannot be used; the message is one sentence meant for the person who typed it."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.message = message
        self.field = field  # the parameter it is about (the launch form shows the message under it), if one
        super().__init__(message)


def _show(value: str) -> str:
    """A typed value, quoted and cut short, for an error message."""
    return repr(value if len(value) <= 40 else value[:37] + "...")


class _Strict(BaseModel):
    # strict: YAML's `"4"` is not the number 4, nor is `yes` (a YAML boolean) a string.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Parameter(_Strict):
    """One launch parameter: its type, bounds or pattern or choices, and default."""

    type: ParameterType
    description: str = Field(min_length=1, max_length=300)
    required: bool = False
    default: Any = None  # checked against `type` once the file is known to be well formed
    min: int | None = None
    max: int | None = None
    pattern: str | None = None  # matches the whole value
    max_length: int | None = Field(default=None, ge=1)
    choices: list[str] | None = None
    example: str | None = None

    def hint(self) -> str:
        """What a valid value looks like, for messages."""
        if self.type == "int":
            return f"a whole number between {self.min} and {self.max}"
        if self.type == "enum":
            return "one of " + ", ".join(self.choices or ())
        if self.example:
            return f"a value like {self.example}"
        return f"a value matching {self.pattern}" if self.pattern else "a value"

    def check_int(self, name: str, value: int) -> int:
        low, high = self.min if self.min is not None else 0, self.max if self.max is not None else value
        if not low <= value <= high:
            raise ParameterError(f"{name} must be between {low} and {high}; got {value}.", field=name)
        return value

    def convert(self, name: str, raw: str) -> int | str:
        text = raw.strip()
        if not text:
            raise ParameterError(f"{name} is empty; give {self.hint()}.", field=name)
        if self.type == "int":
            if not re.fullmatch(r"[+-]?[0-9]+", text):
                raise ParameterError(f"{name} must be {self.hint()}; got {_show(raw)}.", field=name)
            if len(text.lstrip("+-")) > _BIG_INT_DIGITS:
                raise ParameterError(f"{name} must be {self.hint()}; got {_show(raw)}.", field=name)
            return self.check_int(name, int(text))
        if self.type == "enum":
            for choice in self.choices or ():
                if text.lower() == choice.lower():
                    return choice
            raise ParameterError(f"{name} must be {self.hint()}; got {_show(raw)}.", field=name)
        if self.max_length is not None and len(text) > self.max_length:
            raise ParameterError(f"{name} must be at most {self.max_length} characters; got {len(text)}.", field=name)
        if self.pattern is not None and not re.fullmatch(self.pattern, text):
            example = f"look like {self.example} (pattern {self.pattern})" if self.example else f"match {self.pattern}"
            raise ParameterError(f"{name} must {example}; got {_show(raw)}.", field=name)
        return text


def _instance_count(value: Any) -> Any:
    if value == COUNT or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"must be a whole number of at least 1, or {COUNT} (the {COUNT} parameter)")


class HyperPodGroup(_Strict):
    name: str
    instance_type: str
    instance_count: Any
    threads_per_core: int = Field(ge=1, le=2)
    on_create: str = Field(min_length=1, max_length=128)
    volume_size_gb: int | None = Field(default=None, ge=1, le=16384)
    # API-driven Slurm configuration (ClusterSlurmConfig): the node type and the partition of the group.
    slurm_node_type: Literal["Controller", "Login", "Compute"] | None = None
    partition: str | None = None

    _count = field_validator("instance_count")(_instance_count)


class HyperPodSpec(_Strict):
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    fsx_mount_dir: str = Field(default="/fsx", pattern=r"^/[a-zA-Z0-9._/-]+$")
    instance_groups: list[HyperPodGroup] = Field(min_length=1, max_length=100)


class HeadNode(_Strict):
    instance_type: str


class ComputeResource(_Strict):
    name: str
    instance_type: str
    instance_count: Any
    efa: bool

    _count = field_validator("instance_count")(_instance_count)


class SlurmQueue(_Strict):
    name: str
    # Applies only when no reservation is targeted: an ODCR or Capacity Block brings its own placement.
    placement_group: bool
    compute_resources: list[ComputeResource] = Field(min_length=1)


class PClusterSpec(_Strict):
    head_node: HeadNode
    queue_update_strategy: Literal["DRAIN", "TERMINATE", "COMPUTE_FLEET_STOP"]
    fsx_mount_dir: str = Field(default="/fsx", pattern=r"^/[a-zA-Z0-9._/-]+$")
    queue: SlurmQueue


class Template(_Strict):
    id: str
    version: int = Field(ge=1)
    backend: Backend
    family: str
    description: str = Field(min_length=1, max_length=300)
    reference: str = Field(min_length=1)
    hyperpod: HyperPodSpec | None = None
    pcluster: PClusterSpec | None = None
    parameters: dict[str, Parameter]

    @property
    def key(self) -> str:
        """`id@version`, as tagged on clusters and recorded in plans."""
        return f"{self.id}@{self.version}"

    def resolve(self, given: Mapping[str, str], *, count: int | None = None) -> dict[str, Any]:
        """Every declared parameter with its value (converted, defaulted, checked), or None where not given.

        `given` comes from `--param KEY=VALUE` (dashes in KEY read as underscores); `count` from `--count`.
        """
        values, problems = self._resolve(given, count=count)
        if problems:
            raise problems[0]
        return values

    def problems(self, given: Mapping[str, str], *, count: int | None = None) -> list[ParameterError]:
        """Every problem `resolve` would find, in the order it would find them (the first is the one it raises),
        so that the launch form can show each under its field at once."""
        return self._resolve(given, count=count)[1]

    def _resolve(self, given: Mapping[str, str], *, count: int | None) -> tuple[dict[str, Any], list[ParameterError]]:
        problems: list[ParameterError] = []
        supplied: dict[str, str] = {}
        for raw_name, value in given.items():
            name = raw_name.strip().replace("-", "_")
            if name not in self.parameters:
                known = ", ".join(self.parameters)
                problems.append(
                    ParameterError(f"{self.id} has no parameter {_show(raw_name)}; its parameters are {known}.")
                )
            elif name in supplied:
                problems.append(ParameterError(f"{name} is given twice; give it once.", field=name))
            else:
                supplied[name] = value
        if count is not None and COUNT in supplied:
            problems.append(
                ParameterError(f"{COUNT} is given twice (--count and --param {COUNT}); give it once.", field=COUNT)
            )
        values: dict[str, Any] = {}
        for name, spec in self.parameters.items():
            try:
                if name == COUNT and count is not None:
                    if isinstance(count, bool) or not isinstance(count, int):
                        raise ParameterError(f"{COUNT} must be {spec.hint()}; got {count!r}.")
                    values[name] = spec.check_int(name, count)
                elif name in supplied:
                    values[name] = spec.convert(name, supplied[name])
                elif spec.default is not None:
                    values[name] = spec.default
                elif spec.required:
                    raise ParameterError(
                        f"{name} is required: {spec.description.rstrip('.')}. Give {spec.hint()} with "
                        f"`--param {name}=VALUE`, or set it once for the org in the program file "
                        f"(orgs[].launch.{name}).",
                        field=name,
                    )
                else:
                    values[name] = None
            except ParameterError as problem:
                problems.append(problem)
        if not problems:  # combinations are judged on values that are each fine
            try:
                self._check_combinations(values)
            except ParameterError as problem:
                problems.append(problem)
        return values, problems

    def _check_combinations(self, values: Mapping[str, Any]) -> None:
        for first, second in _TOGETHER[self.backend]:
            declared = first in self.parameters and second in self.parameters
            if declared and (values.get(first) is None) != (values.get(second) is None):
                missing = first if values.get(first) is None else second
                raise ParameterError(
                    f"{missing} is missing: {first} and {second} are given together or not at all.", field=missing
                )
        if values.get("capacity_type") == "CAPACITY_BLOCK" and not values.get("capacity_reservation_id"):
            raise ParameterError(
                "capacity_reservation_id is required when capacity_type is CAPACITY_BLOCK "
                "(give the Capacity Block's cr- id).",
                field="capacity_reservation_id",
            )

    def with_defaults(
        self, given: Mapping[str, str], defaults: Mapping[str, str | int], *, count: int | None = None
    ) -> dict[str, str]:
        """`given` (`--param`, or the launch form's fields) completed with the org's launch defaults
        (`orgs[].launch`) for the parameters this template declares and `given` leaves out; what `resolve`
        takes. A default this template cannot use is refused here, saying it comes from the program file."""
        named = {raw.strip().replace("-", "_") for raw in given}
        merged = dict(given)
        for name, value in defaults.items():
            spec = self.parameters.get(name)
            if spec is None or name in named or (name == COUNT and count is not None):
                continue
            text = str(value)
            try:
                spec.convert(name, text)
            except ParameterError as error:
                raise ParameterError(
                    f"The org's launch default {name} (orgs[].launch.{name} in the program file) cannot be used: "
                    f"{error.message} Give `--param {name}=VALUE`, or ask a program admin to fix the program file.",
                    field=name,
                ) from None
            merged[name] = text
        return merged

    def instances(self, params: Mapping[str, Any]) -> dict[str, int]:
        """Instances requested per instance type, controller and head node included (for quota checks)."""
        count = _count(self, params)
        wanted: dict[str, int] = {}
        for instance_type, declared in self._slots():
            wanted[instance_type] = wanted.get(instance_type, 0) + (count if declared == COUNT else declared)
        return wanted

    @property
    def instance_types(self) -> list[str]:
        """The instance types the template creates, in declaration order."""
        return list(dict.fromkeys(instance_type for instance_type, _ in self._slots()))

    def _slots(self) -> list[tuple[str, Any]]:
        if self.hyperpod is not None:
            return [(group.instance_type, group.instance_count) for group in self.hyperpod.instance_groups]
        if self.pcluster is not None:
            head = [(self.pcluster.head_node.instance_type, 1)]
            return head + [(cr.instance_type, cr.instance_count) for cr in self.pcluster.queue.compute_resources]
        return []


def _count(template: Template, params: Mapping[str, Any]) -> int:
    count = params.get(COUNT)
    if isinstance(count, bool) or not isinstance(count, int):
        raise ParameterError(f"{COUNT} is missing from the parameters of {template.id}; use what resolve() returns.")
    return count


class Price(_Strict):
    hourly: float = Field(gt=0, allow_inf_nan=False)
    taken: date
    source: str = Field(min_length=1)
    confirmed: bool = True  # False: the figure could not be checked against AWS's own price list


class PriceTable(_Strict):
    currency: Literal["USD"]
    region: str
    prices: dict[str, Price]

    def price_per_hour(self, instance_type: str) -> float | None:
        """Exact type only: SageMaker (`ml.`) and EC2 prices of the same hardware differ."""
        entry = self.prices.get(instance_type)
        return entry.hourly if entry is not None else None

    def entry(self, instance_type: str) -> Price | None:
        return self.prices.get(instance_type)

    @property
    def taken(self) -> date | None:
        """The oldest figure's date: how stale the table may be."""
        return min((price.taken for price in self.prices.values()), default=None)


@dataclass(frozen=True)
class TemplateSet:
    templates: tuple[Template, ...]  # in id order
    prices: PriceTable

    def get(self, template_id: str) -> Template | None:
        return next((t for t in self.templates if t.id == template_id), None)

    @property
    def ids(self) -> list[str]:
        return [t.id for t in self.templates]

    def __iter__(self) -> Iterator[Template]:
        return iter(self.templates)

    def __len__(self) -> int:
        return len(self.templates)


# ---------------------------------------------------------------- loading and validation


class _Problems:
    """Problems of one file, each as `file: path: message`."""

    def __init__(self, file: str, sink: list[str]) -> None:
        self.file = file
        self.sink = sink

    def add(self, path: str, message: str) -> None:
        self.sink.append(f"{self.file}: {path}: {message}" if path else f"{self.file}: {message}")


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            continue  # pydantic's marker for a bad mapping key; the key itself is already in the path
        else:
            out += f".{part}" if out else part
    return out


def _add_validation_errors(error: ValidationError, problems: _Problems) -> None:
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        if item["type"] == "extra_forbidden":
            problems.add(_path(loc[:-1]), f"unknown key {loc[-1]!r}")
        elif item["type"] == "missing":
            problems.add(_path(loc), "required key is missing")
        else:
            problems.add(_path(loc), item["msg"].removeprefix("Value error, "))


def _read_yaml(path: Path, problems: _Problems) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        problems.add("", f"cannot read the file: {exc.strerror}")
        return None
    except UnicodeDecodeError:
        problems.add("", "not UTF-8 text")
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problems.add(where, f"not valid YAML: {getattr(exc, 'problem', None) or exc}")
        return None
    if not isinstance(data, dict):
        problems.add("", "the file must be a mapping of keys to values")
        return None
    return data


@cache
def _hyperpod_instance_types() -> frozenset[str]:
    import botocore.session

    shape = botocore.session.get_session().get_service_model("sagemaker").shape_for("ClusterInstanceType")
    return frozenset(getattr(shape, "enum", []))


def _check_instance_type(problems: _Problems, path: str, instance_type: str, backend: str, family: str | None) -> None:
    """Known to botocore, named the way the backend names it, and of the template's family where given."""
    if backend == "hyperpod" and not instance_type.startswith("ml."):
        problems.add(path, f"HyperPod instance types start with ml. (e.g. ml.{instance_type}); got {instance_type!r}")
        return
    if backend == "pcluster" and instance_type.startswith("ml."):
        problems.add(path, f"ParallelCluster uses EC2 instance types, without ml.; got {instance_type!r}")
        return
    if normalize_instance_type(instance_type) not in known_instance_types():
        problems.add(path, f"unknown instance type {instance_type!r} (not in the installed botocore models)")
        return
    if backend == "hyperpod" and instance_type not in _hyperpod_instance_types():
        problems.add(path, f"{instance_type!r} is not a HyperPod cluster instance type")
        return
    actual = normalize_instance_type(instance_type).split(".")[0]
    if family is not None and actual != family:
        problems.add(path, f"{instance_type} is a {actual} instance, but the template's family is {family}")


def _check_parameter(problems: _Problems, name: str, spec: Parameter, backend: str) -> None:
    path = f"parameters.{name}"
    known = _KNOWN_PARAMETERS[backend]
    if name not in known:
        problems.add(path, f"not a {backend} parameter (known: {', '.join(known)})")
    elif spec.type != known[name]:
        problems.add(f"{path}.type", f"must be {known[name]} for {name}")
    allowed = {"int": {"min", "max"}, "str": {"pattern", "max_length", "example"}, "enum": {"choices"}}[spec.type]
    for key in ("min", "max", "pattern", "max_length", "choices", "example"):
        if getattr(spec, key) is not None and key not in allowed:
            problems.add(f"{path}.{key}", f"does not apply to {spec.type} parameters")
    if spec.required and spec.default is not None:
        problems.add(f"{path}.default", "a required parameter takes no default")
    if spec.type == "int":
        _check_int_parameter(problems, path, name, spec, backend)
    elif spec.type == "enum":
        _check_enum_parameter(problems, path, name, spec)
    else:
        _check_str_parameter(problems, path, spec)


def _check_int_parameter(problems: _Problems, path: str, name: str, spec: Parameter, backend: str) -> None:
    if spec.min is None or spec.max is None:
        for key in ("min", "max"):
            if getattr(spec, key) is None:
                problems.add(f"{path}.{key}", "required for int parameters")
        return
    if spec.max < spec.min:
        problems.add(f"{path}.max", "must be >= min")
    if name == COUNT and spec.min < 1:
        problems.add(f"{path}.min", "must be at least 1 (a cluster needs a node)")
    if name == COUNT and backend == "hyperpod" and spec.max > HYPERPOD_MAX_INSTANCE_COUNT:
        problems.add(f"{path}.max", f"must be at most {HYPERPOD_MAX_INSTANCE_COUNT} (HyperPod's InstanceCount limit)")
    if spec.default is not None:
        if isinstance(spec.default, bool) or not isinstance(spec.default, int):
            problems.add(f"{path}.default", "must be a whole number")
        elif not spec.min <= spec.default <= spec.max:
            problems.add(f"{path}.default", f"must be between min and max ({spec.min} to {spec.max})")


def _check_enum_parameter(problems: _Problems, path: str, name: str, spec: Parameter) -> None:
    choices = spec.choices or []
    if not choices:
        problems.add(f"{path}.choices", "required for enum parameters (a non-empty list)")
        return
    if len(set(choices)) != len(choices):
        problems.add(f"{path}.choices", "has duplicates")
    valid = _ENUM_VALUES.get(name)
    if valid is not None:
        for choice in choices:
            if choice not in valid:
                problems.add(f"{path}.choices", f"{choice!r} is not one of {', '.join(valid)}")
    if spec.default is not None and spec.default not in choices:
        problems.add(f"{path}.default", f"must be one of the choices; got {spec.default!r}")


def _check_str_parameter(problems: _Problems, path: str, spec: Parameter) -> None:
    pattern: re.Pattern[str] | None = None
    if spec.pattern is not None:
        try:
            pattern = re.compile(spec.pattern)
        except re.error as exc:
            problems.add(f"{path}.pattern", f"not a valid regular expression: {exc}")
    for key in ("default", "example"):
        value = getattr(spec, key)
        if value is None:
            continue
        if not isinstance(value, str):
            problems.add(f"{path}.{key}", "must be text")
        elif pattern is not None and not pattern.fullmatch(value):
            problems.add(f"{path}.{key}", f"{value!r} does not match the pattern")
        elif spec.max_length is not None and len(value) > spec.max_length:
            problems.add(f"{path}.{key}", "is longer than max_length")


def _check_count_used(problems: _Problems, path: str, counts: list[Any]) -> None:
    if COUNT not in counts:
        problems.add(path, f"no group has instance_count: {COUNT}, so the {COUNT} parameter would change nothing")


def _check_hyperpod(problems: _Problems, spec: HyperPodSpec, family: str) -> None:
    names: set[str] = set()
    for index, group in enumerate(spec.instance_groups):
        path = f"hyperpod.instance_groups[{index}]"
        if len(group.name) > HYPERPOD_NAME_MAX or not HYPERPOD_NAME_PATTERN.fullmatch(group.name):
            problems.add(
                f"{path}.name", "1 to 63 letters, digits and hyphens, starting and ending with a letter or digit"
            )
        if group.name in names:
            problems.add(f"{path}.name", f"{group.name!r} is used by another group")
        names.add(group.name)
        scales = group.instance_count == COUNT
        _check_instance_type(
            problems, f"{path}.instance_type", group.instance_type, "hyperpod", family if scales else None
        )
        if group.partition is not None:
            if group.slurm_node_type == "Controller":
                problems.add(f"{path}.partition", "a Controller group belongs to no partition")
            elif len(group.partition) > HYPERPOD_NAME_MAX or not HYPERPOD_NAME_PATTERN.fullmatch(group.partition):
                problems.add(
                    f"{path}.partition", "letters, digits and hyphens, starting and ending with a letter or digit"
                )
    node_types = [group.slurm_node_type for group in spec.instance_groups]
    if any(node_types):
        if not all(node_types):
            problems.add(
                "hyperpod.instance_groups", "slurm_node_type is set on some groups only; set it on every group"
            )
        if node_types.count("Controller") != 1:
            problems.add("hyperpod.instance_groups", "exactly one group must have slurm_node_type: Controller")
    _check_count_used(problems, "hyperpod.instance_groups", [group.instance_count for group in spec.instance_groups])


def _check_pcluster(problems: _Problems, spec: PClusterSpec, family: str) -> None:
    _check_instance_type(problems, "pcluster.head_node.instance_type", spec.head_node.instance_type, "pcluster", None)
    resource_names = [("pcluster.queue.name", spec.queue.name)]
    seen: set[str] = set()
    for index, resource in enumerate(spec.queue.compute_resources):
        path = f"pcluster.queue.compute_resources[{index}]"
        resource_names.append((f"{path}.name", resource.name))
        if resource.name in seen:
            problems.add(f"{path}.name", f"{resource.name!r} is used by another compute resource")
        seen.add(resource.name)
        scales = resource.instance_count == COUNT
        _check_instance_type(
            problems, f"{path}.instance_type", resource.instance_type, "pcluster", family if scales else None
        )
    for path, name in resource_names:
        valid = PCLUSTER_RESOURCE_NAME_PATTERN.fullmatch(name) and len(name) <= PCLUSTER_RESOURCE_NAME_MAX
        if not valid or name == "default":
            problems.add(
                path, "lowercase letters, digits and hyphens, starting with a letter, at most 25, not 'default'"
            )
    _check_count_used(
        problems, "pcluster.queue.compute_resources", [cr.instance_count for cr in spec.queue.compute_resources]
    )


def _check_template(template: Template, path: Path, problems: _Problems) -> None:
    match = TEMPLATE_ID_PATTERN.fullmatch(template.id)
    if match is None:
        problems.add(
            "id", f"{template.id!r} is not <backend>-<family>[-<variant>] (e.g. hyperpod-p5, pcluster-trn1-efa)"
        )
    else:
        if match[1] != template.backend:
            problems.add("backend", f"is {template.backend}, but the id {template.id!r} names {match[1]}")
        if match[2] != template.family:
            problems.add("family", f"is {template.family!r}, but the id {template.id!r} names {match[2]!r}")
    if path.stem != template.id:
        problems.add("id", f"{template.id!r} does not match the file name (expected {template.id}.yaml)")
    other = "pcluster" if template.backend == "hyperpod" else "hyperpod"
    if getattr(template, other) is not None:
        problems.add(other, f"does not belong in a {template.backend} template")
    section = getattr(template, template.backend)
    if section is None:
        problems.add(template.backend, f"required for backend {template.backend}")
    elif isinstance(section, HyperPodSpec):
        _check_hyperpod(problems, section, template.family)
    else:
        _check_pcluster(problems, section, template.family)
    for name, spec in template.parameters.items():
        _check_parameter(problems, name, spec, template.backend)
    for name in _NEEDED_PARAMETERS[template.backend]:
        needed = template.parameters.get(name)
        if needed is None:
            problems.add("parameters", f"{name} is missing (the {template.backend} request needs it)")
        elif not needed.required and needed.default is None:
            problems.add(
                f"parameters.{name}", f"must be required or have a default (the {template.backend} request needs it)"
            )


def _parse(path: Path, model: type[ModelT], problems: _Problems) -> ModelT | None:
    """The file read as YAML and validated as `model`; None (with its problems recorded) when it is not."""
    data = _read_yaml(path, problems)
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        _add_validation_errors(exc, problems)
        return None


def _load_template(path: Path, sink: list[str]) -> Template | None:
    problems = _Problems(path.name, sink)
    before = len(sink)
    template = _parse(path, Template, problems)
    if template is None:
        return None
    _check_template(template, path, problems)
    return template if len(sink) == before else None


def _load_prices(path: Path, sink: list[str]) -> PriceTable | None:
    problems = _Problems(path.name, sink)
    if not path.is_file():
        problems.add("", "missing (the on-demand price table, one entry per instance type the templates use)")
        return None
    before = len(sink)
    table = _parse(path, PriceTable, problems)
    if table is None:
        return None
    if not _REGION_PATTERN.fullmatch(table.region):
        problems.add("region", f"{table.region!r} is not an AWS region such as us-east-1")
    for instance_type in table.prices:
        if normalize_instance_type(instance_type) not in known_instance_types():
            problems.add(f"prices.{instance_type}", "unknown instance type (not in the installed botocore models)")
    return table if len(sink) == before else None


def load_templates(folder: Path) -> TemplateSet:
    """Read and validate every template in `folder` and its price table; raise TemplateError with all problems.

    A folder whose files are as they were when it was last read (names, sizes, modification times) gives the same
    set without reading them again: the sandbox, the CLI's commands and the tests start many Pitcrews in one process,
    and parsing the YAML was most of a start. A refused folder is read again every time."""
    if not folder.is_dir():
        raise TemplateError([f"{folder}: not a folder"])
    files = sorted(path for path in folder.iterdir() if path.suffix in (".yaml", ".yml"))
    return _load_templates_as_of(folder, tuple((path.name, *_stamp(path)) for path in files))  # the cache key


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


@lru_cache(maxsize=4)
def _load_templates_as_of(folder: Path, stamps: tuple[tuple[str, int, int], ...]) -> TemplateSet:  # noqa: ARG001 - the key
    problems: list[str] = []
    for stray in sorted(folder.glob("*.yml")):
        problems.append(f"{stray.name}: templates use the .yaml extension; rename it to {stray.stem}.yaml")
    files = sorted(path for path in folder.glob("*.yaml") if path.name != PRICES_FILE)
    if not files:
        problems.append(f"{folder}: no templates (*.yaml) found")
    templates = [template for path in files if (template := _load_template(path, problems)) is not None]
    prices = _load_prices(folder / PRICES_FILE, problems)
    if problems or prices is None:
        raise TemplateError(problems)
    return TemplateSet(templates=tuple(sorted(templates, key=lambda t: t.id)), prices=prices)


# ---------------------------------------------------------------- launch defaults (orgs[].launch)


def check_launch_defaults(templates: TemplateSet, defaults: Mapping[str, str | int]) -> list[str]:
    """What is wrong with an org's launch defaults, each as `launch.NAME: message`: a name no template declares
    (with a did-you-mean), or a value a template declaring it would refuse. Empty when all can be used."""
    declared: dict[str, list[Template]] = {}
    for template in templates:
        for name in template.parameters:
            declared.setdefault(name, []).append(template)
    problems: list[str] = []
    for name, value in defaults.items():
        users = declared.get(name)
        if not users:
            hint = did_you_mean(name, declared) or " The templates' parameters are " + ", ".join(sorted(declared)) + "."
            problems.append(f"launch.{name}: no template has a parameter {name!r}.{hint}")
            continue
        for template in users:
            try:
                template.parameters[name].convert(name, str(value))
            except ParameterError as error:
                problems.append(f"launch.{name}: {error.message} (template {template.id})")
                break
    return problems


# ---------------------------------------------------------------- names, cost


def validate_cluster_name(name: str, backend: str) -> str | None:
    """Why `name` cannot name a cluster on `backend`, or None when it can."""
    if backend == "hyperpod":
        if len(name) > HYPERPOD_NAME_MAX or not HYPERPOD_NAME_PATTERN.fullmatch(name):
            return (
                "HyperPod cluster names are 1 to 63 letters, digits and hyphens, starting and ending with a letter "
                f"or digit; got {_show(name)}."
            )
        return None
    if backend == "pcluster":
        if len(name) > PCLUSTER_NAME_MAX or not PCLUSTER_NAME_PATTERN.fullmatch(name):
            return (
                "ParallelCluster cluster names are 2 to 60 letters, digits and hyphens, starting with a letter; "
                f"got {_show(name)}."
            )
        return None
    raise ValueError(f"unknown backend {backend!r}")


def launch_problems(
    template: Template,
    *,
    name: str,
    given: Mapping[str, str],
    defaults: Mapping[str, str | int],
    count: int | None,
) -> dict[str | None, str]:
    """Every field of a launch that cannot be used, at once (the launch form shows each under its own field):
    field ("name", COUNT, a parameter's name; None for none of them) -> why. The same rules as planning
    (`validate_cluster_name`, `with_defaults`, `resolve`); what needs AWS (a name in use, quota) is not here."""
    problems: dict[str | None, str] = {}
    if problem := validate_cluster_name(name, template.backend):
        problems["name"] = problem
    try:
        merged = template.with_defaults(given, defaults, count=count)
    except ParameterError as error:
        problems.setdefault(error.field, error.message)
        return problems
    for found in template.problems(merged, count=count):
        problems.setdefault(found.field, found.message)
    return problems


def estimated_cost(prices: PriceTable, instances: Mapping[str, int]) -> tuple[float, float] | None:
    """(USD per hour, USD per day) at on-demand prices, or None when any instance type has no price."""
    hourly = 0.0
    for instance_type, count in instances.items():
        price = prices.price_per_hour(instance_type)
        if price is None:
            return None
        hourly += price * count
    return hourly, hourly * 24


# ---------------------------------------------------------------- rendering


@cache
def _create_cluster_members() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """CreateCluster's top-level members, an instance group's members, and the Slurm config strategies."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    shape: Any = model.operation_model("CreateCluster").input_shape
    group: Any = shape.members["InstanceGroups"].member
    strategies: list[str] = []
    orchestrator = shape.members.get("Orchestrator")
    slurm = orchestrator.members.get("Slurm") if orchestrator is not None else None
    if slurm is not None and "SlurmConfigStrategy" in slurm.members:
        strategies = list(getattr(slurm.members["SlurmConfigStrategy"], "enum", []))
    return frozenset(shape.members), frozenset(group.members), frozenset(strategies)


def slurm_orchestrator_supported() -> bool:
    """Whether the installed botocore's CreateCluster takes Orchestrator.Slurm with the Managed strategy."""
    top, _, strategies = _create_cluster_members()
    return "Orchestrator" in top and "Managed" in strategies


def _tags(template: Template, org_id: str) -> list[dict[str, str]]:
    return [{"Key": ORG_TAG, "Value": org_id}, {"Key": TEMPLATE_TAG, "Value": template.key}]


def _param(params: Mapping[str, Any], name: str) -> Any:
    value = params.get(name)
    return value if value not in ("", None) else None


def _needed(template: Template, params: Mapping[str, Any], name: str) -> Any:
    value = _param(params, name)
    if value is None:
        raise ParameterError(f"{name} is missing from the parameters of {template.id}; use what resolve() returns.")
    return value


def render_hyperpod_request(template: Template, *, name: str, org_id: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of boto3's sagemaker `create_cluster` for this template (params from resolve())."""
    spec = template.hyperpod
    if template.backend != "hyperpod" or spec is None:
        raise ValueError(f"{template.id} is not a HyperPod template")
    problem = validate_cluster_name(name, "hyperpod")
    if problem:
        raise ParameterError(problem)
    count = _count(template, params)
    role = _needed(template, params, "execution_role_arn")
    source = _needed(template, params, "lifecycle_s3_uri")
    with_slurm = slurm_orchestrator_supported()
    _, group_members, _ = _create_cluster_members()
    fsx_dns, fsx_mount = _param(params, "fsx_dns_name"), _param(params, "fsx_mount_name")
    groups: list[dict[str, Any]] = []
    for group in spec.instance_groups:
        scales = group.instance_count == COUNT
        item: dict[str, Any] = {
            "InstanceGroupName": group.name,
            "InstanceType": group.instance_type,
            "InstanceCount": count if scales else group.instance_count,
            "LifeCycleConfig": {"SourceS3Uri": source, "OnCreate": group.on_create},
            "ExecutionRole": role,
            "ThreadsPerCore": group.threads_per_core,
        }
        storage: list[dict[str, Any]] = []
        if group.volume_size_gb is not None:
            storage.append({"EbsVolumeConfig": {"VolumeSizeInGB": group.volume_size_gb}})
        if fsx_dns and fsx_mount:
            # Every group mounts it: the controller serves /fsx paths in job scripts too.
            storage.append(
                {"FsxLustreConfig": {"DnsName": fsx_dns, "MountName": fsx_mount, "MountPath": spec.fsx_mount_dir}}
            )
        if storage:
            item["InstanceStorageConfigs"] = storage
        # The Managed strategy manages partitions declared per group; both come with API-driven Slurm config.
        if with_slurm and group.slurm_node_type is not None and "SlurmConfig" in group_members:
            slurm: dict[str, Any] = {"NodeType": group.slurm_node_type}
            if group.partition is not None:
                slurm["PartitionNames"] = [group.partition]
            item["SlurmConfig"] = slurm
        plan = _param(params, "training_plan_arn")
        if scales and plan is not None:
            item["TrainingPlanArn"] = plan
        groups.append(item)
    request: dict[str, Any] = {"ClusterName": name, "InstanceGroups": groups}
    subnet, security_group = _param(params, "subnet_id"), _param(params, "security_group_id")
    if subnet and security_group:  # VpcConfig needs both lists; resolve() refuses one without the other
        request["VpcConfig"] = {"SecurityGroupIds": [security_group], "Subnets": [subnet]}
    if with_slurm:
        request["Orchestrator"] = {"Slurm": {"SlurmConfigStrategy": "Managed"}}
    request["NodeRecovery"] = spec.node_recovery
    request["Tags"] = _tags(template, org_id)
    return request


def render_pcluster_config(
    template: Template, *, name: str, org_id: str, region: str, params: Mapping[str, Any]
) -> str:
    """The ParallelCluster v3 cluster configuration YAML for this template (params from resolve())."""
    spec = template.pcluster
    if template.backend != "pcluster" or spec is None:
        raise ValueError(f"{template.id} is not a ParallelCluster template")
    problem = validate_cluster_name(name, "pcluster")
    if problem:
        raise ParameterError(problem)
    if not _REGION_PATTERN.fullmatch(region):
        raise ParameterError(f"region must be an AWS region such as us-east-1; got {_show(region)}.")
    count = _count(template, params)
    subnet = _needed(template, params, "subnet_id")
    security_group = _param(params, "security_group_id")
    reservation = _param(params, "capacity_reservation_id")
    capacity_type = _param(params, "capacity_type") or "ONDEMAND"
    if capacity_type == "CAPACITY_BLOCK" and reservation is None:
        raise ParameterError("capacity_reservation_id is required when capacity_type is CAPACITY_BLOCK.")

    image: dict[str, Any] = {"Os": _needed(template, params, "os")}
    if _param(params, "custom_ami_id"):
        image["CustomAmi"] = params["custom_ami_id"]
    head_networking: dict[str, Any] = {"SubnetId": _param(params, "head_node_subnet_id") or subnet}
    queue_networking: dict[str, Any] = {
        "SubnetIds": [subnet],
        # Off whenever a reservation is targeted: the reservation fixes placement, and ParallelCluster warns
        # that a placement group with a Capacity Block causes insufficient-capacity errors.
        "PlacementGroup": {"Enabled": spec.queue.placement_group and reservation is None},
    }
    if security_group:
        head_networking["AdditionalSecurityGroups"] = [security_group]
        queue_networking["AdditionalSecurityGroups"] = [security_group]
    resources: list[dict[str, Any]] = []
    for resource in spec.queue.compute_resources:
        nodes = count if resource.instance_count == COUNT else resource.instance_count
        item: dict[str, Any] = {
            "Name": resource.name,
            "InstanceType": resource.instance_type,
            "MinCount": nodes,  # MinCount = MaxCount: static nodes, capacity kept (the reference's choice)
            "MaxCount": nodes,
            "Efa": {"Enabled": resource.efa},
        }
        if reservation is not None and resource.instance_count == COUNT:
            item["CapacityReservationTarget"] = {"CapacityReservationId": reservation}
        resources.append(item)
    config: dict[str, Any] = {
        "Region": region,
        "Image": image,
        "HeadNode": {"InstanceType": spec.head_node.instance_type, "Networking": head_networking},
        "Scheduling": {
            "Scheduler": "slurm",
            "SlurmSettings": {"QueueUpdateStrategy": spec.queue_update_strategy},
            "SlurmQueues": [
                {
                    "Name": spec.queue.name,
                    "CapacityType": capacity_type,
                    "Networking": queue_networking,
                    "ComputeResources": resources,
                }
            ],
        },
    }
    file_system = _param(params, "fsx_file_system_id")
    if file_system is not None:
        config["SharedStorage"] = [
            {
                "MountDir": spec.fsx_mount_dir,
                "Name": "fsx",
                "StorageType": "FsxLustre",
                "FsxLustreSettings": {"FileSystemId": file_system},
            }
        ]
    config["Tags"] = _tags(template, org_id)
    header = f"# Rendered by Pitcrew from template {template.key} for org {org_id}.\n"
    return header + yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


__all__ = [
    "ORG_TAG",
    "TEMPLATE_TAG",
    "Parameter",
    "ParameterError",
    "Price",
    "PriceTable",
    "Template",
    "TemplateError",
    "TemplateSet",
    "estimated_cost",
    "load_templates",
    "render_hyperpod_request",
    "render_pcluster_config",
    "slurm_orchestrator_supported",
    "validate_cluster_name",
]
