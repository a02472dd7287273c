"""The fast critic: a learned risk model the safety node evaluates every tick, before the hard layer.

The policy-rate filter (:mod:`robot_rl.safety.filter` in the actor, 10 Hz) sees the policy's observation. The fast
loop (``robot_rl.ros.safety.safety_node``, 500 Hz-1 kHz) sees only the arm: this module defines what it feeds a risk model
from that (:mod:`.features`), a small numpy MLP and its files (:mod:`.model`), its settings (:mod:`.settings`) and
:class:`FastCriticFilter` (:mod:`.filter`), which makes the decision with the same
:class:`~robot_rl.safety.filter.SafetyFilter` (line search, recovery, hysteresis, dwell, deadline, bypass).

Feature layout (:data:`LAYOUT_VERSION` 1; every vector in the robot base frame). The state, :data:`STATE_FEATURES`,
19 values:

=================  =====  ==========================================================================================
``tcp_position``   0:3    measured TCP position, m
``tcp_rotvec``     3:6    measured TCP orientation (TCP -> base) as a rotation vector, rad, angle in [0, pi] (tool
                          straight down is near pi, where the axis' sign may flip: train on this same convention)
``tcp_linear``     6:9    TCP linear velocity, m/s, finite difference of the measured positions
``tcp_angular``    9:12   TCP angular velocity, rad/s, finite difference of the measured orientations
``force``          12:15  measured external force, N
``torque``         15:18  measured external torque, N m
``gripper``        18     the gripper command last sent, -1 open .. 1 closed
=================  =====  ==========================================================================================

The action, :data:`DELTA_FEATURES`, 7 values: the candidate command as a delta from the measured state, in physical
units (not normalised): ``delta_position`` 0:3 (target - measured, m), ``delta_rotvec`` 3:6 (rotation vector of
R_target R_measured^T, rad), ``delta_gripper`` 6 (target - last sent gripper command). The model's input is the
state followed by the delta, :data:`INPUT_WIDTH` = 26 columns, then C >= 0 columns of **task context** (up to
:data:`MAX_CONTEXT`): a compact summary of the task state the fast loop cannot measure, given once per policy step
(the sim tasks give the keep-out zone's corners where it is now and its velocity,
:meth:`~robot_rl.sim.panda_env.PandaTaskEnv.safety_context`; C is the first layer's inputs less 26). Input
normalisation is folded into the first layer.

Model: ``[(W0, b0), ..., (Wn, bn)]``, W_i of shape (in, out), ReLU or tanh after every layer but the last, whose
single output is a logit: risk = sigmoid(logit) in [0, 1]. Stored as an ``.npz`` (``W0``, ``b0``, ..., ``activation``
"relu" | "tanh", ``layout``, optional ``version``) read with ``allow_pickle=False``; every array is checked (names,
float32/float64, finite, shapes that chain from :data:`INPUT_WIDTH` to 1, a bounded size) and a bad one raises
:class:`FastCriticError` naming what is wrong.

Candidates scored in one batch when the commanded delta alone is risky or the filter is engaged
(:class:`FastCriticFilter`; otherwise the commanded delta is scored alone): the commanded delta scaled by ``scales`` (the
line search over its translation and rotation; the gripper is kept), then the recovery candidates: hold the
measured pose, retreat ``retreat_distance`` along the measured external force (the direction the hard layer
retreats in: with the push, away from the contact) and, with ``escape_step`` > 0, steps of that length along
+-x, +-y, +-z. A model that is missing, raises, returns NaN or misses its CPU-time deadline, or an arm state older
than the hard layer's ``state_timeout``, or a model that reads task context the loop was not given (or of another
width), is bypassed: the command passes unchanged, and the hard layer (always applied after this) alone protects
the arm.
"""

from .features import (
    ACTIVATIONS,
    DELTA_FEATURES,
    DELTA_WIDTH,
    FORCE,
    INPUT_WIDTH,
    LAYOUT_VERSION,
    MAX_BYTES,
    MAX_CONTEXT,
    MAX_LAYERS,
    MAX_PARAMETERS,
    MAX_WIDTH,
    MIN_TWIST_DT,
    STATE_FEATURES,
    STATE_WIDTH,
    TcpMotion,
    command_delta,
    command_from_delta,
    fast_state,
    feature_slices,
    tick_features,
    turn_between,
)
from .filter import (
    BYPASS_REASONS,
    FAST_CRITIC_KEY,
    NO_CONTEXT,
    FastCriticFilter,
    FastDecision,
    decision_flags,
    fast_critic_filter,
)
from .model import FORWARD, FastCriticError, FastCriticModel, check_layers, read_npz
from .settings import FastCriticSettings, fast_critic_config, fast_critic_settings, load_fast_model

__all__ = [
    "ACTIVATIONS",
    "BYPASS_REASONS",
    "DELTA_FEATURES",
    "DELTA_WIDTH",
    "FAST_CRITIC_KEY",
    "FORCE",
    "FORWARD",
    "INPUT_WIDTH",
    "LAYOUT_VERSION",
    "MAX_BYTES",
    "MAX_CONTEXT",
    "MAX_LAYERS",
    "MAX_PARAMETERS",
    "MAX_WIDTH",
    "MIN_TWIST_DT",
    "NO_CONTEXT",
    "STATE_FEATURES",
    "STATE_WIDTH",
    "FastCriticError",
    "FastCriticFilter",
    "FastCriticModel",
    "FastCriticSettings",
    "FastDecision",
    "TcpMotion",
    "check_layers",
    "command_delta",
    "command_from_delta",
    "decision_flags",
    "fast_critic_config",
    "fast_critic_filter",
    "fast_critic_settings",
    "fast_state",
    "feature_slices",
    "load_fast_model",
    "read_npz",
    "tick_features",
    "turn_between",
]  # fmt: skip
