"""GAE: a hand-computed example, termination (bootstrap 0) apart from truncation (bootstrap
V(final obs)), and agreement with a naive per-episode computation on random episode boundaries."""

import pytest
import torch

from sumo_cli.ppo.advantages import discounted_returns, gae
from sumo_cli.ppo.rollout import Rollout


def _rollout(rewards, values, last_values, terminated=None, truncated=None, final_values=None):
    rewards = torch.as_tensor(rewards, dtype=torch.float64)
    if rewards.dim() == 1:
        rewards = rewards[:, None]
    T, N = rewards.shape
    shape = (T, N)
    f = lambda x, dt=torch.float64: torch.zeros(shape, dtype=dt) if x is None else torch.as_tensor(x, dtype=dt).reshape(shape)  # noqa: E731
    term, trunc = f(terminated, torch.bool), f(truncated, torch.bool)
    first = torch.zeros(shape, dtype=torch.bool)
    first[0] = True
    first[1:] = (term | trunc)[:-1]
    return Rollout(
        obs=torch.zeros(T, N, 1),
        actions=torch.zeros(T, N, 1),
        logp=torch.zeros(shape),
        values=f(values),
        rewards=rewards,
        terminated=term,
        truncated=trunc,
        first=first,
        final_values=f(final_values),
        last_values=torch.as_tensor(last_values, dtype=torch.float64).reshape(N),
    )


def test_hand_computed_example():
    # gamma 0.9, lambda 0.8, no episode end: deltas 0.86, 1.87, 2.88
    r = _rollout([1.0, 2.0, 3.0], [0.5, 0.4, 0.3], [0.2])
    adv, ret = gae(r, 0.9, 0.8)
    # A2 = 2.88; A1 = 1.87 + 0.72 * 2.88; A0 = 0.86 + 0.72 * A1
    expected = torch.tensor([3.699392, 3.9436, 2.88], dtype=torch.float64)
    assert torch.allclose(adv[:, 0], expected, atol=1e-12)
    assert torch.allclose(ret[:, 0], expected + torch.tensor([0.5, 0.4, 0.3], dtype=torch.float64), atol=1e-12)


def test_terminated_bootstraps_zero_truncated_bootstraps_final_value():
    # the episode ends after step 1; a new one starts at step 2
    kw = dict(rewards=[1.0, 2.0, 3.0], values=[0.5, 0.4, 0.3], last_values=[0.2], final_values=[0.0, 5.0, 0.0])
    term = _rollout(**kw, terminated=[False, True, False])
    trunc = _rollout(**kw, truncated=[False, True, False])
    a_term, _ = gae(term, 0.9, 0.8)
    a_trunc, _ = gae(trunc, 0.9, 0.8)
    # step 2 belongs to the next episode: A2 = 3 + 0.9 * 0.2 - 0.3 either way
    assert a_term[2, 0].item() == pytest.approx(2.88) and a_trunc[2, 0].item() == pytest.approx(2.88)
    # terminated: A1 = 2 - 0.4; A0 = (1 + 0.9 * 0.4 - 0.5) + 0.72 * A1
    assert a_term[1, 0].item() == pytest.approx(1.6)
    assert a_term[0, 0].item() == pytest.approx(0.86 + 0.72 * 1.6)
    # truncated: A1 = 2 + 0.9 * 5 - 0.4
    assert a_trunc[1, 0].item() == pytest.approx(6.1)
    assert a_trunc[0, 0].item() == pytest.approx(0.86 + 0.72 * 6.1)
    # where an env reports both, termination wins
    both = _rollout(**kw, terminated=[False, True, False], truncated=[False, True, False])
    assert torch.allclose(gae(both, 0.9, 0.8)[0], a_term)


def _naive(rewards, values, term, trunc, final_values, last_values, gamma, lam):
    """Per env, per episode: TD errors with the episode's own bootstrap, then the lambda-sum."""
    T, N = rewards.shape
    adv = torch.zeros(T, N, dtype=torch.float64)
    for n in range(N):
        start = 0
        for t in range(T):
            ended = bool(term[t, n] or trunc[t, n])
            if not ended and t < T - 1:
                continue
            steps = list(range(start, t + 1))
            if term[t, n]:
                boot = 0.0
            elif trunc[t, n]:
                boot = float(final_values[t, n])
            else:
                boot = float(last_values[n])
            nxt = [float(values[s + 1, n]) for s in steps[:-1]] + [boot]
            deltas = [float(rewards[s, n]) + gamma * nxt[i] - float(values[s, n]) for i, s in enumerate(steps)]
            for i, s in enumerate(steps):
                adv[s, n] = sum((gamma * lam) ** k * deltas[i + k] for k in range(len(steps) - i))
            start = t + 1
    return adv


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_naive_per_episode_computation(seed):
    g = torch.Generator().manual_seed(seed)
    T, N = 40, 6
    rewards = torch.randn(T, N, generator=g, dtype=torch.float64)
    values = torch.randn(T, N, generator=g, dtype=torch.float64)
    u = torch.rand(T, N, generator=g, dtype=torch.float64)
    term = u < 0.08
    trunc = (u >= 0.08) & (u < 0.16)
    final_values = torch.where(trunc, torch.randn(T, N, generator=g, dtype=torch.float64), torch.zeros(T, N, dtype=torch.float64))
    last_values = torch.randn(N, generator=g, dtype=torch.float64)
    r = _rollout(rewards, values, last_values, term, trunc, final_values)
    gamma, lam = 0.995, 0.95
    adv, ret = gae(r, gamma, lam)
    expected = _naive(rewards, values, term, trunc, final_values, last_values, gamma, lam)
    assert torch.allclose(adv, expected, atol=1e-10)
    assert torch.allclose(ret, expected + values, atol=1e-10)
    # the distinction matters: treating truncation as termination changes the result
    r_wrong = _rollout(rewards, values, last_values, term | trunc, None, final_values)
    assert not torch.allclose(gae(r_wrong, gamma, lam)[0], adv, atol=1e-3)


def test_lambda_one_zero_values_gives_discounted_returns():
    g = torch.Generator().manual_seed(3)
    T, N = 25, 3
    rewards = torch.randn(T, N, generator=g, dtype=torch.float64)
    term = torch.rand(T, N, generator=g) < 0.2
    r = _rollout(rewards, torch.zeros(T, N), torch.zeros(N), term)
    adv, _ = gae(r, 0.9, 1.0)
    assert torch.allclose(adv, discounted_returns(rewards, term, 0.9), atol=1e-12)
