"""Optimisers: plain SGD and Adam, with L1 applied as a proximal step after the update.
No paper section (Bismarck's SGD; Adam after Kingma & Ba).

Order of one step (fixed): gradient of the data term + L2·W (intercept unregularised) → update
→ soft-threshold W by lr·l1 (proximal L1; intercept untouched).
"""

from __future__ import annotations

import numpy as np


class SGD:
    name = "sgd"

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape

    def step(self, W: np.ndarray, b: np.ndarray, gW: np.ndarray, gb: np.ndarray, lr: float):
        W -= lr * gW
        b -= lr * gb


class Adam:
    name = "adam"

    def __init__(self, shape: tuple[int, ...], beta1=0.9, beta2=0.999, eps=1e-8):
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.mW, self.vW = np.zeros(shape), np.zeros(shape)
        self.mb, self.vb = np.zeros(shape[1]), np.zeros(shape[1])
        self.t = 0

    def step(self, W: np.ndarray, b: np.ndarray, gW: np.ndarray, gb: np.ndarray, lr: float):
        self.t += 1
        c1, c2 = 1 - self.beta1**self.t, 1 - self.beta2**self.t
        for p, g, m, v in ((W, gW, self.mW, self.vW), (b, gb, self.mb, self.vb)):
            m *= self.beta1
            m += (1 - self.beta1) * g
            v *= self.beta2
            v += (1 - self.beta2) * g * g
            p -= lr * (m / c1) / (np.sqrt(v / c2) + self.eps)


def soft_threshold(W: np.ndarray, amount: float) -> None:
    """Proximal operator of amount·‖W‖₁, in place."""
    np.copyto(W, np.sign(W) * np.maximum(np.abs(W) - amount, 0.0))


OPTIMIZERS = {"sgd": SGD, "adam": Adam}
DEFAULT_LR = {"sgd": 0.1, "adam": 0.01}
