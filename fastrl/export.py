"""python -m fastrl.export CHECKPOINT_OR_RUN_DIR [--format onnx|torch-export] [--out PATH]:
write a trained policy as a standalone inference artifact.

The artifact maps a batch of observations (as fastrl stores them: a Box's own dtype, int64
for Discrete; any batch size; for a Dict or Tuple space one input per leaf, named by its
path, ``obs.image``, ``obs.action_mask``) to the policy's deterministic action: ``policy.act(obs,
deterministic=True)[0]`` (the argmax / mode, ``Discrete.start`` included, as ``act`` returns
it), cast to the stored action dtype and, for a Box, clipped to the space's bounds. What the
network does to observations (one-hot, flattening, dtype casts, the 1/255 of uint8 frames,
``algo.normalize_obs``'s running statistics) is part of the graph; the sidecar says whether
there were statistics (``normalizer_baked_in``).

A recurrent policy's artifact (``algo.core``) also takes the envs' states, input ``state``
``[B, state_size]`` float32, and returns the states after the step as a second output,
``next_state``: a caller feeds each step's ``next_state`` back in, and zeros where an
episode starts (the sidecar's ``state`` says so).

Formats: ``onnx`` (default; ``torch.onnx.export(dynamo=True)``, one ``.onnx`` file, needs the
``export`` extra) and ``torch-export`` (a ``torch.export`` ExportedProgram saved with
``torch.export.save``, ``.pt2``). A JSON sidecar ``<artifact>.json`` (written last) describes
the input, the output, the spaces and the checkpoint it came from. The command then checks the
artifact's actions against the eager policy's on sampled observations and prints the median
latency of both at batch 1 and 256 on this machine.

Exit status: 0 exported, 2 a bad path or checkpoint, an unknown format, a missing optional
dependency, a policy that cannot be traced or an output that cannot be written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.distributions import Distribution

from fastrl.checkpoint import CHECKPOINTS, Checkpoint
from fastrl.core.files import write_atomically
from fastrl.core.version import __version__
from fastrl.errors import INPUT_ERRORS
from fastrl.eval.policy import LoadedPolicy, load_policy
from fastrl.memory.layout import storage_of
from fastrl.memory.records import ObsRecord, obs_record
from fastrl.models.base import sample_obs
from fastrl.models.encoders import RunningNorm, torch_dtype
from fastrl.models.recurrent import state_size
from fastrl.population.policy import PopulationPolicy

#: Format name -> file suffix of its artifact.
FORMATS = {"onnx": ".onnx", "torch-export": ".pt2"}
INPUT_NAME, OUTPUT_NAME = "obs", "action"
STATE_IN, STATE_OUT = "state", "next_state"  # a recurrent policy's state input and output
BATCH = "batch"  # name of the dynamic first dimension of the input and the output
NEEDS = {"onnx": ("onnx", "onnxscript", "onnxruntime"), "torch-export": ()}
INSTALL = "install with pip install -c constraints.txt -e '.[export]'"
EXAMPLE_ROWS = 8  # rows traced; not 0 or 1, which torch.export would specialise the batch to
LATENCY_BATCHES = (1, 256)
WARMUP_CALLS = 10
MATCH_TOL = 1e-5  # float actions of the artifact and the eager policy agree this closely


class ExportError(RuntimeError):
    """A policy that cannot be exported (untraceable ``act``, normalisation constants), an
    unknown format or one whose packages are not installed."""


def input_names(obs_space: gym.Space, state_size: int = 0) -> list[str]:
    """The artifact's inputs: ``obs``, or ``obs.<leaf path>`` per leaf of a Dict or Tuple;
    then ``state`` for a recurrent policy (``state_size`` > 0)."""
    record = obs_record(obs_space)
    names = [INPUT_NAME] if record is None else \
        [f"{INPUT_NAME}.{leaf.name}" for leaf in record.leaves]
    return names + [STATE_IN] * (state_size > 0)


def output_names(state_size: int = 0) -> list[str]:
    """The artifact's outputs: ``action``, and ``next_state`` for a recurrent policy."""
    return [OUTPUT_NAME] + [STATE_OUT] * (state_size > 0)


def model_inputs(obs: np.ndarray, record: ObsRecord | None) -> list[np.ndarray]:
    """Stored observations as the artifact's inputs (a record's leaves, each contiguous)."""
    if record is None:
        return [obs]
    return [np.ascontiguousarray(leaf.view(obs)) for leaf in record.leaves]


class DeterministicAction(nn.Module):
    """``obs -> action``: ``policy.act(obs, deterministic=True)[0]`` as fastrl stores actions
    (its dtype; clipped to the bounds of a Box). The module that is exported; for a Dict or
    Tuple space it takes one tensor per leaf and hands the policy the nested leaves; a
    recurrent policy's takes the states last and returns ``(action, next_state)``."""

    def __init__(self, policy: nn.Module, obs_space: gym.Space, act_space: gym.Space) -> None:
        super().__init__()
        self.policy = policy
        self.record = obs_record(obs_space)
        self.state_size = state_size(policy)
        _, dtype = storage_of(act_space, "action")
        self.dtype = torch_dtype(dtype)
        self.clipped = isinstance(act_space, spaces.Box)
        if self.clipped:
            self.register_buffer("low", torch.as_tensor(act_space.low, dtype=self.dtype))
            self.register_buffer("high", torch.as_tensor(act_space.high, dtype=self.dtype))

    def forward(self, *inputs: torch.Tensor) -> Any:
        """Deterministic actions ``[B, *act_shape]`` of observations ``[B, *obs_shape]``
        (of each leaf's ``[B, *leaf_shape]``); with the states ``[B, state_size]`` after
        them, those actions and the states after the step."""
        obs = inputs[:-1] if self.state_size else inputs
        nested = obs[0] if self.record is None else self.record.nest(list(obs))
        if not self.state_size:
            return self._stored(self.policy.act(nested, deterministic=True)[0])
        action, _, _, state = self.policy.act(nested, inputs[-1], deterministic=True)
        return self._stored(action), state

    def _stored(self, action: torch.Tensor) -> torch.Tensor:
        action = action.to(self.dtype)
        return torch.clamp(action, self.low, self.high) if self.clipped else action


@dataclass(frozen=True)
class Exported:
    """What :func:`export_policy` wrote."""

    artifact: Path
    sidecar: Path  # ``<artifact>.json``
    metadata: dict[str, Any]  # the sidecar's content
    module: DeterministicAction  # the eager module that was exported


def check_format(fmt: str) -> None:
    """Raise :class:`ExportError` unless ``fmt`` is a format whose packages are installed."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}; accepted: {', '.join(FORMATS)}")
    missing = [name for name in NEEDS[fmt] if not _importable(name)]
    if missing:
        raise ExportError(f"--format {fmt} needs {', '.join(NEEDS[fmt])}; not installed: "
                          f"{', '.join(missing)}; {INSTALL}")


def _importable(name: str) -> bool:
    try:
        import_module(name)
    except ImportError:
        return False
    return True


def default_out(ckpt: Checkpoint, fmt: str) -> Path:
    """``RUN_DIR/exports/policy-step<N><suffix>`` for a checkpoint of a run directory (beside
    the checkpoint folder for one that lies elsewhere): outside ``checkpoints/``, whose old
    folders are deleted as new ones are written."""
    parent = ckpt.path.parent
    root = parent.parent if parent.name == CHECKPOINTS else parent
    return root / "exports" / f"policy-step{ckpt.global_step}{FORMATS[fmt]}"


def describe_space(space: gym.Space, role: str) -> dict[str, Any]:
    """A space as JSON: kind, stored shape and dtype, and what bounds its values (Box bounds
    that are infinite are ``null``)."""
    record = obs_record(space) if role == "observation" else None
    if record is not None:
        return {"kind": type(space).__name__,
                "leaves": {leaf.name: describe_space(leaf.space, role) for leaf in record.leaves}}
    shape, dtype = storage_of(space, role)
    info: dict[str, Any] = {"kind": type(space).__name__, "shape": list(shape),
                            "dtype": str(dtype)}
    if isinstance(space, spaces.Discrete):
        info.update(n=int(space.n), start=int(space.start))
    elif isinstance(space, spaces.MultiDiscrete):
        info.update(nvec=space.nvec.tolist(), start=space.start.tolist())
    elif isinstance(space, spaces.Box):
        info.update(low=_finite_or_none(space.low), high=_finite_or_none(space.high))
    return info


def _finite_or_none(values: np.ndarray) -> list:
    return np.where(np.isfinite(values), values.astype(object), None).tolist()


def _tensor_spec(name: str, space: gym.Space, role: str) -> dict[str, Any]:
    shape, dtype = storage_of(space, role)
    return {"name": name, "shape": [BATCH, *shape], "dtype": str(dtype)}


def _input_specs(obs_space: gym.Space) -> list[dict[str, Any]]:
    record = obs_record(obs_space)
    if record is None:
        return [_tensor_spec(INPUT_NAME, obs_space, "observation")]
    return [_tensor_spec(name, leaf.space, "observation")
            for name, leaf in zip(input_names(obs_space), record.leaves)]


def _state_spec(name: str, state_size: int) -> list[dict[str, Any]]:
    return [{"name": name, "shape": [BATCH, state_size], "dtype": "float32"}] * (state_size > 0)


def sidecar_metadata(loaded: LoadedPolicy, fmt: str, artifact: Path) -> dict[str, Any]:
    """The sidecar of ``loaded``'s policy exported to ``artifact``."""
    ckpt, plan = loaded.checkpoint, loaded.plan
    size = state_size(loaded.policy)
    return {
        "format": fmt,
        "artifact": artifact.name,
        "inputs": _input_specs(plan.obs_space) + _state_spec(STATE_IN, size),
        "outputs": [_tensor_spec(OUTPUT_NAME, plan.act_space, "action"),
                    *_state_spec(STATE_OUT, size)],
        "state": {"size": size, "core": loaded.config.algo.core,
                  "at_episode_start": "zeros", "next": STATE_OUT} if size else None,
        "observation_space": describe_space(plan.obs_space, "observation"),
        "action_space": describe_space(plan.act_space, "action"),
        "action": ("policy.act(obs, deterministic=True)[0]"
                   + (", clipped to the Box bounds" if isinstance(plan.act_space, spaces.Box)
                      else "")),
        # algo.normalize_obs: the running statistics are part of the network's graph
        "normalizer_baked_in": any(isinstance(m, RunningNorm) for m in loaded.policy.modules()),
        "policy_class": type(loaded.policy).__qualname__,
        "population_member": loaded.member,
        "algo": loaded.config.algo.name,
        "env_id": ckpt.manifest.get("env_id", loaded.config.env.id),
        "checkpoint": str(ckpt.path.resolve()),
        "global_step": ckpt.global_step,
        "config_hash": ckpt.manifest.get("config_hash"),
        "fastrl_version": __version__,
        "torch_version": torch.__version__,
    }


@contextmanager
def _tracing() -> Iterator[None]:
    """What tracing a policy needs, undone afterwards.

    torch.distributions validates its arguments with a data-dependent branch (``if not
    valid.all(): raise``) that torch.export cannot trace, and user policies may build a
    Categorical or Normal inside ``act``; validation is off while
    tracing (the exported graph would not check either way). The ONNX exporter's notes on
    torchvision and torch's own deprecation warnings are not the user's business.
    """
    validate = Distribution._validate_args  # no public getter; restored as it was
    onnx_log = logging.getLogger("torch.onnx")
    level = onnx_log.level
    Distribution.set_default_validate_args(False)
    onnx_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            # (one dynamic batch dimension shared by a Dict space's leaves: as meant)
            warnings.filterwarnings("ignore", message="# The axis name")
            yield
    finally:
        Distribution.set_default_validate_args(validate)
        onnx_log.setLevel(level)


def write_artifact(module: DeterministicAction, example: torch.Tensor, fmt: str,
                   out: Path, names: list[str]) -> None:
    """Trace ``module`` on stored observations ``example`` (batch dimension dynamic) and
    write it to ``out``, its inputs named ``names``."""
    args = tuple(torch.from_numpy(x) for x in model_inputs(example.numpy(), module.record))
    if module.state_size:
        args += (torch.randn(len(example), module.state_size),)
    batch = torch.export.Dim(BATCH)
    dynamic = ({0: batch} for _ in args)
    module.eval()
    try:
        with _tracing():
            if fmt == "onnx":
                torch.onnx.export(module, args, out, dynamo=True, external_data=False,
                                  dynamic_shapes=(tuple(dynamic),), input_names=names,
                                  output_names=output_names(module.state_size),
                                  verbose=False)
            else:
                torch.export.save(torch.export.export(module, args,
                                                      dynamic_shapes=(tuple(dynamic),)), out)
    except OSError:  # the output cannot be written: not the policy's fault
        raise
    except Exception as e:  # the tracers raise from a wide hierarchy; the cause is what counts
        cause = e.__cause__ or e
        first = next((line.strip() for line in str(cause).splitlines() if line.strip()), "")
        raise ExportError(
            f"{type(module.policy).__qualname__}.act(obs, deterministic=True) cannot be "
            f"exported to {fmt}: {type(cause).__name__}: {first}") from e


def export_policy(loaded: LoadedPolicy, fmt: str = "onnx",
                  out: Path | str | None = None) -> Exported:
    """Write ``loaded``'s deterministic policy as ``fmt`` to ``out`` (default:
    :func:`default_out`) and its JSON sidecar to ``<out>.json``."""
    check_format(fmt)
    if isinstance(loaded.policy, PopulationPolicy):
        raise ExportError(f"the checkpoint holds a population of {len(loaded.policy.members)} "
                          "policies; export one: --member K (load_policy(..., member=K)), or "
                          "--member best")
    artifact = Path(out) if out is not None else default_out(loaded.checkpoint, fmt)
    artifact.parent.mkdir(parents=True, exist_ok=True)
    module = DeterministicAction(loaded.policy, loaded.plan.obs_space, loaded.plan.act_space)
    write_artifact(module, sample_obs(loaded.plan.obs_space, EXAMPLE_ROWS), fmt, artifact,
                   input_names(loaded.plan.obs_space, module.state_size))
    metadata = sidecar_metadata(loaded, fmt, artifact)
    sidecar = artifact.with_name(artifact.name + ".json")
    write_atomically(sidecar, (json.dumps(metadata, indent=2) + "\n").encode())
    return Exported(artifact, sidecar, metadata, module)


Runner = Callable[[np.ndarray], np.ndarray]


def _runner(step: Callable[[list[np.ndarray]], Any], obs_space: gym.Space,
            state_size: int) -> Runner:
    """``obs -> action`` over a call of the artifact's inputs; for a recurrent artifact
    (``state_size`` > 0) the states carried from call to call, zeros at first and whenever
    the batch size changes."""
    record = obs_record(obs_space)
    if not state_size:
        return lambda obs: step(model_inputs(obs, record))
    state = np.zeros((0, state_size), np.float32)

    def run(obs: np.ndarray) -> np.ndarray:
        nonlocal state
        if len(state) != len(obs):
            state = np.zeros((len(obs), state_size), np.float32)
        action, state = step([*model_inputs(obs, record), state])
        return action
    return run


def torch_runner(module: nn.Module, obs_space: gym.Space, state_size: int = 0) -> Runner:
    """Call a torch module on numpy observations as stored, returning numpy actions (a
    recurrent one's states carried from call to call, see :func:`_runner`)."""

    def step(inputs: list[np.ndarray]) -> Any:
        with torch.no_grad():
            out = module(*map(torch.from_numpy, inputs))
        return out.numpy() if state_size == 0 else tuple(x.numpy() for x in out)
    return _runner(step, obs_space, state_size)


def load_artifact(artifact: Path | str, fmt: str, obs_space: gym.Space,
                  threads: int | None = None, state_size: int = 0) -> Runner:
    """The exported policy as a function of numpy observations as stored: an onnxruntime
    session (``threads`` intra-op threads, default torch's count) or the ExportedProgram's
    module; a recurrent one's (``state_size``, the sidecar's ``state.size``) carries its
    states from call to call."""
    check_format(fmt)
    if fmt == "torch-export":
        return torch_runner(torch.export.load(artifact).module(), obs_space, state_size)
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    session = onnxruntime.InferenceSession(str(artifact), options,
                                           providers=["CPUExecutionProvider"])
    names, outputs = input_names(obs_space, state_size), output_names(state_size)

    def step(inputs: list[np.ndarray]) -> Any:
        out = session.run(outputs, dict(zip(names, inputs)))
        return out[0] if state_size == 0 else tuple(out)
    return _runner(step, obs_space, state_size)


def median_latency_s(run: Runner, obs: np.ndarray, calls: int) -> float:
    """Median wall time of ``calls`` calls of ``run(obs)``, after a few unmeasured ones."""
    for _ in range(WARMUP_CALLS):
        run(obs)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        run(obs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matching_actions(exported: np.ndarray, eager: np.ndarray) -> int:
    """Rows of two action batches that agree (exactly for integers, within
    :data:`MATCH_TOL` for floats)."""
    close = np.isclose(exported, eager, rtol=MATCH_TOL, atol=MATCH_TOL)
    return int(close.reshape(len(close), -1).all(axis=1).sum())


def compare(exported: Runner, eager: Runner, obs_space: gym.Space,
            calls: int) -> tuple[int, list[dict[str, float]]]:
    """Rows of a sampled batch of the largest latency batch on which the two agree, and per
    batch size the median latency of each and their ratio (eager / exported)."""
    batches = {n: sample_obs(obs_space, n).numpy() for n in LATENCY_BATCHES}
    largest = batches[max(LATENCY_BATCHES)]
    # twice: a recurrent policy's second actions read the states its first call returned
    exported(largest), eager(largest)
    agree = matching_actions(exported(largest), eager(largest))
    rows = []
    for n, obs in batches.items():
        ours, theirs = median_latency_s(exported, obs, calls), median_latency_s(eager, obs, calls)
        rows.append({"batch": n, "exported_s": ours, "eager_s": theirs, "ratio": theirs / ours})
    return agree, rows


def latency_text(fmt: str, rows: list[dict[str, float]], calls: int, threads: int) -> str:
    """The latency table printed by the CLI."""
    runtime = "onnxruntime" if fmt == "onnx" else "torch.export"
    lines = [f"latency on this machine, median of {calls} calls, {threads} thread(s) each:",
             f"  {'batch':>5}  {runtime:>14}  {'eager torch':>14}  {'eager/exported':>14}"]
    lines += [f"  {r['batch']:>5}  {r['exported_s'] * 1e3:>11.4f} ms  "
              f"{r['eager_s'] * 1e3:>11.4f} ms  {r['ratio']:>13.2f}x" for r in rows]
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The CLI's options."""
    parser = argparse.ArgumentParser(
        prog="python -m fastrl.export", description=__doc__.split("\n\n")[0],
        epilog="example: python -m fastrl.export runs/CartPole-v1_ppo_s1_20261202-120000 "
               "--format onnx --out cartpole.onnx",
    )
    parser.add_argument("path", metavar="CHECKPOINT_OR_RUN_DIR",
                        help="a checkpoint folder, or a run directory (its newest valid one)")
    parser.add_argument("--format", default="onnx", choices=list(FORMATS),
                        help="artifact format (default: onnx)")
    parser.add_argument("--out", metavar="PATH", help="artifact path (default: "
                        "RUN_DIR/exports/policy-step<N>.onnx or .pt2); sidecar: PATH.json")
    parser.add_argument("--member", metavar="K|best",
                        help="a population's checkpoint: export member K, or the member "
                             "with the best return in its last evaluation")
    parser.add_argument("--repeats", type=int, default=200, metavar="N",
                        help="timed calls per latency figure (default: 200)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), metavar="N",
                        help="torch and onnxruntime threads while timing (default: torch's, "
                             f"{torch.get_num_threads()} here)")
    ns = parser.parse_args(argv)
    for name in ("repeats", "threads"):
        if getattr(ns, name) < 1:
            parser.error(f"argument --{name}: must be >= 1, got {getattr(ns, name)}")
    return ns


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit status."""
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    torch.set_num_threads(ns.threads)
    try:
        check_format(ns.format)  # before the slow part: loading and tracing
        loaded = load_policy(ns.path, member=ns.member)
        done = export_policy(loaded, ns.format, ns.out)
        exported = load_artifact(done.artifact, ns.format, loaded.plan.obs_space, ns.threads,
                                 done.module.state_size)
    except (*INPUT_ERRORS, ExportError, OSError) as e:
        print(f"fastrl.export: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {done.artifact} ({ns.format}, {os.path.getsize(done.artifact):,} bytes) "
          f"and {done.sidecar.name}")
    agree, rows = compare(exported, torch_runner(done.module, loaded.plan.obs_space,
                                                 done.module.state_size),
                          loaded.plan.obs_space, ns.repeats)
    n = max(LATENCY_BATCHES)
    print(f"actions equal to the eager policy's on {agree}/{n} sampled observations")
    print(latency_text(ns.format, rows, ns.repeats, ns.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
