"""The server's sampler on hand-made logits: what each parameter does to the distribution.

Draws are seeded, so every count below is the same on every run; the bounds are five binomial
standard deviations around the expected count, wide enough for any seed, narrow enough that a
sampler ignoring ``temperature`` or ``top_p`` lands hundreds of deviations away.
"""

import math

import pytest
import torch

from calyrex.serve.request import SamplingParams
from calyrex.serve.sampling import Sampler

DRAWS = 4000
# probabilities laid out out of order, so a cut by vocabulary index instead of by mass shows
PROBS = [0.1, 0.4, 0.2, 0.3]  # descending: token 1 (0.4), 3 (0.3), 2 (0.2), 0 (0.1)
LOGITS = [2.0, -1.0, 0.5, 1.0, 0.0]


def _draws(logits, n=DRAWS, **params):
    sampler = Sampler(SamplingParams(**params))
    x = torch.tensor(logits, dtype=torch.float32)
    return [sampler(x) for _ in range(n)]


def _counts(draws, vocab):
    return [draws.count(i) for i in range(vocab)]


def _assert_binomial(counts, expected):
    """Each count within 5 binomial standard deviations of ``n·p`` (p = ``expected``)."""
    n = sum(counts)
    for token, (c, p) in enumerate(zip(counts, expected, strict=True)):
        bound = 5 * math.sqrt(n * p * (1 - p)) + 1
        assert abs(c - n * p) <= bound, (token, c, n * p, bound, counts)


def _softmax(logits, temperature=1.0):
    e = [math.exp(x / temperature) for x in logits]
    return [v / sum(e) for v in e]


@pytest.mark.parametrize(
    ("top_p", "kept"),
    [
        (0.35, {1}),  # below the top token's mass: the top token alone
        (0.69, {1, 3}),  # 0.4 < 0.69 ≤ 0.4 + 0.3
        (0.71, {1, 3, 2}),  # just past 0.7: the third token joins
        (0.95, {1, 3, 2, 0}),  # past 0.9: nothing dropped
    ],
)
def test_top_p_drops_exactly_the_tail(top_p, kept):
    """The smallest set of most likely tokens whose mass reaches ``top_p`` is kept, renormalised;
    every other token never comes up."""
    draws = _draws([math.log(p) for p in PROBS], top_p=top_p, seed=3)
    counts = _counts(draws, len(PROBS))
    assert {t for t, c in enumerate(counts) if c} == kept
    mass = sum(PROBS[t] for t in kept)
    _assert_binomial(counts, [PROBS[t] / mass if t in kept else 0.0 for t in range(len(PROBS))])


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_temperature_scales_the_distribution(temperature):
    """Token frequencies follow softmax(logits / T)."""
    counts = _counts(_draws(LOGITS, temperature=temperature, seed=11), len(LOGITS))
    _assert_binomial(counts, _softmax(LOGITS, temperature))


def test_top_p_cuts_the_distribution_after_temperature():
    """At T = 1 the top two tokens carry 0.9 of the mass; at T = 4 the same ``top_p`` = 0.8
    needs four: the cut is taken on softmax(logits / T)."""
    logits = [3.0, 2.0, 0.0, -1.0, -3.0]
    for temperature, kept in ((1.0, 2), (4.0, 4)):
        probs = _softmax(logits, temperature)
        order = sorted(range(len(logits)), key=lambda t: -probs[t])
        head = set(order[:kept])
        assert sum(probs[t] for t in order[: kept - 1]) < 0.8 <= sum(probs[t] for t in head)
        counts = _counts(_draws(logits, temperature=temperature, top_p=0.8, seed=5), len(logits))
        assert {t for t, c in enumerate(counts) if c} == head
        mass = sum(probs[t] for t in head)
        _assert_binomial(counts, [probs[t] / mass if t in head else 0.0 for t in range(5)])


def test_a_temperature_below_the_epsilon_is_greedy():
    assert set(_draws(LOGITS, n=200, temperature=0.0, seed=1)) == {0}
    assert set(_draws([0.0, 0.1, 0.0], n=200, temperature=1e-6)) == {1}


def test_the_same_seed_gives_the_same_draws_and_another_seed_others():
    flat = [0.0] * 16  # 16 equally likely tokens: two seeds agree on 100 draws with p = 16^-100
    a, again, b = (_draws(flat, n=100, temperature=1.0, seed=s) for s in (7, 7, 8))
    assert a == again
    assert a != b
    unseeded = [_draws(flat, n=100, temperature=1.0) for _ in range(2)]
    assert unseeded[0] != unseeded[1]  # no seed: a fresh one per request
    assert len(set(a)) > 8  # and the draws do spread over the vocabulary


def test_a_huge_seed_is_reduced_not_refused():
    assert _draws(LOGITS, n=50, seed=2**64 + 7) == _draws(LOGITS, n=50, seed=(2**64 + 7) % 2**63)


def test_the_logits_are_not_changed():
    x = torch.tensor(LOGITS)
    before = x.clone()
    Sampler(SamplingParams(temperature=0.7, top_p=0.5, seed=0))(x)
    assert torch.equal(x, before)
