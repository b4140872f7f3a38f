"""What a PNG of attnmt.plot shows, read back from the file: its size and its line colours."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import colors
from matplotlib import image as mpimg

from attnmt.plot import DPI, heatmap_inches


def pixels(png: Path) -> np.ndarray:
    """The PNG as (height, width, 3) RGB floats in [0, 1]."""
    return mpimg.imread(png)[..., :3]


def shows_colour(png: Path, name: str, alpha: float = 1.0, tolerance: float = 0.02) -> bool:
    """Whether some pixel of the PNG has matplotlib colour `name` (e.g. "tab:blue"), drawn
    with opacity `alpha` on white."""
    wanted = alpha * np.array(colors.to_rgb(name)) + (1 - alpha)
    return bool((np.abs(pixels(png) - wanted).max(-1) < tolerance).any())


def heatmap_pixels(rows: int, columns: int) -> tuple[int, int]:
    """(height, width) in pixels of the heatmap PNG of a rows x columns weight matrix."""
    width, height = heatmap_inches(rows, columns)
    return round(height * DPI), round(width * DPI)
