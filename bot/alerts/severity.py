"""How bad a node's fault is, from what its alert knows, and so which of its buttons comes first. Pure.

- **hard**: the hardware is broken and a reboot will not mend it: XID 79 (fallen off the bus), uncorrected ECC
  (XID 48, 94, 95; Trainium HBM or SRAM uncorrected ECC), a missing Trainium device (or GPU), Trainium hardware
  execution errors, HyperPod's own `…ErrorTerminate` verdict, a failed deep health check -> **Replace** first;
- **resettable**: a reset usually clears it: XID 13, 31, 43 (the application's faults, a GPU left in a bad
  state), a NeuronCore stuck while its siblings work, HyperPod's `…ErrorReboot` -> **Reboot** first;
- **divergence**: only a comparison with its peers (a throttled clock, slower EFA traffic, corrected ECC
  rising): nothing has failed yet -> **Watch** first (acknowledged, with a reminder in its thread if it is
  still open hours later);
- **unknown**: none of these: the buttons in their usual order.

The evidence is the alert's own words: AWS's status message, HyperPod's diagnosis (agent detections and the
last deep health check's result), the per-node metrics' evidence and cause (bot.node_metrics.culprit). The
first match in the order hard, resettable decides; a divergence is a faulty-node alert naming neither.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from enum import StrEnum

from bot.alerts.kind import Action


class Severity(StrEnum):
    HARD = "hard"
    RESETTABLE = "resettable"
    DIVERGENCE = "divergence"
    UNKNOWN = "unknown"


HARD_XIDS = frozenset({79, 48, 94, 95})  # off the bus; double-bit (uncorrected) ECC, contained/uncontained ECC
RESETTABLE_XIDS = frozenset({13, 31, 43})
_XID = re.compile(r"\bXID[\s:#]*(\d{1,3})\b", re.IGNORECASE)
_HARD_WORDS = re.compile(
    r"fallen off the bus|uncorrect\w* (?:\w+ )*?(?:ECC|memory error)|(?:ECC|memory) error\w* uncorrect"
    r"|Trainium devices? (?:missing|reported)|\bdevices? missing\b|GPU \S+ missing"
    r"|hardware execution errors|hardware error|ErrorTerminate\b|failed the deep health check"
    r"|deep health check failed",
    re.IGNORECASE,
)
_RESETTABLE_WORDS = re.compile(r"NeuronCore \S+ (?:\([^)]*\) )?stuck|stuck NeuronCore|ErrorReboot\b", re.IGNORECASE)


def severity(texts: Iterable[str], *, faulty: bool = False) -> Severity:
    """The severity the alert's texts show. `faulty`: a faulty-node alert (found by comparing the node with its
    peers), which, naming no hard or resettable fault, is a divergence."""
    said = " · ".join(t for t in texts if t)
    codes = {int(code) for code in _XID.findall(said)}
    if codes & HARD_XIDS or _HARD_WORDS.search(said):
        return Severity.HARD
    if codes & RESETTABLE_XIDS or _RESETTABLE_WORDS.search(said):
        return Severity.RESETTABLE
    return Severity.DIVERGENCE if faulty else Severity.UNKNOWN


FIRST = {
    Severity.HARD: Action.REPLACE,
    Severity.RESETTABLE: Action.REBOOT,
    Severity.DIVERGENCE: Action.WATCH,
}


def ordered(actions: Sequence[Action], level: Severity) -> tuple[Action, ...]:
    """The alert's buttons with the one its severity calls for first (when it is offered: Watch comes with
    Acknowledge, for a divergence only); the others keep their order."""
    offered = list(actions)
    if level is Severity.DIVERGENCE and Action.ACKNOWLEDGE in offered:
        offered.insert(0, Action.WATCH)
    first = FIRST.get(level)
    if first is None or first not in offered:
        return tuple(offered)
    return (first, *(action for action in offered if action is not first))
