"""Rule decodability: a linear probe per layer, trained and scored on a held-out split.

Legend: N examples, L layers, D hidden, K rules.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def stratified_split(labels: Sequence[int], test_fraction: float, seed: int) -> tuple[list, list]:
    """(train, test) indices holding out ``test_fraction`` of each class (a class of one trains)."""
    g = torch.Generator().manual_seed(seed)
    train, test = [], []
    for cls in sorted(set(labels)):
        idx = [i for i, y in enumerate(labels) if y == cls]
        idx = [idx[j] for j in torch.randperm(len(idx), generator=g).tolist()]
        n_test = round(len(idx) * test_fraction) if len(idx) > 1 else 0
        n_test = min(max(n_test, 1 if len(idx) > 1 else 0), len(idx) - 1)
        test += idx[:n_test]
        train += idx[n_test:]
    if not test:
        raise ValueError("the probe needs at least two examples of some rule for a held-out split")
    return sorted(train), sorted(test)


def fit_predict(
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_test: torch.Tensor,
    num_classes: int,
    l2: float = 1e-2,
    steps: int = 100,
) -> torch.Tensor:
    """Multinomial logistic regression on standardised features (full-batch L-BFGS).

    ``x_train`` (N, D), ``y_train`` (N,), ``x_test`` (M, D) → predicted classes (M,).
    Deterministic: the weights start at zero, so a feature-free layer predicts from the bias.
    """
    x_train, x_test = x_train.double(), x_test.double()
    mean, std = x_train.mean(0), x_train.std(0, unbiased=False)
    std = torch.where(std > 1e-8 * (1 + mean.abs()), std, torch.ones_like(std))
    a, b = (x_train - mean) / std, (x_test - mean) / std
    w = torch.zeros(a.shape[1], num_classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(num_classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, bias], max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(a @ w + bias, y_train) + l2 * w.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    return (b @ w + bias).argmax(-1).detach()


def probe_accuracy(
    features: torch.Tensor,
    labels: Sequence[int],
    test_fraction: float = 0.25,
    seed: int = 0,
    l2: float = 1e-2,
) -> tuple[list[float], float, int]:
    """Held-out accuracy per layer, the chance level (the test split's majority share), test size.

    ``features`` (N, L, D): one pooled vector per example and layer.
    """
    train, test = stratified_split(labels, test_fraction, seed)
    y = torch.tensor(list(labels))
    k = int(y.max()) + 1
    acc = []
    for layer in range(features.shape[1]):
        pred = fit_predict(features[train, layer], y[train], features[test, layer], k, l2)
        acc.append(round(float((pred == y[test]).double().mean()), 6))
    chance = float(torch.bincount(y[test], minlength=k).max()) / len(test)
    return acc, round(chance, 6), len(test)
