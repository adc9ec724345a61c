"""The project's colours, in one place: every table, figure, HTML page and slide asks here.

* **Sequential** (:func:`sequential`): ColorBrewer's *Blues* (Brewer, 2003: its
  lightest, middle and darkest classes, interpolated linearly in sRGB), for quantities
  that grow from a least value: attention weights, probabilities.  A single hue, so it
  is readable with every common colour-vision deficiency; its lightness falls
  monotonically from near white to dark navy ("darker: larger"), so the order survives
  greyscale printing and a washed-out projector, and a table of small weights stays
  light and calm.
* **Diverging** (:func:`diverging`): ColorBrewer's *PuOr* (colour-blind safe), orange
  below 0, white at 0, purple above, for signed tables (learned positional embeddings).
* **Series** (:data:`SERIES`): two colours of Okabe and Ito's colour-blind-safe
  palette, far apart in lightness too, for bars side by side (LayerNorm input and output).

Cell text is black or white, whichever contrasts more with the fill (WCAG ratio; at
least 4.5 : 1 on every shade of both maps).
"""

from __future__ import annotations

from fractions import Fraction

RGB = tuple[int, int, int]

#: ColorBrewer Blues at 0, 1/2 and 1 (sRGB 0..255), from the least to the largest value.
BLUES: tuple[RGB, ...] = ((247, 251, 255), (107, 174, 214), (8, 48, 107))
#: ColorBrewer PuOr, 9 classes, from orange (the most negative) to purple (the most positive).
PUOR: tuple[RGB, ...] = (
    (179, 88, 6), (224, 130, 20), (253, 184, 99), (254, 224, 182), (247, 247, 247),
    (216, 218, 235), (178, 171, 210), (128, 115, 172), (84, 39, 136),
)
#: Masked cells: a light grey with hatching.
MASKED_FILL: RGB = (230, 230, 230)
MASKED_HATCH: RGB = (150, 150, 150)
#: Okabe-Ito blue and orange: bars side by side (distinct in hue and in greyscale).
SERIES: tuple[RGB, ...] = ((0, 114, 178), (230, 159, 0))
#: The curve of a function drawn through certified points, and the points themselves.
LINE: RGB = (0, 114, 178)
MARK: RGB = (0, 0, 0)


def _interpolate(anchors: tuple[RGB, ...], t: Fraction | float) -> RGB:
    t = min(max(Fraction(t), Fraction(0)), Fraction(1)) * (len(anchors) - 1)
    k = min(int(t), len(anchors) - 2)
    w = t - k
    lo, hi = anchors[k], anchors[k + 1]
    return tuple(round(a + (b - a) * w) for a, b in zip(lo, hi))


def sequential(t: Fraction | float) -> RGB:
    """The colour of ``t`` in [0, 1] (clamped) on the sequential map, as 0..255 sRGB."""
    return _interpolate(BLUES, t)


def diverging(t: Fraction | float) -> RGB:
    """The colour of ``t`` in [0, 1] (clamped; 1/2 is zero) on the diverging map."""
    return _interpolate(PUOR, t)


def luminance(rgb: RGB) -> float:
    """WCAG relative luminance of an sRGB colour (0 black .. 1 white)."""
    def channel(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def text_colour(rgb: RGB) -> RGB:
    """Black or white, whichever contrasts more with the fill (WCAG contrast ratio)."""
    lum = luminance(rgb)
    on_black = (lum + 0.05) / 0.05
    on_white = 1.05 / (lum + 0.05)
    return (0, 0, 0) if on_black >= on_white else (255, 255, 255)


def hex_colour(rgb: RGB) -> str:
    """``#rrggbb``."""
    r, g, b = rgb
    return f"#{r:02x}{g:02x}{b:02x}"


def heat(t: Fraction | float) -> tuple[RGB, RGB]:
    """A heat-map cell at ``t`` in [0, 1] on the sequential map: (fill, text colour)."""
    fill = sequential(t)
    return fill, text_colour(fill)
