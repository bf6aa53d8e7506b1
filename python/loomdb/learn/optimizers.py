"""Optimisers: plain SGD, Nesterov momentum with restart and averaging (the default), Adam;
L1 is applied as a proximal step after the update.  No paper section (Bismarck's SGD;
Nesterov's momentum with O'Donoghue & Candès's restart; Adam after Kingma & Ba).

Order of one step (fixed): gradient of the data term + L2·W (intercept unregularised) → update
→ soft-threshold W by lr·l1 (proximal L1; intercept untouched).
"""

from __future__ import annotations

import numpy as np

from loomdb.learn.step_kernels import momentum_step, shrink


class SGD:
    name = "sgd"

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape

    def step(self, W: np.ndarray, b: np.ndarray, gW: np.ndarray, gb: np.ndarray, lr: float):
        W -= lr * gW
        b -= lr * gb


class Nesterov:
    """SGD with Nesterov momentum, adaptive restart and epoch averaging (the default optimiser).

    Momentum β_t = t/(t+3) (Nesterov's schedule, t counted in steps since the last restart), in
    the form v ← β·v + g, W ← W − lr·(g + β·v), at the automatic step.  After each epoch:

    * the epoch loss went up (O'Donoghue & Candès 2015, function restart at epoch granularity):
      the velocity is reset, W goes back to the previous epoch's mean iterate, and t is capped at
      a quarter of what it had reached — so noise-dominated data (many batches, rare features)
      falls back towards plain SGD, while ill-conditioned data, which rarely restarts, keeps the
      acceleration;
    * otherwise the epoch's mean iterate (Polyak–Ruppert over the epoch) is kept: it is what
      training returns, which removes the noise floor a constant step leaves.  With L1 the
      running sum holds each step's forward point (before the proximal step) and what is kept
      is that mean's proximal point (``end_epoch``), as sparse as the steps' own iterates.

    Cost per step: three m×k axpys (velocity, step, running sum) besides SGD's, in one numba pass
    (``step_kernels.momentum_step``); memory four m×k arrays. Measured over 6 shuffles (l2 = 1e-4,
    automatic step, batch 256): training reached the converged objective + 1% in 50 of 60 runs
    (plain SGD: 18) — breast_cancer and digits in 60–160 epochs instead of never within 1000 — and
    stayed within 0.2 points of the converged accuracy everywhere; MNIST<5 z-scored still ends ~1.4%
    above the objective.
    """

    name = "nesterov"
    SHRINK = 4

    def __init__(self, shape: tuple[int, ...]):
        self.vW, self.vb = np.zeros(shape), np.zeros(shape[1])
        self.sW, self.sb = np.zeros(shape), np.zeros(shape[1])
        self.mW: np.ndarray | None = None
        self.mb: np.ndarray | None = None
        self.count, self.t = 0, 0
        self.tmax: int | None = None
        self.prev, self.restarts = np.inf, 0

    def step(self, W: np.ndarray, b: np.ndarray, gW: np.ndarray, gb: np.ndarray, lr: float):
        t = self.t if self.tmax is None else min(self.t, self.tmax)
        beta = t / (t + 3.0)
        self.t += 1
        momentum_step(W, gW, self.vW, self.sW, beta, lr)
        momentum_step(b, gb, self.vb, self.sb, beta, lr)
        self.count += 1

    def end_epoch(self, W: np.ndarray, b: np.ndarray, loss: float, prox: float = 0.0) -> None:
        """Restart or keep the epoch's mean iterate; ``prox``: the epoch's proximal L1 amount
        (its lr · l1), 0 without L1.

        With L1 the model kept is ``soft_threshold(mean, prox)``, not the mean.  The running
        sum (``step_kernels.momentum_step``, and the fused and device steps alike) adds each
        step's forward point u = W − lr·(g + β·v), before the trainer's proximal step.
        Forward–backward splitting's fixed point is w* = prox(u*) with u* = w* − lr·∇f(w*)
        (Combettes & Wajs 2005, Prop. 3.1; Parikh & Boyd, Proximal Algorithms §4.2), so the
        averaged forward points are taken through one more backward (proximal) step; the prox
        is non-expansive, so the kept model is at most ‖ū − u*‖ from w* and averaging still
        removes the noise floor.  The mean alone was no proximal point: on a 2,000-row table
        whose steps kept every weight at 0 at l1 = 10 it kept them all non-zero (an L1 penalty
        above 12 against a recorded loss of 0.695).  Averaging the proximal points instead
        would keep every weight any step of the epoch left non-zero (a numpy replica of that
        table with 9 features at l1 = 0.05: 4 non-zero, against 1 here and at the optimum).
        The intercept is never shrunk.  Without L1 nothing here changes a bit.  Not done here:
        the velocity carries the data gradient alone, so at β > 0 the steps' own fixed point
        meets L1 weakened by 1 − β (FISTA's form would carry it); restarts cap β."""
        if loss > self.prev and self.mW is not None and self.mb is not None:
            W[...] = self.mW
            b[...] = self.mb
            self.vW[...] = 0.0
            self.vb[...] = 0.0
            self.tmax = min(self.t, self.t if self.tmax is None else self.tmax) // self.SHRINK
            self.t = 0
            self.restarts += 1
        elif self.count:
            self.mW, self.mb = self.sW / self.count, self.sb / self.count
            if prox:
                shrink(self.mW, prox)
        self.sW[...] = 0.0
        self.sb[...] = 0.0
        self.count = 0
        self.prev = loss

    def model(self, W: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.mW is None or self.mb is None:
            return W, b
        return self.mW.copy(), self.mb.copy()


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
    """Proximal operator of amount·‖W‖₁, in place (``step_kernels.shrink``)."""
    shrink(W, amount)


OPTIMIZERS = {"nesterov": Nesterov, "sgd": SGD, "adam": Adam}
DEFAULT_LR = {"nesterov": 0.1, "sgd": 0.1, "adam": 0.01}
AUTOMATIC_STEP = ("nesterov", "sgd")  # optimisers whose default lr is the automatic step
