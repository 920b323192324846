"""Policies and value functions (MLP, LSTM, RL^2) as pure functions of a parameter dict.

Everything here is a plain function of ``(spec, params, inputs)``: no ``nn.Module``, no hidden
state inside objects. That is what the meta-learner needs (adapted parameters ``phi`` are just
another dict, built from ``theta`` with ``create_graph=True``, and second derivatives flow through
every op, all of which are primitive and twice differentiable) and what lets many agents with
different weights be evaluated in one call.

Parameter dict (weights stored ``(in x out)`` exactly like the RoboSumo zoo, so its weights drop in
unchanged). ``D`` = ``spec.input_dim`` (``obs_dim``, or ``obs_dim + 2`` for RL^2), ``H`` =
``spec.hidden``, ``A`` = ``spec.act_dim``; ``<net>`` is ``pi`` (policy, head size ``A``) or ``vf``
(value, head size 1); the two nets share no parameters::

    mlp:        <net>/fc0/w (D,H)  <net>/fc0/b (H)   tanh
                <net>/fc1/w (H,H)  <net>/fc1/b (H)   tanh
                <net>/out/w (H,O)  <net>/out/b (O)   linear
    lstm, rl2:  <net>/fc/w (D,H)   <net>/fc/b (H)    relu
                <net>/lstm/kernel (2H,4H)  <net>/lstm/bias (4H)
                <net>/out/w (H,O)  <net>/out/b (O)   linear
    all:        logstd (A)         state-independent log standard deviation

LSTM cell (as the zoo): the kernel's rows are the input rows first, then the hidden-state rows; the
gates come in the order i, j (candidate), f, o; a forget bias of +1 is added inside the cell::

    i, j, f, o = split([x, h] @ kernel + bias)
    c' = c * sigmoid(f + 1) + sigmoid(i) * tanh(j);   h' = tanh(c') * sigmoid(o)

Agent batching: every tensor of ``params`` may carry the same extra leading dims (``G`` agents
stacked by :func:`stack_params`); inputs then have shape ``(*G, *batch, D)`` and the agent dims
come first everywhere (states, means, values, ``logstd``). Leading dims of ``logstd`` and of the
normaliser statistics align with the *left* of the data they apply to.

State: a dict ``{"pi/h", "pi/c", "vf/h", "vf/c"}`` of ``(*batch, H)`` tensors for the recurrent
archs and an empty dict for the MLP (never ``None``: passing ``None`` is an error, so a state can
not be zeroed by accident). Resets: ``done_mask`` / ``dones[t]`` true means the input at that step
is the first of a new episode (for RL^2: of a new interaction), so the state is zeroed *before*
the step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from sumo_cli.nets import features as F

ARCHS = ("mlp", "lstm", "rl2")
NETS = ("pi", "vf")
STATE_KEYS = ("pi/h", "pi/c", "vf/h", "vf/c")
FORGET_BIAS = 1.0
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

Params = dict[str, Tensor]
State = dict[str, Tensor]


@dataclass(frozen=True)
class PolicySpec:
    """Architecture of one policy/value pair.

    ``arch``: ``"mlp"``, ``"lstm"`` or ``"rl2"`` (the LSTM whose input is the normalised observation
    followed by the previous reward and the previous done flag, see :func:`rl2_input`).
    """

    arch: str
    obs_dim: int
    act_dim: int
    hidden: int = 64
    features: str = "none"  # extra observation numbers the policy computes (nets.features)

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"unknown policy architecture {self.arch!r}; expected one of {ARCHS}")
        for name in ("obs_dim", "act_dim", "hidden"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"PolicySpec.{name} must be a positive int, got {value!r}")
        try:
            F.env_dim(self.features, self.obs_dim)
        except ValueError as e:
            raise ValueError(f"PolicySpec.obs_dim {self.obs_dim} leaves no original observation: {e}") from None

    @property
    def recurrent(self) -> bool:
        return self.arch != "mlp"

    @property
    def env_obs_dim(self) -> int:
        """Size of the environment's (original) observation: ``obs_dim`` less the features' numbers."""
        return F.env_dim(self.features, self.obs_dim)

    def viewer(self, n: int) -> F.Viewer:
        """What this policy observes of ``n`` streams of the environment's observations, bout after
        bout (:class:`sumo_cli.nets.features.Viewer`; restart a stream at each bout's start)."""
        return F.Viewer(self.features, n)

    @property
    def input_dim(self) -> int:
        """Size of the network input: ``obs_dim``, plus 2 (previous reward, done) for RL^2."""
        return self.obs_dim + 2 if self.arch == "rl2" else self.obs_dim

    def to_dict(self) -> dict:
        d = {"arch": self.arch, "obs_dim": self.obs_dim, "act_dim": self.act_dim, "hidden": self.hidden}
        if self.features != F.NONE:  # written only when used: older checkpoints stay byte-identical
            d["features"] = self.features
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "PolicySpec":
        return cls(arch=d["arch"], obs_dim=int(d["obs_dim"]), act_dim=int(d["act_dim"]), hidden=int(d.get("hidden", 64)),
                   features=str(d.get("features", F.NONE)))


# ----------------------------------------------------------------------------------------------
# parameter layout and initialisation


def param_shapes(spec: PolicySpec) -> dict[str, tuple[int, ...]]:
    """The keys and (unbatched) shapes of a parameter dict for ``spec``, in zoo storage order
    (value net first, then policy net, then ``logstd``)."""
    D, H, A = spec.input_dim, spec.hidden, spec.act_dim
    shapes: dict[str, tuple[int, ...]] = {}
    for net, out in (("vf", 1), ("pi", A)):
        if spec.arch == "mlp":
            shapes[f"{net}/fc0/w"] = (D, H)
            shapes[f"{net}/fc0/b"] = (H,)
            shapes[f"{net}/fc1/w"] = (H, H)
            shapes[f"{net}/fc1/b"] = (H,)
        else:
            shapes[f"{net}/fc/w"] = (D, H)
            shapes[f"{net}/fc/b"] = (H,)
            shapes[f"{net}/lstm/kernel"] = (2 * H, 4 * H)
            shapes[f"{net}/lstm/bias"] = (4 * H,)
        shapes[f"{net}/out/w"] = (H, out)
        shapes[f"{net}/out/b"] = (out,)
    shapes["logstd"] = (A,)
    return shapes


def num_params(spec: PolicySpec) -> int:
    return sum(math.prod(s) for s in param_shapes(spec).values())


def check_params(spec: PolicySpec, params: Params) -> tuple[int, ...]:
    """Check that ``params`` has exactly the keys and shapes of ``spec`` (with a common leading
    agent shape); return that agent shape (``()`` for a single agent). Raises ``ValueError``."""
    shapes = param_shapes(spec)
    missing = sorted(set(shapes) - set(params))
    extra = sorted(set(params) - set(shapes))
    if missing or extra:
        raise ValueError(f"parameter dict does not match {spec}: missing {missing}, unexpected {extra}")
    agent: tuple[int, ...] | None = None
    for key, shape in shapes.items():
        t = params[key]
        n = t.dim() - len(shape)
        if n < 0 or tuple(t.shape[n:]) != shape:
            raise ValueError(f"parameter {key!r} has shape {tuple(t.shape)}, expected (..., {shape})")
        lead = tuple(t.shape[:n])
        if agent is None:
            agent = lead
        elif lead != agent:
            raise ValueError(f"parameter {key!r} has leading agent shape {lead}, others have {agent}")
    return agent or ()


def _orthogonal(rows: int, cols: int, gain: float, generator: torch.Generator) -> Tensor:
    """A (rows x cols) matrix with orthonormal rows or columns (whichever are fewer), times gain."""
    n, m = max(rows, cols), min(rows, cols)
    a = torch.randn(n, m, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(a)
    sign = torch.sign(torch.diagonal(r))
    q = q * torch.where(sign == 0, torch.ones_like(sign), sign)
    w = q if rows >= cols else q.T
    return gain * w


def init_params(spec: PolicySpec, generator: torch.Generator, dtype: torch.dtype = torch.float32) -> Params:
    """Fresh parameters: orthogonal weights (gain sqrt(2) for hidden layers, 0.01 for the policy
    head, 1 for the value head; each LSTM gate block orthogonal with gain 1), zero biases, and
    ``logstd`` = 0 (standard deviation 1). Deterministic given the generator's state."""
    shapes = param_shapes(spec)
    H = spec.hidden
    params: Params = {}
    for key, shape in shapes.items():
        net, _, leaf = key.partition("/")
        if key == "logstd" or len(shape) == 1:
            params[key] = torch.zeros(shape, dtype=torch.float64)
        elif leaf == "lstm/kernel":
            # one orthogonal block per gate, for the input rows and the hidden rows separately
            blocks = [
                torch.cat([_orthogonal(H, H, 1.0, generator) for _ in range(4)], dim=1) for _ in range(2)
            ]
            params[key] = torch.cat(blocks, dim=0)
        elif leaf == "out/w":
            params[key] = _orthogonal(*shape, 0.01 if net == "pi" else 1.0, generator)
        else:
            params[key] = _orthogonal(*shape, math.sqrt(2.0), generator)
    return {k: v.to(dtype).contiguous() for k, v in params.items()}


def stack_params(dicts: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Stack G dicts with the same keys and shapes into one dict with a leading agent dim G.
    Works for parameter dicts, states and normaliser statistics alike."""
    if not dicts:
        raise ValueError("stack_params needs at least one dict")
    keys = set(dicts[0])
    for i, d in enumerate(dicts[1:], 1):
        if set(d) != keys:
            raise ValueError(f"dict {i} has keys {sorted(d)}, dict 0 has {sorted(keys)}")
    return {k: torch.stack([d[k] for d in dicts]) for k in dicts[0]}


def unstack_params(stacked: dict[str, Tensor]) -> list[dict[str, Tensor]]:
    """Inverse of :func:`stack_params` along the first dim (views, not copies)."""
    sizes = {t.shape[0] if t.dim() else None for t in stacked.values()}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"tensors do not share a leading dim: {sorted(map(str, sizes))}")
    (g,) = sizes
    return [{k: v[i] for k, v in stacked.items()} for i in range(g)]


unstack = unstack_params


# ----------------------------------------------------------------------------------------------
# state


def initial_state(
    spec: PolicySpec,
    batch_shape: tuple[int, ...] | int,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> State:
    """Zero state for ``batch_shape`` (include the agent dims first, e.g. ``(G, B)``).
    MLP: ``{}``. Recurrent: ``{"pi/h", "pi/c", "vf/h", "vf/c"}`` each ``(*batch_shape, H)``."""
    if isinstance(batch_shape, int):
        batch_shape = (batch_shape,)
    if not spec.recurrent:
        return {}
    shape = (*batch_shape, spec.hidden)
    return {k: torch.zeros(shape, dtype=dtype, device=device) for k in STATE_KEYS}


def reset_state(state: State, mask: Tensor) -> State:
    """Zero the entries of ``state`` where ``mask`` (shape = state's batch shape) is true."""
    if not state:
        return state
    keep = (~mask.to(torch.bool)).unsqueeze(-1)
    return {k: v * keep.to(v.dtype) for k, v in state.items()}


def rl2_input(obs_z: Tensor, prev_reward: Tensor, prev_done: Tensor) -> Tensor:
    """RL^2 network input: normalised observation, previous reward, previous done flag (0/1).
    ``prev_reward``/``prev_done`` have the batch shape of ``obs_z`` (without the last dim)."""
    extra = torch.stack([prev_reward.to(obs_z.dtype), prev_done.to(obs_z.dtype)], dim=-1)
    return torch.cat([obs_z, extra], dim=-1)


# ----------------------------------------------------------------------------------------------
# forward


def _linear(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """``x @ w + b`` where ``w`` is ``(*G, in, out)``, ``b`` is ``(*G, out)`` and ``x`` is
    ``(*G, *batch, in)``: one batched matmul over the agent dims, no Python loop."""
    if w.dim() == 2:
        if x.dim() == 2:
            return torch.addmm(b, x, w)  # the common single-agent case, in one kernel
        return torch.matmul(x, w) + b
    agent = w.shape[:-2]
    n = len(agent)
    if tuple(x.shape[:n]) != tuple(agent):
        raise ValueError(f"input of shape {tuple(x.shape)} does not start with the agent shape {tuple(agent)}")
    lead = x.shape[:-1]
    x2 = x.reshape(*agent, -1, x.shape[-1])
    y = torch.matmul(x2, w) + b.unsqueeze(-2)
    return y.reshape(*lead, w.shape[-1])


def _zoo_cell(z: Tensor, c: Tensor) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor, Tensor, Tensor], Tensor]:
    """The elementwise part of :func:`lstm_cell` on the gates ``z`` (see
    :data:`sumo_cli.nets.lstm_bptt.Cell`): ``(h', c', gate activations, tanh(c'))``."""
    i, j, f, o = torch.chunk(z, 4, dim=-1)
    si, tj, sf, so = torch.sigmoid(i), torch.tanh(j), torch.sigmoid(f + FORGET_BIAS), torch.sigmoid(o)
    c = c * sf + si * tj
    tc = torch.tanh(c)
    return tc * so, c, (si, tj, sf, so), tc


def lstm_cell(x: Tensor, h: Tensor, c: Tensor, kernel: Tensor, bias: Tensor) -> tuple[Tensor, Tensor]:
    """One step of the zoo's LSTM cell (gate order i, j, f, o; forget bias +1 inside)."""
    h_new, c_new, _, _ = _zoo_cell(_linear(torch.cat([x, h], dim=-1), kernel, bias), c)
    return h_new, c_new


def _mlp_net(params: Params, net: str, x: Tensor) -> Tensor:
    x = torch.tanh(_linear(x, params[f"{net}/fc0/w"], params[f"{net}/fc0/b"]))
    x = torch.tanh(_linear(x, params[f"{net}/fc1/w"], params[f"{net}/fc1/b"]))
    return _linear(x, params[f"{net}/out/w"], params[f"{net}/out/b"])


def _lstm_net(params: Params, net: str, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    e = torch.relu(_linear(x, params[f"{net}/fc/w"], params[f"{net}/fc/b"]))
    h, c = lstm_cell(e, h, c, params[f"{net}/lstm/kernel"], params[f"{net}/lstm/bias"])
    return _linear(h, params[f"{net}/out/w"], params[f"{net}/out/b"]), h, c


def _check_input(spec: PolicySpec, x: Tensor) -> None:
    if x.shape[-1] != spec.input_dim:
        extra = " (RL^2 input = obs + previous reward + previous done; see rl2_input)" if spec.arch == "rl2" else ""
        raise ValueError(f"input has last dim {x.shape[-1]}, {spec.arch} expects {spec.input_dim}{extra}")


def forward(
    spec: PolicySpec,
    params: Params,
    obs_z: Tensor,
    state: State,
    done_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor, State]:
    """One time step. ``obs_z``: normalised input ``(*G, *batch, input_dim)``; ``state`` from
    :func:`initial_state` (``{}`` for the MLP); ``done_mask`` (``(*G, *batch)``, optional): zero
    the state there before the step. Returns ``(mean (*G,*batch,A), value (*G,*batch), new_state)``."""
    if state is None:
        raise ValueError("state is None: pass initial_state(spec, batch_shape) (None would silently zero it)")
    _check_input(spec, obs_z)
    if spec.arch == "mlp":
        mean = _mlp_net(params, "pi", obs_z)
        value = _mlp_net(params, "vf", obs_z)[..., 0]
        return mean, value, state
    if done_mask is not None:
        state = reset_state(state, done_mask)
    mean, ph, pc = _lstm_net(params, "pi", obs_z, state["pi/h"], state["pi/c"])
    value, vh, vc = _lstm_net(params, "vf", obs_z, state["vf/h"], state["vf/c"])
    return mean, value[..., 0], {"pi/h": ph, "pi/c": pc, "vf/h": vh, "vf/c": vc}


def policy_mean(spec: PolicySpec, params: Params, obs_z: Tensor, state: State) -> tuple[Tensor, State]:
    """The policy half of :func:`forward` only: ``(mean, new_state)``, where the value net's state
    entries are passed through unchanged. For acting when values are not needed at every step
    (games compute them afterwards, for the agents that adapt, with :func:`forward_sequence`)."""
    _check_input(spec, obs_z)
    if spec.arch == "mlp":
        return _mlp_net(params, "pi", obs_z), state
    mean, ph, pc = _lstm_net(params, "pi", obs_z, state["pi/h"], state["pi/c"])
    return mean, {**state, "pi/h": ph, "pi/c": pc}


def forward_sequence(
    spec: PolicySpec,
    params: Params,
    obs_z_seq: Tensor,
    state0: State,
    dones: Tensor | None = None,
    fused: bool = False,
) -> tuple[Tensor, Tensor, State]:
    """Unroll ``T`` steps (truncated BPTT). ``obs_z_seq``: ``(T, *G, *batch, input_dim)`` (time
    first, then agent dims); ``dones``: ``(T, *G, *batch)``, ``dones[t]`` true zeroes the state
    before step ``t``. Returns ``(means (T,...,A), values (T,...), final_state)``. The MLP is
    evaluated for all steps in one call (agent dims must then come right after T).

    ``fused``: one agent's LSTMs through PyTorch's own LSTM kernel (:func:`_fused_sequence`): the
    same function up to rounding, faster for one agent's large batch, differentiable once only (the
    PPO update's path; the meta-learner's second-order paths keep the default)."""
    if state0 is None:
        raise ValueError("state0 is None: pass initial_state(spec, batch_shape) (None would silently zero it)")
    _check_input(spec, obs_z_seq)
    if spec.arch == "mlp":
        agent = params["logstd"].dim() - 1
        if agent == 0:
            mean, value, _ = forward(spec, params, obs_z_seq, state0)
            return mean, value, state0
        # move T behind the agent dims so that the batched matmul sees (*G, T, *batch, D)
        x = torch.movedim(obs_z_seq, 0, agent)
        mean, value, _ = forward(spec, params, x, state0)
        return torch.movedim(mean, agent, 0), torch.movedim(value, agent, 0), state0
    if fused and params["logstd"].dim() == 1 and obs_z_seq.dim() == 3 and spec.arch == "lstm":
        return _fused_sequence(spec, params, obs_z_seq, state0, dones)
    return _recurrent_sequence(spec, params, obs_z_seq, state0, dones)


def _torch_lstm_weights(kernel: Tensor, bias: Tensor, H: int) -> list[Tensor]:
    """The zoo cell's kernel ``(D + H, 4H)`` (gates i, j, f, o) and bias as the arguments of
    PyTorch's LSTM (rows i, f, g, o; weights ``(4H, in)``), the forget bias folded into the bias."""
    i, j, f, o = kernel.chunk(4, dim=1)
    w = torch.cat([i, f, j, o], dim=1)
    bi, bj, bf, bo = bias.chunk(4)
    b = torch.cat([bi, bf + FORGET_BIAS, bj, bo])
    return [w[:-H].t(), w[-H:].t(), b, torch.zeros_like(b)]


def _torch_lstm_nets(spec: PolicySpec, params: Params, x: Tensor, state0: State) -> tuple[Tensor, Tensor, State]:
    """Both LSTM nets of one agent over windows ``x`` ``(T, B, D)`` with no reset after the first
    step, through ``torch.lstm``: ``(means, values, final state)``."""
    H = spec.hidden
    T, B = x.shape[0], x.shape[1]
    heads, final = {}, {}
    for net in ("pi", "vf"):
        e = torch.relu(torch.addmm(params[f"{net}/fc/b"], x.reshape(T * B, -1), params[f"{net}/fc/w"]))
        out, h, c = torch.lstm(e.reshape(T, B, H), (state0[f"{net}/h"].unsqueeze(0), state0[f"{net}/c"].unsqueeze(0)),
                               _torch_lstm_weights(params[f"{net}/lstm/kernel"], params[f"{net}/lstm/bias"], H),
                               True, 1, 0.0, False, False, False)
        heads[net] = torch.addmm(params[f"{net}/out/b"], out.reshape(T * B, H), params[f"{net}/out/w"])
        final[f"{net}/h"], final[f"{net}/c"] = h[0], c[0]
    return heads["pi"].reshape(T, B, -1), heads["vf"].reshape(T, B), final


def _fused_sequence(spec: PolicySpec, params: Params, x: Tensor, state0: State,
                    dones: Tensor | None) -> tuple[Tensor, Tensor, State]:
    """:func:`forward_sequence` of one agent's LSTMs ``x`` ``(T, B, D)`` with ``torch.lstm`` (one
    fused kernel per net and window batch, about 1.2x faster forward and backward than the autograd
    unroll at the PPO update's minibatches of ~400 windows of 10 steps). ``torch.lstm`` knows no
    reset inside a sequence: a reset at the first step zeroes the initial state, and the windows with
    a reset later on (a bout that ended inside the window) take the autograd unroll."""
    if dones is None:
        return _torch_lstm_nets(spec, params, x, state0)
    d = dones.to(torch.bool)
    keep0 = (~d[0]).to(x.dtype).unsqueeze(-1)
    state0 = {k: v * keep0 for k, v in state0.items()}
    inner = d[1:].any(0)
    if not inner.any():
        return _torch_lstm_nets(spec, params, x, state0)
    if inner.all():
        return _recurrent_sequence(spec, params, x, state0, dones)
    plain, rest = torch.nonzero(~inner).flatten(), torch.nonzero(inner).flatten()
    m1, v1, s1 = _torch_lstm_nets(spec, params, x[:, plain], {k: v[plain] for k, v in state0.items()})
    m2, v2, s2 = _recurrent_sequence(spec, params, x[:, rest], {k: v[rest] for k, v in state0.items()}, dones[:, rest])
    back = torch.argsort(torch.cat([plain, rest]))  # the windows' original order
    return (torch.cat([m1, m2], 1)[:, back], torch.cat([v1, v2], 1)[:, back],
            {k: torch.cat([s1[k], s2[k]])[back] for k in s1})


def _recurrent_sequence(spec: PolicySpec, params: Params, x: Tensor, state0: State,
                        dones: Tensor | None) -> tuple[Tensor, Tensor, State]:
    """:func:`forward_sequence` of LSTM nets, the same function as :func:`forward` step by step, in
    fewer and larger operations (a backward pass costs per operation on these small nets, and the
    meta-learner's second-order one several times over): the embeddings and the input half of the
    gates for all T steps at once, the policy and value nets of every agent side by side as one
    batch of ``2 * agents`` matrices throughout, the output layers after the loop.

    Layouts are chosen so that neither pass copies a whole window's gates: the gates' input half
    comes out of one batched product as (2A, T, B, 4H); its per-step slices are taken by unbind,
    whose backward stacks the steps' gradients once (indexing x[t] would zero-fill a tensor of x's
    whole size per step), straight into the layout the product's backward reads."""
    H = spec.hidden
    agent = tuple(params["logstd"].shape[:-1])
    n = len(agent)
    A = math.prod(agent)
    T, batch = x.shape[0], x.shape[1 + n : -1]
    B = math.prod(batch)
    xa = torch.movedim(x, 0, n).reshape(A, T * B, x.shape[-1])  # agents first: (A, T*B, D)

    def pair(key: str) -> Tensor:  # the policy's and the value net's tensor of every agent, (2A, ...)
        a, b = params[f"pi/{key}"], params[f"vf/{key}"]
        return torch.stack([a, b]).reshape(2 * A, *a.shape[n:])

    def pair_state(net: str, part: str) -> Tensor:
        return state0[f"{net}/{part}"].reshape(A, B, H)

    w_fc, b_fc = pair("fc/w"), pair("fc/b").unsqueeze(1)  # (2A, D, H), (2A, 1, H)
    kernels, bias = pair("lstm/kernel"), pair("lstm/bias").unsqueeze(1)  # (2A, 2H, 4H), (2A, 1, 4H)
    xx = xa.unsqueeze(0).expand(2, *xa.shape).reshape(2 * A, T * B, xa.shape[-1])
    e = torch.relu(torch.baddbmm(b_fc, xx, w_fc))  # (2A, T*B, H)
    gx = torch.baddbmm(bias, e, kernels[:, :H]).reshape(2 * A, T, B, 4 * H)
    kh = kernels[:, H:]  # (2A, H, 4H)
    h = torch.cat([pair_state("pi", "h"), pair_state("vf", "h")])  # (2A, B, H)
    c = torch.cat([pair_state("pi", "c"), pair_state("vf", "c")])
    keep = None
    if dones is not None:
        k = (~dones.to(torch.bool)).reshape(T, 1, A, B, 1).expand(T, 2, A, B, 1)
        keep = k.reshape(T, 2 * A, B, 1).to(x.dtype)
    hs = []
    for t, g in enumerate(gx.unbind(1)):
        if keep is not None:
            h, c = h * keep[t], c * keep[t]
        h, c, _, _ = _zoo_cell(torch.baddbmm(g, h, kh), c)
        hs.append(h)
    out_pi, out_vf = torch.stack(hs, dim=1).reshape(2, A, T * B, H).unbind(0)  # each (A, T*B, H)

    def head(net: str, out: Tensor, width: int) -> Tensor:  # (A, T*B, H) -> (T, *agent, *batch, width)
        w, b = params[f"{net}/out/w"], params[f"{net}/out/b"]
        if n == 0:  # one agent: one plain product (the path every single-agent result was computed on)
            return torch.addmm(b, out[0], w).reshape(T, *batch, width)
        y = torch.baddbmm(b.reshape(A, 1, width), out, w.reshape(A, H, width)).reshape(*agent, T, *batch, width)
        return torch.movedim(y, n, 0)

    mean = head("pi", out_pi, params["pi/out/w"].shape[-1])
    value = head("vf", out_vf, 1)[..., 0]
    (h_pi, h_vf), (c_pi, c_vf) = h.reshape(2, A, B, H).unbind(0), c.reshape(2, A, B, H).unbind(0)
    shape = (*agent, *batch, H)
    state = {"pi/h": h_pi.reshape(shape), "pi/c": c_pi.reshape(shape),
             "vf/h": h_vf.reshape(shape), "vf/c": c_vf.reshape(shape)}
    return mean, value, state


# ----------------------------------------------------------------------------------------------
# diagonal Gaussian


def _align_logstd(logstd: Tensor, like: Tensor) -> Tensor:
    """Insert singleton dims so that ``logstd`` ``(*G, A)`` broadcasts against ``like``
    ``(*G, *batch, A)`` with the agent dims aligned on the left."""
    extra = like.dim() - logstd.dim()
    if logstd.dim() <= 1 or extra <= 0:
        return logstd
    return logstd.reshape(*logstd.shape[:-1], *([1] * extra), logstd.shape[-1])


def log_prob(mean: Tensor, logstd: Tensor, action: Tensor) -> Tensor:
    """Log density of ``action`` under N(mean, exp(logstd)^2), summed over the action dims
    (never averaged). Shape: ``mean.shape[:-1]``."""
    ls = _align_logstd(logstd, mean)
    z = (action - mean) * torch.exp(-ls)
    return (-0.5 * z * z - ls - _LOG_SQRT_2PI).sum(-1)


def entropy(logstd: Tensor) -> Tensor:
    """Entropy of the diagonal Gaussian, summed over action dims; shape ``logstd.shape[:-1]``
    (state-independent, so one value per agent)."""
    return (logstd + 0.5 + _LOG_SQRT_2PI).sum(-1)


def sample(mean: Tensor, logstd: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """``mean + exp(logstd) * N(0, 1)`` with noise drawn from ``generator``."""
    noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device=mean.device)
    return mean + torch.exp(_align_logstd(logstd, mean)) * noise
