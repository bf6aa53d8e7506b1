"""How close an image read at k scans is to the full image: PSNR and MSSIM.

PCR §4.3 uses MSSIM (Wang et al. 2003) to compare scan groups with the reference image and
finds it predicts relative accuracy.  ``mssim`` is Wang et al.'s: an 11 × 11 Gaussian window
(σ = 1.5), C1 = (0.01·255)², C2 = (0.03·255)², 'valid' filtering, the mean of the SSIM map,
computed on single-channel (luma) uint8 images.  ``psnr`` is 10·log10(255² / MSE) over every
pixel and channel (infinity for identical images).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

WINDOW, SIGMA = 11, 1.5
C1, C2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2


def psnr(image: np.ndarray, reference: np.ndarray) -> float:
    diff = np.asarray(image, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    mse = float(np.mean(diff * diff))
    return float("inf") if mse == 0 else 10.0 * np.log10(255.0**2 / mse)


def _gaussian() -> np.ndarray:
    x = np.arange(WINDOW) - WINDOW // 2
    g = np.exp(-(x * x) / (2 * SIGMA * SIGMA))
    return g / g.sum()


def _filter(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Separable 'valid' filtering of a 2-D array by the 1-D window ``g``."""
    rows = sliding_window_view(x, len(g), axis=0) @ g
    return sliding_window_view(rows, len(g), axis=1) @ g


def mssim(image: np.ndarray, reference: np.ndarray) -> float:
    """Mean structural similarity of two single-channel images (1.0 when identical)."""
    a = np.asarray(image, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"mssim compares two 2-D images of one shape; got {a.shape}, {b.shape}")
    if min(a.shape) < WINDOW:
        return 1.0 if np.array_equal(a, b) else float("nan")
    g = _gaussian()
    mu_a, mu_b = _filter(a, g), _filter(b, g)
    var_a = _filter(a * a, g) - mu_a * mu_a
    var_b = _filter(b * b, g) - mu_b * mu_b
    cov = _filter(a * b, g) - mu_a * mu_b
    num = (2 * mu_a * mu_b + C1) * (2 * cov + C2)
    den = (mu_a * mu_a + mu_b * mu_b + C1) * (var_a + var_b + C2)
    return float(np.mean(num / den))
