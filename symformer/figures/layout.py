"""Where the value labels of bars go, so that none overlaps another label or a bar.

A pure function of data coordinates, shared by the TikZ and matplotlib drawings (and
tested without drawing anything): each label starts just outside the end of its bar
(above a positive bar, below a negative one, never on the bar) and moves further out
until it touches no bar and no label placed before it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Box:
    """An axis-aligned rectangle in data coordinates."""

    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, other: Box) -> bool:
        """True when the interiors intersect (touching edges do not count)."""
        return (self.x0 < other.x1 and other.x0 < self.x1
                and self.y0 < other.y1 and other.y0 < self.y1)

    @property
    def centre(self) -> tuple[float, float]:
        """The middle of the box (where a centred text node goes)."""
        return (self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2


def bar_box(x: float, width: float, value: float) -> Box:
    """The rectangle of a bar centred at ``x`` from 0 to ``value``."""
    return Box(x - width / 2, min(0.0, value), x + width / 2, max(0.0, value))


def place_labels(bars: list[tuple[float, float, float]], widths: list[float],
                 height: float, gap: float) -> list[Box]:
    """The label box of every bar ``(x, width, value)``: ``widths[k]`` wide, ``height``
    tall, at least ``gap`` away from its bar's end, overlapping no bar and no other label.
    """
    obstacles = [bar_box(x, w, v) for x, w, v in bars]
    placed: list[Box] = []
    for (x, _, value), width in zip(bars, widths):
        up = value >= 0
        y = value + gap if up else value - gap - height
        while True:
            box = Box(x - width / 2, y, x + width / 2, y + height)
            hits = [o for o in obstacles + placed if box.overlaps(o)]
            if not hits:
                break
            # move past every obstacle met, outward (away from the axis)
            y = (max(o.y1 for o in hits) + gap) if up else (min(o.y0 for o in hits) - gap - height)
        placed.append(box)
    return placed


def extent(boxes: list[Box], bars: list[tuple[float, float, float]]) -> tuple[float, float]:
    """The lowest and highest y of the bars and their labels (and 0)."""
    ys = [0.0] + [v for _, _, v in bars] + [b.y0 for b in boxes] + [b.y1 for b in boxes]
    return min(ys), max(ys)


#: Width of a digit or a decimal point in em: Latin Modern (TikZ) and DejaVu Sans
#: (matplotlib), each rounded up; a minus sign is wider (:data:`MINUS_EM`).
DIGIT_EM = {"latin modern": 0.5, "dejavu sans": 0.64}
MINUS_EM = 0.84
#: Height of a line of text in em (with the room above and below it).
LINE_EM = 1.3


def text_width(text: str, em: float, font: str = "dejavu sans") -> float:
    """An upper estimate of the width of a number's text, ``em`` being 1 em in the unit
    (with a quarter em of room on either side)."""
    digit = DIGIT_EM[font]
    return (sum(MINUS_EM if ch in "-\u2212" else digit for ch in text) + 0.5) * em


def bar_labels(series: list[tuple[Fraction, ...]], texts: list[str],
               fixed_range: tuple[int, int] | None, axis_width: float, axis_height: float,
               em: float, font: str) -> tuple[list[Box], tuple[float, float]]:
    """The value labels of grouped bars (``series[s][x]``; ``texts`` series by series)
    and the y range that holds bars and labels, for an axis ``axis_width`` by
    ``axis_height`` (x from -0.5 to m - 0.5) whose text is ``em`` tall, in one unit.

    The range is never shorter than the one the label sizes assume, so drawn labels are
    at most as tall (in data units) as the boxes that were kept apart."""
    m, k = len(series[0]), len(series)
    width = 0.8 / k
    bars = [(x - 0.4 + width * (s + 0.5), width, float(v))
            for s, values in enumerate(series) for x, v in enumerate(values)]
    values = [v for _, _, v in bars]
    lo, hi = min(0.0, *values), max(0.0, *values)
    if fixed_range:
        lo, hi = min(lo, fixed_range[0]), max(hi, fixed_range[1])
    span = (hi - lo) * (1.2 if fixed_range else 1.35) or 1.0
    em_x, em_y = em * m / axis_width, em * span / axis_height
    boxes = place_labels(bars, [text_width(t, em_x, font) for t in texts], LINE_EM * em_y,
                         0.25 * em_y)
    low, high = extent(boxes, bars)
    low, high = (low - 0.04 * span if low < 0 else 0.0), high + 0.04 * span
    return boxes, (low, max(high, low + span))


#: Angles closer than this (radians) would put their labels on top of each other.
CLOSE_ANGLE = 0.45


def spread(points: tuple[tuple[Fraction, Fraction], ...]) -> bool:
    """True when the points (cos, sin) of a circle are far enough apart for a label each."""
    angles = [math.atan2(float(s), float(c)) for c, s in points]
    for k, a in enumerate(angles):
        for b in angles[:k]:
            d = abs(a - b) % (2 * math.pi)
            if min(d, 2 * math.pi - d) < CLOSE_ANGLE:
                return False
    return True
