"""Files shipped inside the `bot` package (package data), found through `importlib.resources` so a plain
`pip install .` works as well as an editable install: the reference-architecture templates with their price
table, and the example program file (`pitcrew example-program` prints it)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def shipped_templates() -> Path:
    """The folder of the pre-validated templates (`bot/templates/*.yaml`, `prices.yaml`)."""
    return Path(str(resources.files("bot") / "templates"))


def example_program() -> Path:
    """The example program file: twelve orgs on both backends, the sandbox's program."""
    return Path(str(resources.files("bot") / "examples" / "program.example.yml"))
