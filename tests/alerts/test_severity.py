"""Which button an alert offers first, from what it knows of the fault (bot.alerts.severity). Pure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.alerts.kind import Action
from bot.alerts.kinds.faulty import KIND as FAULTY
from bot.alerts.kinds.node import KIND as NODE
from bot.alerts.severity import Severity, ordered, severity

NODE_ACTIONS = (Action.ACKNOWLEDGE, Action.REPLACE, Action.REBOOT, Action.CHECK, Action.SILENCE)


@pytest.mark.parametrize(
    "text",
    [
        "Node health check failed: GPU XID 79 (fallen off the bus)",
        "GPU XID 79: GPU has fallen off the bus (sandbox fault)",
        "XID 48 on GPU 2",
        "XID 95 on GPU 0, then the GPU vanished",
        "Uncorrectable ECC error in HBM (sandbox fault)",
        "uncorrected HBM ECC errors on Trainium device 5",
        "Neuron device 5 reported an uncorrectable memory error (NeuronCore hardware error)",
        "14 of 16 Trainium devices reported (trn1.32xlarge)",
        "hardware execution errors on its Trainium devices (12 a minute)",
        "HyperPod: NvidiaErrorTerminate (XidHardwareFailure)",
        "Deep health check failed: Failure: InstanceStress: GPU 3 failed DCGM diag",
    ],
)
def test_hard_faults_put_replace_first(text: str) -> None:
    assert severity([text]) is Severity.HARD
    assert ordered(NODE_ACTIONS, Severity.HARD)[0] is Action.REPLACE


@pytest.mark.parametrize(
    "text",
    [
        "GPU XID 13: graphics engine exception",
        "XID 31 on GPU 4",
        "Xid 43: GPU stopped processing",
        "NeuronCore 7 (Trainium device 3) stuck at 0 % utilization, its node's other NeuronCores at 96 %",
        "HyperPod: NeuronErrorReboot (NeuronCoreStuck)",
    ],
)
def test_resettable_faults_put_reboot_first(text: str) -> None:
    assert severity([text]) is Severity.RESETTABLE
    assert ordered(NODE_ACTIONS, Severity.RESETTABLE)[0] is Action.REBOOT


def test_a_divergence_only_puts_watch_first_and_keeps_acknowledge() -> None:
    evidence = "GPU 3 at 1,210 MHz and 92 °C, peers 1,980 MHz"
    assert severity([evidence], faulty=True) is Severity.DIVERGENCE
    assert severity([evidence]) is Severity.UNKNOWN  # a failed node's alert is never a mere divergence
    assert ordered(NODE_ACTIONS, Severity.DIVERGENCE) == (Action.WATCH, *NODE_ACTIONS)


def test_hard_wins_over_resettable_and_numbers_are_whole() -> None:
    assert severity(["XID 13 on GPU 1", "XID 79 on GPU 2"]) is Severity.HARD
    assert severity(["XID 130 on GPU 1"]) is Severity.UNKNOWN  # not XID 13
    assert severity(["i-0795aa13", "node unresponsive"]) is Severity.UNKNOWN


@given(st.permutations(list(NODE_ACTIONS)), st.sampled_from(list(Severity)))
def test_ordering_moves_one_button_to_the_front_and_keeps_the_rest(actions: list[Action], level: Severity) -> None:
    result = ordered(actions, level)
    added = [Action.WATCH] if level is Severity.DIVERGENCE else []
    assert sorted(result) == sorted([*actions, *added])
    rest = list(result[1:])
    assert rest == [a for a in [*added, *actions] if a is not result[0]]


@given(st.lists(st.sampled_from([Action.ACKNOWLEDGE, Action.SILENCE]), unique=True))
def test_no_button_called_for_no_change(actions: list[Action]) -> None:
    assert ordered(actions, Severity.HARD) == tuple(actions)
    assert ordered(actions, Severity.RESETTABLE) == tuple(actions)


def _row(**values: object) -> SimpleNamespace:
    defaults: dict[str, object] = {
        "storm_id": None,
        "backend": "hyperpod",
        "status": "Failure",
        "message": "",
        "failed_message": "",
        "diagnosis": "",
        "node_ids": ["i-0abc"],
    }
    return SimpleNamespace(**{**defaults, **values})


def test_the_kinds_order_their_buttons_by_severity() -> None:
    xid79 = NODE.actions([_row(message="GPU XID 79")])  # type: ignore[list-item]
    assert xid79[0] is Action.REPLACE and Action.CHECK in xid79
    xid13 = NODE.actions([_row(message="GPU XID 13")])  # type: ignore[list-item]
    assert xid13[0] is Action.REBOOT
    checking = NODE.actions([_row(status="DeepHealthCheckInProgress")])  # type: ignore[list-item]
    assert Action.CHECK not in checking, "a node in a check is offered no second one"
    thermal = FAULTY.actions([_row(message="GPU 3 at 1,210 MHz and 92 °C, peers 1,980 MHz")])  # type: ignore[list-item]
    assert thermal[:2] == (Action.WATCH, Action.ACKNOWLEDGE)
    failed_check = FAULTY.actions(
        [_row(message="GPU 3 at 1,210 MHz", diagnosis="Deep health check failed: Failure: DCGM")]  # type: ignore[list-item]
    )
    assert failed_check[0] is Action.REPLACE, "a failed check offers Replace node first"
    pcluster = NODE.actions([_row(backend="pcluster", message="GPU XID 79")])  # type: ignore[list-item]
    assert Action.CHECK not in pcluster and Action.REPLACE not in pcluster
