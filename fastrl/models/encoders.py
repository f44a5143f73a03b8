"""Observation encoders: observations as the ring stores them -> float feature vectors.

Every built-in network starts with one (``algo.encoder``): ``flat`` flattens Box
observations and one-hot encodes Discrete ones (no parameters); ``nature`` (the Nature-DQN
torso), ``impala`` (IMPALA's residual torso) and ``small`` (two convolutions that keep
every pixel, for grids) read image observations. An image smaller than its CNN reads
(36x36 pixels for nature, 8x8 for impala) is read by the largest of them it fits
(:func:`pixel_encoder`), which :func:`encoder_notes` says. Images stay
uint8 from the env to the network: the cast to float and the division by 255 happen here,
on the learner's device. Dict and Tuple observations arrive as records of their leaves
(fastrl.memory.records): :class:`RecordEncoder` encodes each leaf as the above would (a CNN
for image leaves) and joins the features.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from fastrl.memory.records import Leaf, ObsRecord, obs_record

ENCODERS = ("auto", "flat", "nature", "impala", "small")
MAX_CHANNELS = 16  # a leading (or trailing) image dim up to this is the channel dim


class UnsupportedObservations(TypeError):
    """An observation space an encoder cannot read."""


def image_layout(space: spaces.Space) -> str | None:
    """``"CHW"`` or ``"HWC"`` for an image space (a 3-d uint8 Box whose first or last dim,
    up to 16, is the channel dim: the first where both are), None for anything else."""
    if not (isinstance(space, spaces.Box) and space.dtype == np.uint8
            and len(space.shape) == 3):
        return None
    if space.shape[0] <= MAX_CHANNELS:
        return "CHW"
    return "HWC" if space.shape[-1] <= MAX_CHANNELS else None


class RunningNorm(nn.Module):
    """Standardises feature vectors by their running mean and variance (Chan et al.'s
    parallel update over whole batches), clipped to +-10 as SB3's VecNormalize clips. The
    statistics are frozen parameters, so that they travel with the weights: to the workers,
    into checkpoints and into exported graphs."""

    CLIP = 10.0

    def __init__(self, size: int) -> None:
        super().__init__()
        self.mean = nn.Parameter(torch.zeros(size), requires_grad=False)
        self.var = nn.Parameter(torch.ones(size), requires_grad=False)
        self.count = nn.Parameter(torch.full((1,), 1e-4), requires_grad=False)  # (SB3's)

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Fold the rows of ``x`` ``[n, size]`` into the statistics."""
        n = x.shape[0]
        b_mean, b_var = x.mean(0), x.var(0, unbiased=False)
        delta, total = b_mean - self.mean, self.count + n
        m2 = self.var * self.count + b_var * n + delta * delta * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) * torch.rsqrt(self.var + 1e-8)).clamp(-self.CLIP, self.CLIP)


class ObsFeatures(nn.Module):
    """Observations -> float feature vectors: one-hot for Discrete, flattened (as numbers)
    for Box, MultiDiscrete and MultiBinary, with any number of leading batch dimensions.
    ``normalize`` standardises Box features by their running statistics
    (:class:`RunningNorm`, updated by :meth:`observe`); otherwise it has no parameters."""

    def __init__(self, obs_space: spaces.Space, normalize: bool = False) -> None:
        super().__init__()
        discrete = isinstance(obs_space, spaces.Discrete)
        self._one_hot = int(obs_space.n) if discrete else 0
        self._start = int(obs_space.start) if discrete else 0
        self._ndim = len(obs_space.shape or ())
        self.size = self._one_hot or int(np.prod(obs_space.shape))
        if normalize and not isinstance(obs_space, spaces.Box):
            raise UnsupportedObservations(
                f"algo.normalize_obs standardises Box observations, not {obs_space}")
        self.norm = RunningNorm(self.size) if normalize else None

    def _flat(self, obs: torch.Tensor) -> torch.Tensor:
        if self._one_hot:
            return nn.functional.one_hot(obs.long() - self._start, self._one_hot).float()
        batch = obs.shape[: obs.dim() - self._ndim]
        return obs.reshape(*batch, -1).float()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self._flat(obs)
        return x if self.norm is None else self.norm(x)

    def observe(self, obs: torch.Tensor) -> None:
        """Fold a batch of observations (any leading dims) into the running statistics."""
        if self.norm is not None:
            self.norm.update(self._flat(obs).reshape(-1, self.size))


@functools.cache
def torch_dtype(dtype: np.dtype) -> torch.dtype:
    """The torch dtype of a numpy dtype."""
    return torch.from_numpy(np.empty(0, dtype)).dtype


def leaf_tensor(obs: torch.Tensor, leaf: Leaf) -> torch.Tensor:
    """Leaf ``leaf`` of records ``obs`` ``[*batch, nbytes]`` (uint8) as a view
    ``[*batch, *leaf.shape]`` in the leaf's dtype (no copy: offsets are 8-byte aligned)."""
    raw = obs[..., leaf.offset:leaf.offset + leaf.nbytes]
    if raw.stride(-1) != 1:
        raw = raw.contiguous()
    return raw.view(torch_dtype(leaf.dtype)).reshape(*obs.shape[:-1], *leaf.shape)


def unpack_tensors(obs: torch.Tensor, record: ObsRecord):
    """Records ``obs`` ``[*batch, nbytes]`` as nested dicts and tuples of leaf tensors,
    as the space nests them."""
    return record.nest([leaf_tensor(obs, leaf) for leaf in record.leaves])


class RecordEncoder(nn.Module):
    """Records of a Dict or Tuple space -> features: each leaf (the mask of legal actions
    aside) through its own encoder (``kind``'s CNN for image leaves, :class:`ObsFeatures`
    for the others, standardised with ``normalize`` where they are Box leaves), the
    features joined in the leaves' order."""

    def __init__(self, record: ObsRecord, kind: str = "flat", normalize: bool = False) -> None:
        super().__init__()
        self._record = record
        self.leaves = record.feature_leaves
        self._indices = [record.leaves.index(leaf) for leaf in self.leaves]
        if not self.leaves:
            raise UnsupportedObservations(
                f"the observation space {record.space} holds only the action mask; a policy "
                "needs observations besides it")
        self.encoders = nn.ModuleList(
            _leaf_encoder(leaf.space, kind, normalize) for leaf in self.leaves)
        self.size = sum(e.size for e in self.encoders)

    def _leaf_tensors(self, obs) -> list[torch.Tensor]:
        """The feature leaves of records ``[*batch, nbytes]``, or of nested leaf tensors (a
        user policy's observations, fastrl.models.base)."""
        if isinstance(obs, torch.Tensor):
            return [leaf_tensor(obs, leaf) for leaf in self.leaves]
        values = self._record.leaf_values(obs)
        return [values[i] for i in self._indices]

    def forward(self, obs) -> torch.Tensor:
        return torch.cat([encode(x) for x, encode in zip(self._leaf_tensors(obs),
                                                         self.encoders)], -1)

    def observe(self, obs) -> None:
        """Fold a batch of records into the leaves' running statistics."""
        for x, encoder in zip(self._leaf_tensors(obs), self.encoders):
            if isinstance(encoder, ObsFeatures):
                encoder.observe(x)


def _leaf_encoder(space: spaces.Space, kind: str, normalize: bool) -> nn.Module:
    if image_layout(space) is not None and kind != "flat":
        return make_encoder(space, kind)
    return ObsFeatures(space, normalize and isinstance(space, spaces.Box))


def obs_features(obs_space: spaces.Space, normalize: bool = False) -> nn.Module:
    """Observations -> flat float features for any space the ring stores: an
    :class:`ObsFeatures`, or for a Dict or Tuple space a :class:`RecordEncoder` of them."""
    record = obs_record(obs_space)
    if record is not None:
        return RecordEncoder(record, "flat", normalize)
    return ObsFeatures(obs_space, normalize)


def observe_observations(model: nn.Module, obs: torch.Tensor) -> None:
    """Update every observation normaliser inside ``model`` with a batch of observations
    (the learner's, before it trains on them); a model whose parts each take their own
    rows of the batch (``observe_rows``: a population's members) hands them out itself."""
    if hasattr(model, "observe_rows"):
        model.observe_rows(obs)
        return
    inside = {id(m) for r in model.modules() if isinstance(r, RecordEncoder)
              for m in r.encoders.modules()}
    for module in model.modules():
        if isinstance(module, (ObsFeatures, RecordEncoder)) and id(module) not in inside:
            module.observe(obs)


class ImageEncoder(nn.Module):
    """A convolutional torso over uint8 images ``[..., C, H, W]`` (or ``[..., H, W, C]``),
    scaled to [0, 1] inside, then a ``size``-unit linear layer. Subclasses name themselves,
    their smallest side and their convolutions (:meth:`_convs`)."""

    name: str
    size: int
    min_side: int

    def __init__(self, obs_space: spaces.Box) -> None:
        super().__init__()
        self._layout = image_layout(obs_space)
        shape = obs_space.shape
        c, h, w = shape if self._layout == "CHW" else (shape[2], shape[0], shape[1])
        if min(h, w) < self.min_side:  # (make_encoder picks one that fits)
            raise UnsupportedObservations(
                f"the {self.name} encoder needs images of at least {self.min_side}x"
                f"{self.min_side} pixels, not {h}x{w} ({obs_space})")
        self.convs = nn.Sequential(*self._convs(c), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            n_flat = self.convs(torch.zeros(1, c, h, w)).shape[1]
        self.fc = nn.Sequential(orthogonal_init(nn.Linear(n_flat, self.size), np.sqrt(2)),
                                nn.ReLU())

    def _convs(self, channels: int) -> list[nn.Module]:
        raise NotImplementedError

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        batch = obs.shape[:-3]
        x = obs.reshape(-1, *obs.shape[-3:])
        if self._layout == "HWC":
            x = x.permute(0, 3, 1, 2)
        x = x.float() / 255.0
        return self.fc(self.convs(x)).reshape(*batch, self.size)


class NatureCNN(ImageEncoder):
    """The Nature-DQN torso (Mnih et al. 2015): 32 8x8/4, 64 4x4/2, 64 3x3/1 convolutions,
    512 features."""

    name, size, min_side = "nature", 512, 36

    def _convs(self, channels: int) -> list[nn.Module]:
        return [_conv(channels, 32, 8, 4), nn.ReLU(), _conv(32, 64, 4, 2), nn.ReLU(),
                _conv(64, 64, 3, 1)]


class ResidualBlock(nn.Module):
    """``x + conv(relu(conv(relu(x))))``, 3x3 convolutions keeping the shape."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.convs = nn.Sequential(nn.ReLU(), _conv(channels, channels, 3, 1, 1), nn.ReLU(),
                                   _conv(channels, channels, 3, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.convs(x)


class ImpalaCNN(ImageEncoder):
    """IMPALA's residual torso (Espeholt et al. 2018): for 16, 32 and 32 channels a 3x3
    convolution, a 3x3/2 max-pool and two residual blocks; 256 features."""

    name, size, min_side = "impala", 256, 8

    def _convs(self, channels: int) -> list[nn.Module]:
        layers: list[nn.Module] = []
        for out in (16, 32, 32):
            layers += [_conv(channels, out, 3, 1, 1), nn.MaxPool2d(3, 2, 1),
                       ResidualBlock(out), ResidualBlock(out)]
            channels = out
        return layers


def channels_last_convs(model: nn.Module) -> nn.Module:
    """``model``, with the weights of its convolutions in channels-last memory when it has
    any: the learner's CNN update runs 1.20x faster so on the CPU (the Nature CNN on
    Breakout frames, benchmarks/learner_cpu.py). Values and parameter order are unchanged."""
    if any(isinstance(m, nn.Conv2d) for m in model.modules()):
        model.to(memory_format=torch.channels_last)
    return model


def orthogonal_init(layer: nn.Linear | nn.Conv2d, std: float) -> nn.Module:
    """``layer`` with orthogonal weights of gain ``std`` and zero biases (CleanRL's init)."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.zeros_(layer.bias)
    return layer


def _conv(c_in: int, c_out: int, kernel: int, stride: int, padding: int = 0) -> nn.Module:
    return orthogonal_init(nn.Conv2d(c_in, c_out, kernel, stride, padding), np.sqrt(2))


class SmallCNN(ImageEncoder):
    """Two 3x3 convolutions of 16 and 32 channels that keep every pixel (padded, stride 1),
    256 features: a grid of a few cells (MiniGrid's 7x7 view, a board) has no pixels to
    spare for the others' strides and pools."""

    name, size, min_side = "small", 256, 1

    def _convs(self, channels: int) -> list[nn.Module]:
        return [_conv(channels, 16, 3, 1, 1), nn.ReLU(), _conv(16, 32, 3, 1, 1)]


#: the CNNs, largest smallest side first (the order :func:`pixel_encoder` falls back in)
IMAGE_ENCODERS = {cls.name: cls for cls in (NatureCNN, ImpalaCNN, SmallCNN)}


def image_size(space: spaces.Box) -> tuple[int, int]:
    """``(height, width)`` of an image space (:func:`image_layout`)."""
    shape = space.shape
    return shape[1:] if image_layout(space) == "CHW" else shape[:2]


def pixel_encoder(space: spaces.Box, kind: str) -> str:
    """The CNN that reads the image ``space`` for ``algo.encoder=kind`` (``auto``: nature):
    ``kind``'s, or where the image is smaller than that one reads, the largest CNN that
    reads it."""
    wanted = "nature" if kind == "auto" else kind
    side = min(image_size(space))
    fits = [name for name, cls in IMAGE_ENCODERS.items() if side >= cls.min_side]
    return wanted if wanted in fits else fits[0]


def image_encoders(obs_space: spaces.Space, kind: str) -> list[tuple[str, str, str]]:
    """``(input, pixels, CNN)`` of each image ``algo.encoder=kind`` reads in
    ``obs_space`` (the space itself, or each image leaf of a Dict or Tuple): its name
    (``observation`` for the whole space), ``HxW`` and the CNN (:func:`pixel_encoder`);
    empty for ``flat``."""
    if kind == "flat":
        return []
    record = obs_record(obs_space)
    images = [(leaf.name, leaf.space) for leaf in record.feature_leaves] if record else \
        [("observation", obs_space)]
    return [(name, "x".join(map(str, image_size(space))), pixel_encoder(space, kind))
            for name, space in images if image_layout(space) is not None]


def encoder_notes(obs_space: spaces.Space, kind: str) -> list[str]:
    """One line for each image of ``obs_space`` that ``algo.encoder=kind`` gives another
    CNN than it names, the image being smaller than that one reads
    (:func:`image_encoders`)."""
    wanted = "nature" if kind == "auto" else kind
    side = IMAGE_ENCODERS[wanted].min_side if wanted in IMAGE_ENCODERS else 0
    return [f"{name}: {pixels} pixels, below the {wanted} CNN's {side}x{side}; the {cnn} CNN "
            "reads it" for name, pixels, cnn in image_encoders(obs_space, kind) if cnn != wanted]


def make_encoder(obs_space: spaces.Space, kind: str = "auto",
                 normalize: bool = False) -> nn.Module:
    """The encoder ``kind`` (one of :data:`ENCODERS`) for ``obs_space``; ``auto`` is
    ``nature`` for image spaces (see :func:`image_layout`) and ``flat`` otherwise; an
    image smaller than that CNN reads gets the largest that reads it
    (:func:`pixel_encoder`).
    ``normalize`` standardises flat Box features (images are scaled by 1/255 instead).
    A Dict or Tuple space gets a :class:`RecordEncoder`: ``kind`` applies to its image
    leaves (``auto``: ``nature``), its other leaves are flat."""
    if kind not in ENCODERS:
        raise ValueError(f"unknown encoder {kind!r}; known: {', '.join(ENCODERS)}")
    record = obs_record(obs_space)
    if record is not None:
        if kind in IMAGE_ENCODERS and not any(image_layout(leaf.space) is not None
                                              for leaf in record.feature_leaves):
            raise UnsupportedObservations(
                f"the {kind} encoder reads image leaves (a 3-d uint8 Box with up to "
                f"{MAX_CHANNELS} channels first or last); {obs_space} has none")
        return RecordEncoder(record, "nature" if kind == "auto" else kind, normalize)
    image = image_layout(obs_space) is not None
    if kind == "auto":
        kind = "nature" if image else "flat"
    if kind in IMAGE_ENCODERS:
        if not image:
            raise UnsupportedObservations(
                f"the {kind} encoder reads images (a 3-d uint8 Box with up to "
                f"{MAX_CHANNELS} channels first or last), not {obs_space}")
        if normalize:
            raise UnsupportedObservations(
                f"algo.normalize_obs standardises vector observations; the {kind} encoder "
                "scales image pixels by 1/255 itself")
        return IMAGE_ENCODERS[pixel_encoder(obs_space, kind)](obs_space)
    # every space the ring stores (fastrl.memory.layout)
    return ObsFeatures(obs_space, normalize)
