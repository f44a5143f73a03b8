"""The settings table of the equal-settings races (fastrl.bench.settings): each translation
lands on the settings it came from, in both systems' terms."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from fastrl.bench.settings import (
    SAC_TWINS,
    SB3_SAC_DEFAULTS,
    TWINS,
    NoTwin,
    PPOSettings,
    SACSettings,
    fastrl_at_zoo,
    from_fastrl,
    from_zoo,
    sb3_at_fastrl,
    to_sb3,
)
from fastrl.bench.solve import CONFIGS, TASKS, shipped_config
from fastrl.bench.zoo import ZOO, Linear
from fastrl.config import load_config

PPO_TASKS = ("cartpole-ppo", "hopper-ppo", "identity-masked-ppo", "cartpole-novel-lstm")
SAC_TASKS = ("pendulum-sac", "halfcheetah-sac")


def test_every_setting_has_a_twin_in_the_table():
    assert set(TWINS) == {f.name for f in dataclasses.fields(PPOSettings)}
    assert set(SAC_TWINS) == {f.name for f in dataclasses.fields(SACSettings)}


@pytest.mark.parametrize("task", PPO_TASKS + SAC_TASKS)
def test_fastrl_given_the_zoo_s_settings_reads_back_as_the_zoo_s(task):
    cfg = shipped_config(task)
    zoo = from_zoo(ZOO[task])
    at_zoo = load_config(CONFIGS / TASKS[task].config,
                         [*TASKS[task].overrides, *fastrl_at_zoo(task, cfg)])
    assert from_fastrl(at_zoo) == zoo
    # the engine's own settings stay fastrl's
    assert at_zoo.infra.max_policy_lag == cfg.infra.max_policy_lag
    assert at_zoo.algo.replay.max_ahead_steps == cfg.algo.replay.max_ahead_steps


@pytest.mark.parametrize("task", (*PPO_TASKS, "pendulum-sac"))
def test_sb3_given_fastrl_s_settings_reads_back_as_fastrl_s(task):
    cfg = shipped_config(task)
    entry = sb3_at_fastrl(task, cfg)
    if task == "cartpole-novel-lstm":  # the critic's own LSTM, as fastrl's config has it
        assert not cfg.algo.shared_core
        assert not entry.policy_kwargs["shared_lstm"] and entry.policy_kwargs[
            "enable_critic_lstm"]
    assert from_zoo(entry) == from_fastrl(cfg)
    assert (entry.env_id, entry.algo) == (ZOO[task].env_id, ZOO[task].algo)


@pytest.mark.parametrize("overrides, words", [
    (["algo.shared_core=true"], "critic reads it detached"),
    (["algo.ortho_init=true"], "LSTMs at torch's init"),
])
def test_an_lstm_without_a_twin_in_recurrent_ppo_is_refused(overrides, words):
    cfg = load_config(CONFIGS / TASKS["cartpole-novel-lstm"].config, overrides)
    with pytest.raises(NoTwin, match=words):
        from_fastrl(cfg)
    shared = dataclasses.replace(ZOO["cartpole-novel-lstm"], policy_kwargs={
        **ZOO["cartpole-novel-lstm"].policy_kwargs, "shared_lstm": True})
    with pytest.raises(NoTwin, match="critic reads it detached"):
        from_zoo(shared)


def test_the_zoo_s_cartpole_entry_in_sb3_s_terms():
    s = from_zoo(ZOO["cartpole-ppo"])
    assert (s.n_envs, s.rollout_len, s.minibatch, s.epochs) == (8, 32, 256, 20)
    assert (s.lr, s.lr_decays, s.clip, s.clip_decays) == (0.001, True, 0.2, True)
    assert (s.hidden, s.activation, s.ortho_init, s.value_clip) == ((64, 64), "tanh", True,
                                                                   False)
    # and back: the zoo's own keyword arguments, schedules included
    kw = to_sb3(s, ZOO["cartpole-ppo"]).kwargs
    assert kw["learning_rate"] == Linear(0.001) and kw["clip_range"] == Linear(0.2)
    assert {k: kw[k] for k in ZOO["cartpole-ppo"].kwargs} == ZOO["cartpole-ppo"].kwargs


def test_the_value_loss_weighs_the_same_in_both_systems():
    # SB3: vf_coef * mean((R - V)^2); fastrl: algo.vf_coef * 0.5 * mean((R - V)^2)
    cfg = shipped_config("cartpole-ppo")
    assert sb3_at_fastrl("cartpole-ppo", cfg).kwargs["vf_coef"] == cfg.algo.vf_coef / 2
    hopper = ZOO["hopper-ppo"]
    at_zoo = load_config(CONFIGS / TASKS["hopper-ppo"].config,
                         [*TASKS["hopper-ppo"].overrides,
                          *fastrl_at_zoo("hopper-ppo", shipped_config("hopper-ppo"))])
    assert at_zoo.algo.vf_coef == 2 * hopper.kwargs["vf_coef"]


def test_what_has_no_twin_is_refused_with_the_reason():
    lstm = ZOO["cartpole-novel-lstm"]
    assert from_zoo(lstm).lstm == 64  # (and the critic an LSTM of its own)
    no_critic_lstm = dataclasses.replace(lstm, policy_kwargs={
        **lstm.policy_kwargs, "enable_critic_lstm": False})
    with pytest.raises(NoTwin, match="reads a core"):
        from_zoo(no_critic_lstm)
    with pytest.raises(NoTwin, match="only the PPO family and SAC"):
        from_zoo(ZOO["cartpole-dqn"])
    with pytest.raises(NoTwin, match="only PPO and SAC"):
        from_fastrl(shipped_config("cartpole-dqn"))
    # fastrl's HalfCheetah config trains its critics faster than its actor; SB3 cannot
    with pytest.raises(NoTwin, match="one learning_rate"):
        from_fastrl(shipped_config("halfcheetah-sac"))
    delayed = dataclasses.replace(ZOO["pendulum-sac"], kwargs={
        **ZOO["pendulum-sac"].kwargs, "target_update_interval": 2})
    with pytest.raises(NoTwin, match="target_update_interval"):
        from_zoo(delayed)
    apart = dataclasses.replace(ZOO["cartpole-ppo"], policy_kwargs=dict(
        net_arch=dict(pi=[64], vf=[128])))
    with pytest.raises(NoTwin, match="sizes both"):
        from_zoo(apart)


def test_the_zoo_s_sac_entry_in_sb3_s_terms():
    # the zoo's Pendulum entry sets the learning rate only: the rest are SAC's defaults
    s = from_zoo(ZOO["pendulum-sac"])
    assert (s.n_envs, s.lr, s.batch, s.learning_starts, s.updates_per_step) == (
        1, 1e-3, 256, 100, 1.0)
    assert (s.autotune, s.alpha, s.target_entropy, s.hidden) == (True, 1.0, None, (256, 256))
    same = dataclasses.replace(ZOO["pendulum-sac"], policy_kwargs=dict(
        net_arch=dict(pi=[64, 64], qf=[64, 64])))
    assert from_zoo(same).hidden == (64, 64)
    # fastrl's 4 envs at one update per env step: SB3 takes 4 gradient steps per step of
    # its 4 envs, and its entropy coefficient starts at fastrl's
    entry = sb3_at_fastrl("pendulum-sac", shipped_config("pendulum-sac"))
    assert (entry.n_envs, entry.kwargs["train_freq"], entry.kwargs["gradient_steps"]) == (
        4, 1, 4)
    assert entry.kwargs["ent_coef"] == "auto_0.2"
    half = dataclasses.replace(from_fastrl(shipped_config("pendulum-sac")),
                               updates_per_step=0.1)
    with pytest.raises(NoTwin, match="whole number of gradient steps"):
        to_sb3(half, ZOO["pendulum-sac"])


@pytest.mark.parametrize("kwargs, read", [
    (dict(gradient_steps=-1, train_freq=2), dict(updates_per_step=1.0)),  # as many as came
    (dict(ent_coef="auto_0.1"), dict(autotune=True, alpha=0.1)),
    (dict(ent_coef="0.05"), dict(autotune=False, alpha=0.05)),  # SB3 tunes auto* only
    (dict(target_entropy=-3.0), dict(target_entropy=-3.0)),
    (dict(train_freq=(2, "step"), gradient_steps=-2), dict(updates_per_step=1.0)),
])
def test_sb3_s_sac_arguments_read_as_sb3_means_them(kwargs, read):
    entry = dataclasses.replace(ZOO["pendulum-sac"], kwargs={**ZOO["pendulum-sac"].kwargs,
                                                             **kwargs})
    s = from_zoo(entry)
    assert {k: getattr(s, k) for k in read} == read


@pytest.mark.parametrize("kwargs, words", [
    (dict(action_noise="normal"), "action_noise"),
    (dict(gradient_steps=0), "always trains"),
    (dict(train_freq=(1, "episode")), "train_freq in episodes"),
])
def test_a_sac_argument_without_a_twin_is_refused(kwargs, words):
    entry = dataclasses.replace(ZOO["pendulum-sac"], kwargs={**ZOO["pendulum-sac"].kwargs,
                                                             **kwargs})
    with pytest.raises(NoTwin, match=words):
        from_zoo(entry)


def test_sb3_s_sac_defaults_are_sb3_s():
    sb3 = pytest.importorskip("stable_baselines3")
    import inspect

    params = inspect.signature(sb3.SAC.__init__).parameters
    assert {k: params[k].default for k in SB3_SAC_DEFAULTS} == SB3_SAC_DEFAULTS


@pytest.mark.parametrize("marker, twins", [("| setting | fastrl | SB3 |", TWINS),
                                           ("| SAC setting | fastrl | SB3 |", SAC_TWINS)])
def test_docs_bench_md_has_a_row_for_every_setting(marker, twins):
    page = (Path(__file__).resolve().parents[2] / "docs" / "bench.md").read_text()
    table = page.split(marker, 1)[1].split("\n\n", 1)[0]
    for fastrl_key, sb3_key in twins.values():
        for key in re.findall(r"(?:algo|infra)(?:\.\w+)+", fastrl_key):
            assert f"`{key}" in table, f"docs/bench.md's settings table lacks {key}"
        first = re.match(r"[\w.]+", sb3_key).group(0)
        assert first in table, f"docs/bench.md's settings table lacks {first}"


@pytest.mark.parametrize("task", ["cartpole-ppo", "identity-masked-ppo", "cartpole-novel-lstm",
                                  "pendulum-sac"])
def test_sb3_builds_its_model_at_fastrl_s_settings(task):
    pytest.importorskip("sb3_contrib")  # (the test extra installs it)
    from fastrl.bench.sb3_solve import make_env, make_model

    entry = sb3_at_fastrl(task, shipped_config(task))
    env = make_env(entry, "dummy", seed=1)
    try:
        model = make_model(entry, env, seed=1)
        assert model.n_envs == entry.n_envs
        if task.endswith("sac"):
            assert model.gradient_steps == entry.kwargs["gradient_steps"]
            assert model.log_ent_coef.exp().item() == pytest.approx(0.2)
            assert model.actor.latent_pi[0].out_features == 64
            assert (model.target_entropy, model.learning_starts, model.train_freq.frequency) \
                == (-1.0, 1000, 1)
            assert model.actor.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
        else:
            assert model.n_steps == entry.kwargs["n_steps"]
    finally:
        env.close()
