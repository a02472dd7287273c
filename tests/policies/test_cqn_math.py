"""CQN / CQN-AS math against hand computations."""

import math

import numpy as np
import pytest
import torch

from robot_rl.policies.cqn import (
    categorical_projection,
    coarse_to_fine,
    decode_indices,
    encode_action,
    margin_loss,
    snap_to_grid,
)
from robot_rl.policies.cqn_as import TemporalEnsemble


def test_coarse_to_fine_returns_the_bin_centres_of_a_known_q_table():
    # 2 dims, 2 levels, 3 bins. Level 0: dim 0 prefers bin 1 ([-1/3, 1/3]), dim 1 bin 0 ([-1, -1/3]).
    # Level 1: dim 0 prefers bin 2 of [-1/3, 1/3] -> [1/9, 1/3]; dim 1 bin 1 of [-1, -1/3] -> [-7/9, -5/9].
    tables = [torch.tensor([[[0.0, 1.0, 0.0], [3.0, 0.0, 0.0]]]), torch.tensor([[[0.0, 0.0, 5.0], [1.0, 2.0, 0.0]]])]
    seen_centres = []

    def q_values(centres, level):
        seen_centres.append(centres.clone())
        return tables[level]

    action, indices, centres = coarse_to_fine(q_values, batch=1, dims=2, levels=2, bins=3)
    assert indices.tolist() == [[[1, 0], [2, 1]]]
    torch.testing.assert_close(seen_centres[0], torch.tensor([[0.0, 0.0]]))
    torch.testing.assert_close(seen_centres[1], torch.tensor([[0.0, -2 / 3]]))
    torch.testing.assert_close(action, torch.tensor([[2 / 9, -2 / 3]]))
    torch.testing.assert_close(centres, torch.stack(seen_centres, 1))


def test_ties_pick_a_random_bin():
    generator = torch.Generator().manual_seed(0)
    _, indices, _ = coarse_to_fine(
        lambda c, level: torch.zeros(c.shape[0], c.shape[1], 5),
        batch=400,
        dims=1,
        levels=1,
        bins=5,
        generator=generator,
    )
    counts = np.bincount(indices.flatten().numpy(), minlength=5)
    assert counts.min() > 40  # every bin is chosen, roughly uniformly (80 expected each)
    _, indices, _ = coarse_to_fine(
        lambda c, level: torch.tensor([0.0, 0.0, 1e-3, 0.0, 0.0]).expand(c.shape[0], 1, 5),
        batch=50,
        dims=1,
        levels=1,
        bins=5,
        generator=generator,
    )
    assert set(indices.flatten().tolist()) == {2}  # a difference above the tolerance is not a tie


def test_encoding_an_action_finds_its_cells_and_decoding_returns_their_centres():
    action = torch.tensor([[0.3, -0.95, 1.0]])
    indices, centres = encode_action(action, levels=2, bins=5)
    # level 0: width 0.4 -> 0.3 in bin 3 [0.2, 0.6], -0.95 in bin 0, 1.0 in bin 4 (upper edge clamps)
    assert indices[0, 0].tolist() == [3, 0, 4]
    # level 1: width 0.08 -> 0.3 in [0.28, 0.36] (bin 1), -0.95 in [-1, -0.92] (bin 0), 1.0 in bin 4
    assert indices[0, 1].tolist() == [1, 0, 4]
    torch.testing.assert_close(centres[0, 1], torch.tensor([0.4, -0.8, 0.8]))
    snapped = decode_indices(indices, 5)
    torch.testing.assert_close(snapped, torch.tensor([[0.32, -0.96, 0.96]]))
    torch.testing.assert_close(snap_to_grid(snapped, 2, 5), snapped)  # centres are fixed points


def test_c51_projection_matches_a_worked_example_and_conserves_mass():
    support = torch.tensor([-1.0, 0.0, 1.0])
    # r + gamma z = 0.5 + 0.5 * [-1, 0, 1] = [0, 0.5, 1]: 0.2 -> atom 1; 0.3 split half/half to atoms 1, 2; 0.5 -> atom 2
    projected = categorical_projection(
        torch.tensor([[0.2, 0.3, 0.5]]), torch.tensor([0.5]), torch.tensor([0.5]), support
    )
    torch.testing.assert_close(projected, torch.tensor([[0.0, 0.35, 0.65]]))
    # terminal (discount 0): everything lands on the reward, clipped into the support
    projected = categorical_projection(
        torch.tensor([[0.2, 0.3, 0.5]]), torch.tensor([3.0]), torch.tensor([0.0]), support
    )
    torch.testing.assert_close(projected, torch.tensor([[0.0, 0.0, 1.0]]))
    generator = torch.Generator().manual_seed(0)
    probs = torch.rand(64, 51, generator=generator).softmax(-1)
    reward, discount = torch.randn(64, generator=generator) * 5, torch.rand(64, generator=generator)
    projected = categorical_projection(probs, reward, discount, torch.linspace(-10, 10, 51))
    torch.testing.assert_close(projected.sum(-1), torch.ones(64))
    assert (projected >= 0).all()


def test_margin_loss_is_zero_when_the_demo_action_dominates_by_the_margin():
    q = torch.tensor([[1.0, 0.5, 0.98]])
    assert margin_loss(q, torch.tensor([0]), margin=0.01).item() == 0.0
    # bin 2 only 0.005 below the demo bin: 0.01 - 0.005 = 0.005; bin 1 above it by 0.2: 0.01 + 0.2 = 0.21;
    # the demo bin itself 0: the mean over the 3 bins, as the reference (a sum would weigh it 3x)
    q = torch.tensor([[1.0, 1.2, 0.995]])
    assert margin_loss(q, torch.tensor([0]), margin=0.01).item() == pytest.approx(0.215 / 3)


def test_temporal_ensemble_weights_and_masking():
    ensemble = TemporalEnsemble(horizon=3, action_dim=1, decay=0.5)
    w = math.exp(-0.5)
    assert ensemble(np.array([[1.0], [2.0], [3.0]]))[0] == pytest.approx(1.0)
    assert ensemble(np.array([[10.0], [20.0], [30.0]]))[0] == pytest.approx((2 + 10 * w) / (1 + w))
    assert ensemble(np.array([[100.0], [200.0], [300.0]]))[0] == pytest.approx(
        (3 + 20 * w + 100 * w**2) / (1 + w + w**2)
    )
    # the first chunk's horizon is over: the second is now the oldest (weight 1)
    assert ensemble(np.array([[0.0], [0.0], [0.0]]))[0] == pytest.approx((30 + 200 * w + 0 * w**2) / (1 + w + w**2))
    assert ensemble.valid.tolist() == [[True] * 3, [True, True, False], [True, False, False]]
    ensemble.reset()  # a new episode: nothing from the last one is used
    assert ensemble(np.array([[7.0], [8.0], [9.0]]))[0] == pytest.approx(7.0)
    assert ensemble.valid.sum() == 3


@pytest.mark.parametrize("v_min, v_max", [(-35.0, 1.0), (-21.8, 8.0)])
def test_a_target_at_the_support_ends_lands_on_the_end_atoms(v_min, v_max):
    """(v_max - v_min) / delta rounds to 50.000004 for [-21.8, 8] at 51 atoms on a CPU (and for the default
    [-35, 1] on a GPU): the projection put mass on atom 51, which does not exist (an index error on a CPU, a
    device-side assert that killed the process on a GPU)."""
    support = torch.linspace(v_min, v_max, 51)
    probs = torch.softmax(torch.randn(4, 51, generator=torch.Generator().manual_seed(0)), -1)
    reward = torch.tensor([1e3, -1e3, v_max, v_min])  # far past each end, and exactly at each end
    projected = categorical_projection(probs, reward, torch.tensor([0.97, 0.97, 0.0, 0.0]), support)
    torch.testing.assert_close(projected.sum(-1), torch.ones(4))
    assert projected[[0, 2], -1].min() > 1 - 1e-5 and projected[[1, 3], 0].min() > 1 - 1e-5
