"""Colours: a colour-blind-safe sequential map (cividis) and legible text on it.

cividis (Nuñez, Anderton and Renslow, 2018) is perceptually uniform, readable with
red-green colour blindness, and its lightness grows monotonically, so a heat map
stays ordered when printed in greyscale or washed out by a projector.  The table
below is matplotlib's cividis sampled at 11 points; values between are interpolated
linearly in sRGB (close enough to the full 256-entry map for cell fills).
"""

from __future__ import annotations

from fractions import Fraction

#: cividis at 0, 0.1, ..., 1 (sRGB, 0..255).
_CIVIDIS = (
    (0, 34, 78), (8, 51, 112), (53, 69, 108), (79, 87, 108), (102, 105, 112),
    (125, 124, 120), (148, 142, 119), (174, 163, 113), (200, 184, 102), (229, 207, 82),
    (254, 232, 56),
)
#: Masked cells: a light grey with hatching.
MASKED_FILL = (230, 230, 230)
MASKED_HATCH = (150, 150, 150)
#: Two bar colours far apart in cividis (and in lightness: distinct in greyscale).
SERIES = ((8, 51, 112), (200, 184, 102))


def cividis(t: Fraction | float) -> tuple[int, int, int]:
    """The colour of ``t`` in [0, 1] (clamped), as 0..255 sRGB."""
    t = min(max(Fraction(t), Fraction(0)), Fraction(1)) * (len(_CIVIDIS) - 1)
    k = min(int(t), len(_CIVIDIS) - 2)
    w = t - k
    lo, hi = _CIVIDIS[k], _CIVIDIS[k + 1]
    return tuple(round(a + (b - a) * w) for a, b in zip(lo, hi))


def luminance(rgb: tuple[int, int, int]) -> float:
    """WCAG relative luminance of an sRGB colour (0 black .. 1 white)."""
    def channel(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def text_colour(rgb: tuple[int, int, int]) -> tuple[int, int, int]:
    """Black or white, whichever contrasts more with the fill (WCAG contrast ratio)."""
    lum = luminance(rgb)
    on_black = (lum + 0.05) / 0.05
    on_white = 1.05 / (lum + 0.05)
    return (0, 0, 0) if on_black >= on_white else (255, 255, 255)


def hex_colour(rgb: tuple[int, int, int]) -> str:
    """``#rrggbb``."""
    r, g, b = rgb
    return f"#{r:02x}{g:02x}{b:02x}"
