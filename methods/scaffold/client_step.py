"""SCAFFOLD's client step (Alg. 1 lines 7-13): the shared local update of the received model x under the corrected
gradient g − c_i + c, with plain SGD; then option II's c_i⁺, kept in the node state, and the shared reply plus Δc_i.

c_i starts at zero the first time a node trains (line 2) and lives in ``context.state``. K is the number of optimiser
steps the round took (the corrected objective counts them; epochs × ⌈n/B⌉ with n the samples trained on), η_l the
round's learning rate (``learning-rate`` · ``lr-decay``^(t−1)). Momentum is set to 0 for the local update: the
algorithm, and option II's (x − y_i)/(K η_l) as an estimate of the client's mean gradient, assume plain SGD steps.
A c_i⁺ with NaN or infinite values (the local update diverged) is not kept: the server refuses that reply, so its Δc_i
never reaches c, and a kept NaN c_i would make every later reply of the client NaN too.
"""

from __future__ import annotations

import dataclasses

from flwr.app import ArrayRecord, Message, RecordDict

from client_app.node import Node
from client_app.train_step import update_and_report
from methods.scaffold.control import all_finite, client_control_update, control_keys, correction, zero_control
from methods.scaffold.objective import CorrectedFactory
from methods.scaffold.records import CLIENT_CONTROL, CONTROL, DELTA_CONTROL, control_record, read_control
from profiling.spans import CLIENT_DATA, CLIENT_DECODE, span
from protocol.messages import ARRAYS, METRICS


def scaffold_train(node: Node, msg: Message) -> RecordDict:
    """Train from x with the correction c − c_i, update c_i (option II), reply with θ, the metrics and Δc_i."""
    with span(CLIENT_DATA):
        data = node.data()
    with span(CLIENT_DECODE):
        model, phi_fingerprint = node.global_model(msg)
    config = dataclasses.replace(node.config, local_epochs=node.local_epochs(msg), momentum=0.0)
    state = model.state_dict()
    keys = control_keys(model, model.upper_state_keys(config.freeze))
    x = {key: state[key].detach().cpu().clone() for key in keys}
    c = read_control(msg.content.array_records[CONTROL], x, keys, "the server's control variate")
    held = node.state.array_records.get(CLIENT_CONTROL)
    c_i = zero_control(x, keys) if held is None else read_control(held, x, keys, "this node's control variate")
    factory = CorrectedFactory(node.objective, correction(c, c_i))
    arrays, metrics = update_and_report(
        node, msg, model, phi_fingerprint, data, config=config, objective_factory=factory
    )
    if factory.built is None:
        raise RuntimeError("the local update did not build SCAFFOLD's objective")
    trained = model.state_dict()
    y = {key: trained[key].detach().cpu() for key in keys}
    _, learning_rate = node.round_of(msg)
    c_i_new, delta = client_control_update(c_i, c, x, y, factory.built.steps, learning_rate)
    if all_finite(c_i_new):  # a diverged update is refused by the server (its Δc_i never reaches c): keep c_i
        node.state[CLIENT_CONTROL] = control_record(c_i_new)
    return RecordDict({ARRAYS: ArrayRecord(arrays), METRICS: metrics, DELTA_CONTROL: control_record(delta)})
