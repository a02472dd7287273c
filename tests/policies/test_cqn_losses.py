"""CQN / CQN-AS losses at the reference's scale (younggyoseo/CQN ``CQNAgent.update_critic``).

On demo rows: ``bc_lambda`` x (first-order stochastic dominance loss + margin loss), each a mean over
levels, action numbers and bins, then over the demo rows; ``critic_lambda`` x the C51 cross-entropy.
"""

import numpy as np
import pytest
import torch

from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.policies.cqn import CQNAgent, CQNConfig, encode_action, fosd_loss, margin_loss, snap_to_grid
from robot_rl.policies.cqn_as import CQNASAgent, CQNASConfig
from robot_rl.runtime.session import make_agent
from tests.policies.batches import batch_of

NEVER = -1e4  # a logit whose softmax probability is 0 in float32


def small_agent(**overrides) -> CQNAgent:
    """A CQN agent whose support is [-1, 0, 1] (3 atoms) with 3 bins per level."""
    config = CQNConfig(levels=2, bins=3, atoms=3, v_min=-1.0, v_max=1.0, hidden=16, **overrides)
    return CQNAgent({"state": (3,)}, 1, config, seed=0)


def point_mass(atom: int, atoms: int = 3) -> torch.Tensor:
    """Logits of a return distribution with all its mass on ``atom``."""
    logits = torch.full((atoms,), NEVER)
    logits[atom] = 0.0
    return logits


def bins_at(*atoms: int) -> torch.Tensor:
    """Logits (bins, atoms): bin b puts all its mass on atom ``atoms[b]`` (Q = support[atom])."""
    return torch.stack([point_mass(atom) for atom in atoms])


def test_margin_loss_is_the_reference_mean_over_bins_less_its_constant():
    q = torch.tensor([[1.0, 1.2, 0.995]])
    # the reference's clamp(margin - (Q(demo) - Q), 0).mean(bins) counts the demo bin as margin / bins
    reference = torch.clamp(0.01 - (q[:, :1] - q), min=0).mean(-1)
    assert margin_loss(q, torch.tensor([0]), margin=0.01).item() == pytest.approx(reference.item() - 0.01 / 3)


def test_fosd_loss_matches_a_worked_example():
    # support [-1, 0, 1]; bin 0 = delta(0), bin 1 = delta(1), bin 2 = delta(-1)
    probs = bins_at(1, 2, 0).softmax(-1)[None]
    # demo bin 0: CDF [0, 1, 1]; vs bin 1 (CDF [0, 0, 1]): relu(0, 1, 0) -> 1; vs bin 2 (CDF [1, 1, 1]): 0
    assert fosd_loss(probs, torch.tensor([0])).item() == pytest.approx(1 / 3)
    # demo bin 1 dominates every bin: nothing to pay
    assert fosd_loss(probs, torch.tensor([1])).item() == 0.0


def test_demo_losses_are_the_reference_means_over_levels_numbers_and_demo_rows():
    agent = small_agent()
    # row 0 (demo), level 0: Q per bin [1, 0, -1], demo bin 1; level 1: every bin Q = 0, demo bin 0
    demo_row = torch.stack([bins_at(2, 1, 0), bins_at(1, 1, 1)])[:, None]  # (L=2, M=1, bins, atoms)
    online_row = torch.stack([bins_at(2, 2, 2), bins_at(2, 2, 2)])[:, None]  # huge violations, not a demo
    logits = torch.stack([demo_row, online_row])
    indices = torch.tensor([[[1], [0]], [[0], [0]]])
    weight = torch.ones(2, 2, 1)
    losses = agent.demo_losses(logits, indices, weight, torch.tensor([True, False]))
    # margin: level 0 (0.01 + 1 for bin 0, 0 for bin 2) / 3 bins; level 1 0.01 for two bins / 3; mean over levels
    assert losses["margin_loss"].item() == pytest.approx((1.01 / 3 + 0.02 / 3) / 2)
    # stochastic dominance: level 0 only bin 0 (delta(1)) beats delta(0): 1 / 3 bins; level 1 nothing
    assert losses["bc_fosd_loss"].item() == pytest.approx((1 / 3) / 2)
    # the reference: clamp(margin - (Q(a) - Q), 0).mean([-1, -2, -3]) on the demo row (the demo bins count
    # margin / bins each, a constant without gradient)
    q = agent.q_from_logits(demo_row)
    q_demo = q.gather(-1, indices[0][..., None])
    reference = torch.clamp(0.01 - (q_demo - q), min=0).mean([-1, -2, -3])
    assert losses["margin_loss"].item() == pytest.approx(reference.item() - 0.01 / 3)
    assert agent.demo_losses(logits, indices, weight, torch.tensor([False, False])) == {}


@pytest.mark.parametrize("levels, numbers", [(1, 1), (3, 1), (1, 4), (3, 4)])
def test_demo_losses_do_not_grow_with_levels_or_action_numbers(levels, numbers):
    agent = small_agent()
    # the same violation at every level and number: Q per bin [1, 0, -1], demo bin 1
    logits = bins_at(2, 1, 0).expand(1, levels, numbers, 3, 3)
    indices = torch.ones(1, levels, numbers, dtype=torch.long)
    losses = agent.demo_losses(logits, indices, torch.ones(1, levels, numbers), torch.tensor([True]))
    assert losses["margin_loss"].item() == pytest.approx(1.01 / 3)
    assert losses["bc_fosd_loss"].item() == pytest.approx(1 / 3)


def test_bc_losses_ignore_online_rows_and_charge_a_demo_bin_that_is_not_greedy():
    agent = small_agent()
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 2, 1, 3, 3, generator=generator)
    greedy = agent.q_from_logits(logits).argmax(-1)
    is_demo = torch.tensor([True, True, True, False, False, False])
    losses = agent.demo_losses(logits, (greedy + 1) % 3, torch.ones(6, 2, 1), is_demo)
    assert losses["bc_fosd_loss"].item() > 0 and losses["margin_loss"].item() > 0
    other_online = logits.clone()
    other_online[~is_demo] = torch.randn(3, 2, 1, 3, 3, generator=generator) * 10
    again = agent.demo_losses(other_online, (greedy + 1) % 3, torch.ones(6, 2, 1), is_demo)
    assert {name: value.item() for name, value in again.items()} == {
        name: value.item() for name, value in losses.items()
    }
    # a demo bin whose distribution sits above every other bin's by more than the margin costs nothing
    dominant = bins_at(0, 2, 0).expand(1, 2, 1, 3, 3)
    free = agent.demo_losses(dominant, torch.ones(1, 2, 1, dtype=torch.long), torch.ones(1, 2, 1), torch.tensor([True]))
    assert free["bc_fosd_loss"].item() == 0.0 and free["margin_loss"].item() == 0.0


def test_bc_losses_fall_and_the_greedy_action_becomes_the_demo_action_on_a_fixed_demo_batch():
    agent = CQNAgent({"state": (4,)}, 2, CQNConfig(levels=2, bins=3, hidden=32, utd=1, lr=1e-3), seed=0)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # a critic that already prefers some bins, so both BC losses start above 0
        agent.critic.head.advantage.weight.normal_(0, 0.3, generator=generator)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(8, 4)).astype(np.float32)
    demo_action = snap_to_grid(torch.as_tensor(rng.uniform(-1, 1, (8, 2)), dtype=torch.float32), 2, 3)
    batch = batch_of(
        {
            "obs": {"state": obs},
            "next_obs": {"state": obs + 0.1},
            "action": demo_action.numpy(),
            "reward": np.zeros(8, np.float32),
            "discount": np.full(8, 0.97, np.float32),
            "is_demo": np.ones(8, bool),
        }
    )
    first = agent.update(lambda: batch)
    assert first["bc_fosd_loss"] > 0 and first["margin_loss"] > 0
    for _ in range(60):
        last = agent.update(lambda: batch)
    assert last["bc_fosd_loss"] < 0.5 * first["bc_fosd_loss"] and last["margin_loss"] < 0.5 * first["margin_loss"]
    with torch.no_grad():
        greedy = agent.greedy(agent.critic, agent.encoder(agent.obs_tensors(batch.obs)))[0]
    torch.testing.assert_close(greedy, demo_action)


def test_cqn_as_bc_losses_skip_the_steps_past_the_episode_end():
    rng = np.random.default_rng(0)
    sequence = rng.uniform(-1, 1, (8, 3, 2)).astype(np.float32)
    mask = np.ones((8, 3), bool)
    mask[:4, 1:] = False  # demo rows 0-3 end after their first step
    arrays = {
        "obs": {"state": rng.normal(size=(8, 4)).astype(np.float32)},
        "next_obs": {"state": rng.normal(size=(8, 4)).astype(np.float32)},
        "action": sequence[:, 0],
        "action_sequence": sequence,
        "sequence_mask": mask,
        "reward": -np.ones(8, np.float32),
        "discount": np.full(8, 0.97, np.float32),
        "is_demo": np.arange(8) < 6,
    }
    config = CQNASConfig(horizon=3, levels=2, bins=3, hidden=16)
    batch = batch_of(arrays)
    metrics = CQNASAgent({"state": (4,)}, 2, config, seed=0).update(lambda: batch)
    changed = {**arrays, "action_sequence": sequence.copy()}
    changed["action_sequence"][:4, 1:] = -changed["action_sequence"][:4, 1:]  # what was never executed
    again = CQNASAgent({"state": (4,)}, 2, config, seed=0).update(lambda: batch_of(changed))
    assert metrics["bc_fosd_loss"] >= 0 and metrics["margin_loss"] > 0
    names = ("critic_loss", "bc_fosd_loss", "margin_loss")
    assert [float(again[name]) for name in names] == pytest.approx([float(metrics[name]) for name in names], rel=1e-6)
    # and the masked entries are left out of the mean (not counted as zeros): the weights follow the mask
    agent = CQNASAgent({"state": (4,)}, 2, config, seed=0)
    indices, _ = encode_action(torch.as_tensor(sequence).flatten(1), 2, 3)
    logits = torch.randn(8, 2, 6, 3, 51, generator=torch.Generator().manual_seed(0))
    _, weight_mask = agent.executed_actions(batch)
    weight = weight_mask[:, None].expand(-1, 2, -1).float()
    is_demo = batch.is_demo
    losses = agent.demo_losses(logits, indices, weight, is_demo)
    per_entry = margin_loss(agent.q_from_logits(logits), indices, config.bc_margin)
    valid = weight.bool() & is_demo[:, None, None]
    assert losses["margin_loss"].item() == pytest.approx(per_entry[valid].mean().item(), rel=1e-5)


def test_the_loss_weights_are_the_references_and_are_validated():
    for agent in ("cqn", "cqn_as"):
        cfg = load_config([f"agent={agent}"])
        assert (cfg.agent.critic_lambda, cfg.agent.bc_lambda, cfg.agent.bc_margin) == (0.1, 1.0, 0.01)
    with pytest.raises(ConfigError) as error:
        make_agent(load_config(["agent=cqn", "agent.bc_lambda=-1"]), {"state": (3,)}, 2, seed=0)
    assert error.value.key == "agent.bc_lambda" and "a number >= 0" in str(error.value)
    with pytest.raises(ConfigError) as error:  # the old name is refused by name
        load_config(["agent=cqn", "agent.margin_loss_weight=1"])
    assert error.value.key == "agent.margin_loss_weight"
