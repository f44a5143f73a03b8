"""Observation encoders (fastrl.models.encoders): which spaces are images, the Nature CNN's
shapes, layouts and scaling, the built-in networks on images, the running observation
normaliser, the CNN an image too small for the one asked for gets, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from fastrl.models.encoders import (
    ImpalaCNN,
    NatureCNN,
    ObsFeatures,
    RunningNorm,
    SmallCNN,
    UnsupportedObservations,
    channels_last_convs,
    encoder_notes,
    image_layout,
    make_encoder,
    observe_observations,
)
from fastrl.models.policy import ActorCritic, flat_params, load_flat_params
from fastrl.models.qnet import QNetwork


def frames(*shape: int) -> spaces.Box:
    return spaces.Box(0, 255, shape, np.uint8)


@pytest.mark.parametrize("space, layout", [
    (frames(4, 84, 84), "CHW"),
    (frames(84, 84, 3), "HWC"),
    (frames(1, 40, 40), "CHW"),
    (spaces.Box(0, 1, (4, 84, 84), np.float32), None),  # not uint8
    (frames(84, 84), None),                              # no channel dim
    (frames(40, 40, 40), None),                          # no dim is a channel count
    (spaces.Discrete(5), None),
])
def test_image_spaces_are_3d_uint8_boxes_with_channels_first_or_last(space, layout):
    assert image_layout(space) == layout


def test_nature_cnn_reads_uint8_with_any_leading_dims_and_scales_inside():
    torch.manual_seed(0)
    cnn = NatureCNN(frames(4, 84, 84))
    obs = torch.randint(0, 256, (3, 2, 4, 84, 84), dtype=torch.uint8)
    out = cnn(obs)
    assert out.shape == (3, 2, 512) and out.dtype == torch.float32
    manual = cnn.fc(cnn.convs(obs.reshape(6, 4, 84, 84).float() / 255)).reshape(3, 2, 512)
    assert torch.allclose(out, manual)


def test_channels_last_images_give_the_channels_first_result():
    chw, hwc = NatureCNN(frames(3, 64, 48)), NatureCNN(frames(64, 48, 3))
    hwc.load_state_dict(chw.state_dict())
    obs = torch.randint(0, 256, (5, 3, 64, 48), dtype=torch.uint8)
    assert torch.allclose(chw(obs), hwc(obs.permute(0, 2, 3, 1)), atol=1e-6)


def test_impala_cnn_has_256_features_and_its_residual_stacks():
    torch.manual_seed(0)
    cnn = make_encoder(frames(84, 84, 4), "impala")
    assert isinstance(cnn, ImpalaCNN)
    out = cnn(torch.randint(0, 256, (2, 3, 84, 84, 4), dtype=torch.uint8))
    assert out.shape == (2, 3, 256)
    # 3 stacks of a conv and 2 blocks of 2 convs, then the linear layer over 32 x 11 x 11
    convs = [m for m in cnn.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 15 and cnn.fc[0].in_features == 32 * 11 * 11
    # a residual block is the identity plus its convolutions
    block = cnn.convs[2]
    x = torch.randn(1, 16, 5, 5)
    assert torch.allclose(block(x), x + block.convs(x))


def test_auto_picks_the_cnn_for_images_and_flat_features_otherwise():
    assert isinstance(make_encoder(frames(4, 84, 84)), NatureCNN)
    assert isinstance(make_encoder(spaces.Box(-1, 1, (4,))), ObsFeatures)
    assert isinstance(make_encoder(frames(4, 84, 84), "flat"), ObsFeatures)
    multi = make_encoder(spaces.MultiBinary(3))  # flattened as numbers, as ever
    assert multi.size == 3 and multi(torch.tensor([[1, 0, 1]], dtype=torch.int8)).shape == (1, 3)


@pytest.mark.parametrize("space, kind, words", [
    (spaces.Box(-1, 1, (4,)), "nature", ["nature encoder reads images", "Box"]),
    (spaces.Box(-1, 1, (4,)), "impala", ["impala encoder reads images", "Box"]),
])
def test_unreadable_observations_are_refused_by_name(space, kind, words):
    with pytest.raises(UnsupportedObservations) as err:
        make_encoder(space, kind)
    assert all(w in str(err.value) for w in words), err.value


@pytest.mark.parametrize("space, kind, cnn, note", [
    (frames(4, 84, 84), "auto", NatureCNN, None),
    (frames(4, 20, 20), "auto", ImpalaCNN, "20x20 pixels, below the nature CNN's 36x36; "
                                           "the impala CNN reads it"),
    (frames(1, 3, 7), "auto", SmallCNN, "3x7 pixels, below the nature CNN's 36x36; the "
                                        "small CNN reads it"),
    (frames(3, 6, 6), "impala", SmallCNN, "6x6 pixels, below the impala CNN's 8x8; the "
                                          "small CNN reads it"),
    (frames(4, 84, 84), "small", SmallCNN, None),
    (frames(3, 8, 8), "nature", ImpalaCNN, "8x8 pixels, below the nature CNN's 36x36; "
                                           "the impala CNN reads it"),
])
def test_an_image_too_small_for_its_cnn_gets_the_largest_that_reads_it(space, kind, cnn,
                                                                        note):
    encoder = make_encoder(space, kind)
    assert type(encoder) is cnn
    x = torch.randint(0, 256, (5, *space.shape), dtype=torch.uint8)
    assert encoder(x).shape == (5, encoder.size)
    assert encoder_notes(space, kind) == ([] if note is None else [f"observation: {note}"])
    record = spaces.Dict({"pixels": space, "speed": spaces.Box(-1, 1, (2,))})
    assert encoder_notes(record, kind) == ([] if note is None else [f"pixels: {note}"])
    assert type(make_encoder(record, kind).encoders[0]) is cnn


def test_actor_critic_on_images_shares_one_cnn_between_its_heads():
    policy = ActorCritic(frames(4, 84, 84), spaces.Discrete(6), [])
    names = [n for n, _ in policy.named_parameters()]
    assert sum(n.startswith("_features.") for n in names) == 8  # 3 convs, 1 linear
    assert not any("actor._features" in n or "critic._features" in n for n in names)
    obs = torch.randint(0, 256, (7, 4, 84, 84), dtype=torch.uint8)
    action, logp, value = policy.act(obs)
    assert action.shape == logp.shape == value.shape == (7,)
    assert torch.allclose(policy.evaluate(obs, action)[0], logp, atol=1e-6)
    # hidden_sizes=[]: each head is one linear layer on the 512 features
    assert policy.actor[0].in_features == 512 and len(policy.actor) == 1


def test_a_channels_last_cnn_computes_and_publishes_what_the_default_layout_does():
    torch.manual_seed(3)
    plain = ActorCritic(frames(4, 84, 84), spaces.Discrete(6), [])
    fast = channels_last_convs(ActorCritic(frames(4, 84, 84), spaces.Discrete(6), []))
    load_flat_params(fast, flat_params(plain))
    conv = next(m for m in fast.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert not conv.weight.is_contiguous()  # a plain view(-1) of it would fail
    # the workers' copy (default layout) gets the same vector, in the same order
    assert np.array_equal(flat_params(fast), flat_params(plain))
    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    action = torch.randint(0, 6, (5,))
    for a, b in zip(fast.evaluate(obs, action), plain.evaluate(obs, action)):
        assert torch.allclose(a, b, atol=1e-5)
    mlp = ActorCritic(spaces.Box(-1, 1, (3,)), spaces.Discrete(2), [8])
    assert channels_last_convs(mlp) is mlp  # no convolution: unchanged


def test_q_network_on_images():
    q = QNetwork(frames(4, 84, 84), spaces.Discrete(4), [256], dueling=True)
    out = q(torch.zeros(2, 4, 84, 84, dtype=torch.uint8))
    assert out.shape == (2, 4)
    assert isinstance(q._features, NatureCNN)


def test_running_statistics_are_those_of_all_batches_seen():
    torch.manual_seed(0)
    norm = RunningNorm(3)
    batches = [torch.randn(n, 3) * torch.tensor([1.0, 5.0, 0.1]) + 2 for n in (7, 100, 33)]
    for b in batches:
        norm.update(b)
    every = torch.cat(batches).double()
    assert norm.count.item() == pytest.approx(140, abs=1e-3)
    assert torch.allclose(norm.mean.double(), every.mean(0), atol=1e-5)
    # (the prior of SB3: variance 1 at a count of 1e-4, a few 1e-6 here)
    assert torch.allclose(norm.var.double(), every.var(0, unbiased=False), atol=1e-5)
    x = torch.tensor([[2.0, 2.0, 2.0], [2.0, 2.0, 1e6]])
    out = norm(x)
    assert out[1, 2] == RunningNorm.CLIP and torch.allclose(out[0], torch.zeros(3), atol=0.2)


def test_a_normalising_policy_observes_batches_and_its_statistics_travel_with_the_weights():
    space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
    policy = ActorCritic(space, spaces.Discrete(2), [8], normalize_obs=True)
    plain = ActorCritic(space, spaces.Discrete(2), [8])
    assert flat_params(policy).size == flat_params(plain).size + 4 + 4 + 1
    assert not any(p.requires_grad for n, p in policy.named_parameters() if "norm" in n)
    obs = torch.randn(16, 3, 4) * 10 + 3  # [T, N, obs] as the learner's batches come
    observe_observations(policy, obs)
    features = policy._features(obs.reshape(-1, 4))
    assert torch.allclose(features.mean(0), torch.zeros(4), atol=1e-4)
    assert torch.allclose(features.std(0, unbiased=False), torch.ones(4), atol=1e-3)
    observe_observations(plain, obs)  # nothing to update: no error, no change
    assert torch.equal(plain._features(obs), obs)


@pytest.mark.parametrize("space, kind", [(spaces.Discrete(5), "auto"), (frames(4, 84, 84), "auto")])
def test_normalisation_is_refused_where_it_has_no_meaning(space, kind):
    with pytest.raises(UnsupportedObservations, match="normalize_obs"):
        make_encoder(space, kind, normalize=True)
