"""The wire format (robot_rl/data/wire.py) of transitions and weights: round trips, and every malformed payload refused as a MessageError
(size, zip bombs, header, version, columns, dtypes, shapes, non-finite values, pickles, risk models)."""

import io
import zipfile

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_rl.data.delivery_ledger import Numbered
from robot_rl.data.transition import Provenance, Transition

SHAPES = {"state": (5,), "front": (8, 8, 3)}


@pytest.fixture(scope="module")
def codec():
    from robot_rl.data import wire  # no ROS: the Ray fleet sends the same payloads

    return wire


def transitions(count=3, seed=1):
    rng = np.random.default_rng(seed)
    return [
        Numbered(
            Transition(
                obs={
                    "state": rng.random(5, dtype=np.float32),
                    "front": rng.integers(0, 255, (8, 8, 3), dtype=np.uint8),
                },
                next_obs={
                    "state": rng.random(5, dtype=np.float32),
                    "front": rng.integers(0, 255, (8, 8, 3), dtype=np.uint8),
                },
                action=rng.random(4, dtype=np.float32),
                reward=-0.5 * i,
                terminated=i == count - 1,
                truncated=False,
                intervened=i == 1,
                demo=False,
                first=i == 0,
                filtered=False,
                policy_action=np.zeros(4, np.float32),
                success=i == 2,
                violation=4 * i,
                origin=Provenance(episode="e" * 32, step=i, actor="actor-1"),
            ),
            seq=10 + i,
        )
        for i in range(count)
    ]


def schema(codec):
    return codec.TransitionSchema(SHAPES, 4)


def test_a_transition_sent_without_a_number_travels_as_seq_0(codec):
    """Only the node graph's actor numbers its steps (robot_rl.ros.plumbing.delivery); the Ray fleet's and a tool's plain
    transitions travel as ``seq`` 0, which the learner's ledger and the recorder do not check."""
    plain = [
        Transition(
            **{f: getattr(n.transition, f) for f in ("obs", "next_obs", "action", "reward", "terminated", "truncated")}
        )
        for n in transitions()
    ]
    decoded, _ = codec.decode_transitions(codec.encode_transitions([Numbered(t) for t in plain]), schema(codec))
    assert [(n.seq, n.floor) for n in decoded] == [(0, 0)] * 3
    assert not any(hasattr(t, "seq") for t in plain)


def test_transitions_round_trip_with_their_stream_identity(codec):
    original = transitions()
    decoded, meta = codec.decode_transitions(codec.encode_transitions(original, {"session": "abc"}), schema(codec))
    assert meta["session"] == "abc" and meta["codec"] == codec.CODEC_VERSION and len(decoded) == 3
    for numbered_before, numbered_back in zip(original, decoded):
        before, back = numbered_before.transition, numbered_back.transition
        assert (numbered_back.seq, numbered_back.floor) == (numbered_before.seq, numbered_before.floor)
        assert back.origin == before.origin and back.cost == before.cost
        for part in ("obs", "next_obs"):
            for key in getattr(before, part):
                np.testing.assert_array_equal(getattr(back, part)[key], getattr(before, part)[key])
        np.testing.assert_array_equal(back.action, before.action)
        for key in (
            "reward",
            "terminated",
            "intervened",
            "first",
            "success",
            "violation",
        ):
            assert getattr(back, key) == getattr(before, key), key


def column_payload(codec, change):
    """A valid transitions payload whose arrays went through ``change(arrays)``."""
    arrays, meta = codec.unpack(codec.encode_transitions(transitions()), codec.MAX_TRANSITIONS_BYTES)
    change(arrays)
    return codec.pack(arrays, {k: v for k, v in meta.items() if k != "codec"})


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda a: a.pop("reward"), r"missing \['reward'\]"),
        (lambda a: a.update(extra=np.zeros(3)), r"unexpected \['extra'\]"),
        (lambda a: a.update({"obs/state": a["obs/state"].astype(np.float64)}), "column obs/state is float64"),
        (lambda a: a.update({"obs/front": a["obs/front"][:, :4]}), r"expected uint8\[3, 8, 8, 3\]"),
        (lambda a: a["action"].__setitem__((1, 2), np.nan), "column action has non-finite values"),
        (lambda a: a["reward"].__setitem__(0, np.inf), "column reward has non-finite values"),
        (lambda a: a.update(action=np.zeros((3, 7), np.float32)), r"expected float32\[3, 4\]"),
    ],
)
def test_transitions_of_another_layout_or_with_non_finite_values_are_refused(codec, change, expected):
    from robot_rl.ros.plumbing.guard import MessageError

    with pytest.raises(MessageError, match=expected):
        codec.decode_transitions(column_payload(codec, change), schema(codec))


def test_header_version_count_pickles_and_size_are_checked(codec):
    from robot_rl.ros.plumbing.guard import MessageError

    good = codec.encode_transitions(transitions())
    arrays, meta = codec.unpack(good, codec.MAX_TRANSITIONS_BYTES)
    cases = {
        "version": _with_header(arrays, {**meta, "codec": 1}),
        "kind": codec.pack(arrays, {**{k: v for k, v in meta.items() if k != "codec"}, "kind": "weights"}),
        "count": codec.pack(arrays, {**{k: v for k, v in meta.items() if k != "codec"}, "count": 10**9}),
        "header": _with_header(arrays, None),
    }
    expected = {
        "version": "codec=1",
        "kind": "expected a transitions message",
        "count": "count=1000000000",
        "header": "no valid __meta__",
    }
    for name, payload in cases.items():
        with pytest.raises(MessageError, match=expected[name]):
            codec.decode_transitions(payload, schema(codec))
    evil = io.BytesIO()
    np.savez(
        evil,
        __meta__=np.frombuffer(f'{{"kind": "weights", "codec": {codec.CODEC_VERSION}}}'.encode(), np.uint8),
        x=np.array([object()], dtype=object),
    )
    with pytest.raises(MessageError, match="pickle"):  # object arrays are never unpickled from a message
        codec.unpack(evil.getvalue(), codec.MAX_WEIGHTS_BYTES)
    with pytest.raises(MessageError, match="more than the limit"):
        codec.decode_transitions(good + bytes(codec.MAX_TRANSITIONS_BYTES), schema(codec))


def test_without_a_schema_a_scalar_column_of_several_values_a_row_is_refused(codec):
    from robot_rl.ros.plumbing.guard import MessageError

    good = codec.encode_transitions(transitions())
    assert len(codec.decode_transitions(good, None)[0]) == 3  # the framing alone is checked
    arrays, meta = codec.unpack(good, codec.MAX_TRANSITIONS_BYTES)
    for key in ("reward", "episode"):
        wide = codec.pack(
            {**arrays, key: np.stack([arrays[key]] * 2, axis=1)}, {k: v for k, v in meta.items() if k != "codec"}
        )
        with pytest.raises(MessageError, match=f"column {key} has shape \\[3, 2\\]; expected one value a row"):
            codec.decode_transitions(wide, None)


def _with_header(arrays, meta):
    buffer = io.BytesIO()
    extra = {} if meta is None else {"__meta__": np.frombuffer(__import__("json").dumps(meta).encode(), np.uint8)}
    np.savez(buffer, **arrays, **extra)
    return buffer.getvalue()


def test_a_zip_bomb_is_refused_before_it_is_inflated(codec):
    from robot_rl.ros.plumbing.guard import MessageError

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        header = io.BytesIO()
        np.save(
            header,
            np.frombuffer(f'{{"kind": "transitions", "codec": {codec.CODEC_VERSION}, "count": 1}}'.encode(), np.uint8),
        )
        archive.writestr("__meta__.npy", header.getvalue())
        archive.writestr("obs/state.npy", b"\0" * (codec.MAX_TRANSITIONS_BYTES + 1))  # compresses to ~70 kB
    payload = buffer.getvalue()
    assert len(payload) < 1_000_000
    with pytest.raises(MessageError, match=r"payload \(unpacked\)"):
        codec.decode_transitions(payload, schema(codec))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_truncated_and_flipped_payloads_only_ever_raise_message_errors(codec, data):
    from robot_rl.ros.plumbing.guard import MessageError

    good = codec.encode_transitions(transitions(2))
    kind = data.draw(st.sampled_from(["random", "truncated", "flipped"]))
    if kind == "random":
        payload = data.draw(st.binary(max_size=4096))
    elif kind == "truncated":
        payload = good[: data.draw(st.integers(0, len(good) - 1))]
    else:
        position = data.draw(st.integers(0, len(good) - 1))
        payload = good[:position] + bytes([good[position] ^ data.draw(st.integers(1, 255))]) + good[position + 1 :]
    try:
        decoded, _ = codec.decode_transitions(payload, schema(codec))
    except MessageError:
        return
    for t in (n.transition for n in decoded):  # a flip that still decodes is still a valid transition of this schema
        assert t.obs["state"].shape == (5,) and np.all(np.isfinite(t.action))


def test_weights_must_match_the_actors_own_policy_and_risk_input(codec):
    from robot_rl.policies.safety_critic import SafetyCritic, SafetyCriticConfig
    from robot_rl.ros.plumbing.guard import MessageError

    rng = np.random.default_rng(0)
    policy = {"actor.net.0.weight": torch.randn(3, 5), "actor.net.0.bias": torch.randn(3)}
    expected = codec.weight_shapes(policy)
    risk = SafetyCritic(5, 4, SafetyCriticConfig(hidden=(16, 16)), seed=0).risk_model()
    back, meta = codec.decode_weights(
        codec.encode_weights({**policy, "safety.risk_model": risk}, {"version": 7}), expected, risk_input=(5, 4)
    )
    assert meta["version"] == 7
    torch.testing.assert_close(back["actor.net.0.weight"], policy["actor.net.0.weight"])
    state, actions = rng.random(5, dtype=np.float32), rng.random((6, 4), dtype=np.float32)
    np.testing.assert_allclose(back["safety.risk_model"](state, actions), risk(state, actions), rtol=1e-6)

    bad = {
        "shape": ({**policy, "actor.net.0.weight": torch.randn(4, 5)}, r"expected float32\[3, 5\]"),
        "missing": ({"actor.net.0.weight": policy["actor.net.0.weight"]}, r"missing \['actor.net.0.bias'\]"),
        "extra": ({**policy, "critic.w": torch.zeros(2)}, r"unexpected \['critic.w'\]"),
        "nan": ({**policy, "actor.net.0.bias": torch.tensor([0.0, float("nan"), 0.0])}, "non-finite"),
        "dtype": ({**policy, "actor.net.0.bias": torch.zeros(3, dtype=torch.float64)}, "float64"),
    }
    for weights, match in bad.values():
        with pytest.raises(MessageError, match=match):
            codec.decode_weights(codec.encode_weights(weights, {}), expected)
    wrong_input = SafetyCritic(7, 4, SafetyCriticConfig(hidden=(16, 16)), seed=0).risk_model()
    with pytest.raises(MessageError, match="risk model"):
        codec.decode_weights(codec.encode_weights({**policy, "r": wrong_input}, {}), expected, risk_input=(5, 4))
    with pytest.raises(MessageError, match="does not use"):
        codec.decode_weights(codec.encode_weights({**policy, "r": risk}, {}), expected, risk_input=None)
    with pytest.raises(MessageError, match="expected a weights message"):
        codec.decode_weights(codec.encode_transitions(transitions()), expected)


def with_ticks(batch, rng, width=26 + 9, ticks=5):
    """The transitions, the second without ticks, each other one with ``ticks`` fast-loop ticks of its step."""
    for index, n in enumerate(batch):
        if index == 1:
            continue
        times = index + np.arange(ticks) / ticks
        n.transition.streams = {
            "fast_features": (rng.normal(size=(ticks, width)).astype(np.float32), times),
            "fast_risk": (np.array([np.nan, *rng.random(ticks - 1)], np.float32), times),
            "fast_flags": (rng.integers(0, 2**14, ticks).astype(np.uint32), times),
            "fast_violation": (rng.integers(0, 4, ticks).astype(np.uint32), times),
        }
    return batch


def test_transitions_carry_their_fast_loop_ticks(codec):
    original = with_ticks(transitions(), np.random.default_rng(0))
    decoded, _ = codec.decode_transitions(codec.encode_transitions(original), schema(codec))
    assert decoded[1].transition.streams is None
    for before, back in ((b.transition, a.transition) for b, a in zip(original, decoded)):
        for name, (values, times) in (before.streams or {}).items():
            np.testing.assert_array_equal(back.streams[name][0], values)  # NaN risk included
            np.testing.assert_array_equal(back.streams[name][1], times)
            assert back.streams[name][0].dtype == values.dtype


@pytest.mark.parametrize(
    "breakage, message",
    [
        (lambda a: a.update({"streams/fast_wish/values": a["streams/fast_risk/values"]}), "not one of"),
        (lambda a: a.pop("streams/fast_risk/count"), "values, time and count"),
        (lambda a: a.update({"streams/fast_features/values": a["streams/fast_features/values"][:, :20]}), "columns"),
        (lambda a: a.update({"streams/fast_flags/values": a["streams/fast_flags/values"].astype(np.int64)}), "uint32"),
        (lambda a: a["streams/fast_risk/values"].__setitem__(2, np.inf), "out of range"),
        (lambda a: a["streams/fast_risk/values"].__setitem__(2, 1.5), "out of range"),
        (lambda a: a["streams/fast_features/values"].__setitem__((3, 4), np.nan), "out of range"),
        (lambda a: a["streams/fast_violation/time"].__setitem__(3, -5.0), "go back"),
        (lambda a: a["streams/fast_flags/count"].__setitem__(0, 6), "expected 11 finite s"),
        (lambda a: a.update({"streams/fast_risk/count": np.array([5, 0], np.int64)}), "expected 3 rows"),
    ],
)
def test_malformed_ticks_are_refused(codec, breakage, message):
    from robot_rl.ros.plumbing.guard import MessageError

    arrays, meta = codec.unpack(
        codec.encode_transitions(with_ticks(transitions(), np.random.default_rng(0))), codec.MAX_TRANSITIONS_BYTES
    )
    breakage(arrays)
    with pytest.raises(MessageError, match=message):
        codec.decode_transitions(codec.pack(arrays, meta), schema(codec))
