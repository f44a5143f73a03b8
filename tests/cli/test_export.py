"""Policy export (fastrl.export, python -m fastrl.export) of checkpoints of tiny real runs:
PPO and DQN on CartPole (Discrete actions) and SAC on Pendulum (Box actions), in both formats. The
artifacts, loaded by onnxruntime and torch.export.load, act as the checkpoint's eager
deterministic policy does; the sidecar describes them; bad input exits 2 in one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import numpy as np
import onnxruntime
import pytest
import torch
from gymnasium import spaces
from helpers import TINY, ours_in_shm, shm_left

import fastrl
from fastrl import Trainer, load_config
from fastrl.eval.policy import load_policy
from fastrl.export import (
    INSTALL,
    DeterministicAction,
    ExportError,
    export_policy,
    load_artifact,
    main,
    write_artifact,
)
from fastrl.models.policy import ActorCritic

pytestmark = pytest.mark.timeout(300)

# Serial runtime (no processes to start), short and small: the policies only need to be
# trained ones, not good ones.
RUN = [*TINY, "infra.runtime=serial", "infra.num_workers=1", "algo.total_steps=1024",
       "algo.target_return=null", "log.eval_every_steps=100000", "log.tensorboard=false"]
SMALL_OFF_POLICY = ["algo.hidden_sizes=[32,32]", "algo.replay.batch_size=32",
                    "algo.replay.learning_starts=256", "algo.replay.updates_per_step=0.25"]


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The serial runtime trains in this process with torch's thread count; two threads on a
    loaded 2-core machine make SAC's updates 10x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def train(tmp_path_factory, config: str, overrides: list[str]):
    """The run folder of a short serial run of ``config`` with ``overrides``."""
    before, since = ours_in_shm(), time.time()
    tmp = tmp_path_factory.mktemp("export-run")
    result = Trainer(load_config(config, [*RUN, *overrides, f"log.run_dir={tmp}"])).fit()
    assert not shm_left(before, since), "the run left shared memory behind"
    assert result.checkpoint is not None
    return result.run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run directories by algo: ppo and dqn (CartPole-v1, Discrete), sac (Pendulum-v1, Box),
    ppo with the Nature CNN over Catch's uint8 frames, and ppo normalising observations."""
    return {"ppo": train(tmp_path_factory, "configs/cartpole_ppo.yaml", []),
            "ppo-cnn": train(tmp_path_factory, None, ["env.id=fastrl/Catch-v0",
                                                      "algo.hidden_sizes=[]"]),
            "ppo-norm": train(tmp_path_factory, "configs/cartpole_ppo.yaml",
                              ["algo.normalize_obs=true"]),
            "dqn": train(tmp_path_factory, "configs/cartpole_dqn.yaml", SMALL_OFF_POLICY),
            "sac": train(tmp_path_factory, "configs/pendulum_sac.yaml", SMALL_OFF_POLICY)}


def sampled(space: spaces.Space, n: int, seed: int) -> np.ndarray:
    """``n`` samples of ``space`` drawn with ``seed``, stacked."""
    space.seed(seed)
    return np.stack([space.sample() for _ in range(n)])


def eager_actions(run_dir, obs: np.ndarray) -> np.ndarray:
    """The checkpoint's deterministic actions as evaluation takes them, clipped for a Box."""
    loaded = load_policy(run_dir)
    action = loaded.policy.act(torch.from_numpy(obs), True)[0].numpy()
    space = loaded.plan.act_space
    return np.clip(action, space.low, space.high) if isinstance(space, spaces.Box) else action


def assert_acts_like_the_checkpoint(artifact, fmt: str, run_dir) -> None:
    """The exported artifact's actions equal the checkpoint's eager deterministic ones,
    for batches of 1 and 64."""
    obs_space = load_policy(run_dir).plan.obs_space
    run = load_artifact(artifact, fmt, obs_space)
    for n in (1, 64):  # the batch dimension is dynamic
        obs = sampled(obs_space, n, seed=n)
        got, want = run(obs), eager_actions(run_dir, obs)
        assert got.shape == want.shape and got.dtype == want.dtype
        if np.issubdtype(want.dtype, np.integer):
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("algo", ["ppo", "ppo-cnn", "ppo-norm", "dqn", "sac"])
@pytest.mark.parametrize("fmt", ["onnx", "torch-export"])
def test_export_acts_like_the_checkpoint_and_describes_itself(algo, fmt, runs, tmp_path):
    loaded = load_policy(runs[algo])
    out = tmp_path / f"policy-{algo}.{fmt}"
    done = export_policy(loaded, fmt, out)
    assert done.artifact == out and done.sidecar == tmp_path / f"{out.name}.json"
    assert_acts_like_the_checkpoint(out, fmt, runs[algo])

    meta = json.loads(done.sidecar.read_text())
    manifest = loaded.checkpoint.manifest
    assert meta == done.metadata
    assert meta["format"] == fmt and meta["algo"] == algo.split("-")[0]
    assert meta["env_id"] == loaded.config.env.id == manifest["env_id"]
    assert meta["config_hash"] == manifest["config_hash"]
    assert meta["fastrl_version"] == fastrl.__version__
    assert meta["checkpoint"] == str(loaded.checkpoint.path.resolve())
    assert meta["global_step"] == loaded.checkpoint.global_step == 1024
    assert meta["normalizer_baked_in"] is (algo == "ppo-norm")
    obs_space, act_space = loaded.plan.obs_space, loaded.plan.act_space
    assert meta["inputs"] == [{"name": "obs", "shape": ["batch", *obs_space.shape],
                               "dtype": obs_space.dtype.name}]  # uint8 frames stay uint8
    assert meta["outputs"][0]["name"] == "action"
    assert meta["outputs"][0]["shape"] == ["batch", *act_space.shape]
    if fmt == "onnx":  # the sidecar describes the graph as onnxruntime sees it
        (graph_input,) = onnxruntime.InferenceSession(out).get_inputs()
        assert [graph_input.name, graph_input.shape] == ["obs", meta["inputs"][0]["shape"]]
    if isinstance(act_space, spaces.Discrete):
        assert meta["action_space"] == {"kind": "Discrete", "shape": [], "dtype": "int64",
                                        "n": int(act_space.n), "start": 0}
    else:
        assert meta["action_space"] == {"kind": "Box", "shape": list(act_space.shape),
                                        "dtype": "float32", "low": act_space.low.tolist(),
                                        "high": act_space.high.tolist()}


@pytest.mark.parametrize("fmt", ["onnx", "torch-export"])
def test_discrete_start_and_box_bounds_are_baked_in(fmt, tmp_path):
    # Discrete(3, start=-1) actions from one-hot Discrete(5, start=2) observations, and a
    # Gaussian mean far outside a narrow Box: what act() alone would not keep in bounds.
    obs_space = spaces.Discrete(5, start=2)
    cases = {"discrete": spaces.Discrete(3, start=-1),
             "box": spaces.Box(-1e-3, 1e-3, (2,), np.float32)}
    obs = np.arange(2, 7, dtype=np.int64)
    for name, act_space in cases.items():
        policy = ActorCritic(obs_space, act_space, [16])
        torch.nn.init.normal_(policy.actor[-1].weight, std=10.0)
        out = tmp_path / name
        write_artifact(DeterministicAction(policy, obs_space, act_space),
                       torch.from_numpy(obs), fmt, out, ["obs"])
        got = load_artifact(out, fmt, obs_space)(obs)
        want = policy.act(torch.from_numpy(obs), True)[0].numpy()
        if name == "discrete":
            np.testing.assert_array_equal(got, want)
            assert set(got) <= {-1, 0, 1}
        else:
            assert (np.abs(want) > 1e-3).any(), "nothing to clip: the test lost its point"
            np.testing.assert_allclose(got, np.clip(want, -1e-3, 1e-3), rtol=1e-6)


def test_cli_exports_and_reports_agreement_and_latency(runs, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "fastrl.export", str(runs["ppo"]), "--format", "torch-export",
         "--repeats", "3", "--threads", "1"],
        capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    artifact = runs["ppo"] / "exports" / "policy-step1024.pt2"  # the default --out
    assert artifact.with_name("policy-step1024.pt2.json").is_file()
    assert_acts_like_the_checkpoint(artifact, "torch-export", runs["ppo"])
    assert "on 256/256 sampled observations" in proc.stdout
    for batch in (1, 256):
        row = re.search(rf"^\s+{batch}\s+([\d.]+) ms\s+([\d.]+) ms\s+([\d.]+)x$", proc.stdout,
                        re.MULTILINE)
        assert row, proc.stdout
        exported_ms, eager_ms, ratio = map(float, row.groups())
        assert exported_ms > 0 and eager_ms > 0
        assert ratio == pytest.approx(eager_ms / exported_ms, rel=0.05, abs=0.01)


def test_cli_refuses_a_path_that_is_no_checkpoint(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fastrl.export", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"fastrl.export: error: {tmp_path}: neither a checkpoint")
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_cli_refuses_an_unknown_format(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path), "--format", "tflite"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--format: invalid choice: 'tflite'" in err and "onnx" in err and "torch-export" in err


def test_cli_names_the_missing_package_and_how_to_install_it(runs, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails
    assert main([str(runs["ppo"]), "--format", "onnx"]) == 2
    err = capsys.readouterr().err
    assert "not installed: onnxruntime;" in err and INSTALL in err
    assert not (runs["ppo"] / "exports" / "policy-step1024.onnx").exists()


class DataDependentPolicy(torch.nn.Module):
    """Branches in Python on observation values: no graph can hold that."""

    def act(self, obs: torch.Tensor, deterministic: bool = False):
        action = torch.ones(len(obs)) if obs.sum() > 0 else torch.zeros(len(obs))
        return action, action, action


def test_an_untraceable_policy_is_refused_in_one_line(tmp_path):
    space = spaces.Box(-1.0, 1.0, (1,), np.float32)
    module = DeterministicAction(DataDependentPolicy(), space, space)
    with pytest.raises(ExportError, match=r"^DataDependentPolicy\.act\(obs, deterministic="
                                          r"True\) cannot be exported to torch-export: ") as e:
        write_artifact(module, torch.zeros(8, 1), "torch-export", tmp_path / "p.pt2", ["obs"])
    assert "\n" not in str(e.value)
