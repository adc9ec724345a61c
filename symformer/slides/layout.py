r"""How pdflatex sets a line of the deck: a small model of TeX's mathematics layout.

The deck plans each frame's height in Python (:mod:`symformer.slides.deck`), so a
frame is filled and never overfull without running TeX.  This module sets a formula
as TeX does, to the point a frame's height needs: each character's width, height and
depth (Latin Modern at the deck's sizes, 12 pt and 10.5 pt scripts, measured with
pdflatex in the deck's preamble, :data:`METRICS`), TeX's spacing between atoms, its
rules for scripts, fractions, radicals, sums with limits, ``\left``/``\right`` and
arrays (The TeXbook, appendix G, with the fonts' parameters), and its line breaking of
a worked line (a paragraph broken where the sum of its penalties is least, then into
the fewest lines: ragged right, so every line is as good as any other).  A paragraph's
height is its lines' heights and depths joined by ``\baselineskip`` (or ``\lineskip``
where the lines are too tall for it).  The model is checked against pdflatex
(``tests/test_slides_fill.py``): almost every worked frame of the built-in deck is
planned within 4 pt of its measured height, its frames of tables within 8 pt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

#: Width, height and depth in pt of each character (or one-character command) as
#: pdflatex sets it in the deck's preamble: ``md``: maths at 12 pt, ``ms``: maths at
#: the 10.5 pt of scripts, ``r``/``rs``: upright (``\mathrm``) at those sizes,
#: ``t``/``ts``: text at 12 pt and at the tables' 10.5 pt.
METRICS: dict[str, dict[str, tuple[float, float, float]]] = {
    'md': {
        '!': (3.26, 8.38, 0.00), "'": (3.39, 10.79, 0.00), '(': (4.57, 9.00, 3.00),
        ')': (4.57, 9.00, 3.00), '*': (6.00, 5.58, 0.00), '+': (9.14, 6.92, 0.92),
        ',': (3.26, 1.17, 2.33), '-': (9.33, 7.00, 1.00), '.': (3.26, 1.17, 0.00),
        '/': (5.87, 9.00, 3.00), '0': (5.87, 7.56, 0.00), '1': (5.87, 7.56, 0.00),
        '2': (5.87, 7.56, 0.00), '3': (5.87, 7.56, 0.00), '4': (5.87, 7.56, 0.00),
        '5': (5.87, 7.56, 0.00), '6': (5.87, 7.56, 0.00), '7': (5.87, 7.56, 0.00),
        '8': (5.87, 7.56, 0.00), '9': (5.87, 7.56, 0.00), ':': (3.26, 5.17, 0.00),
        ';': (3.26, 5.17, 2.33), '<': (9.14, 6.32, 0.32), '=': (9.14, 4.52, 0.00),
        '>': (9.14, 6.32, 0.32), '?': (5.55, 8.38, 0.00), 'A': (8.81, 8.20, 0.00),
        'B': (9.53, 8.20, 0.00), 'C': (9.27, 8.20, 0.00), 'D': (10.08, 8.20, 0.00),
        'E': (9.40, 8.20, 0.00), 'F': (9.24, 8.20, 0.00), 'G': (9.27, 8.20, 0.00),
        'H': (10.66, 8.20, 0.00), 'I': (6.13, 8.20, 0.00), 'J': (7.61, 8.20, 0.00),
        'K': (10.86, 8.20, 0.00), 'L': (7.99, 8.20, 0.00), 'M': (12.62, 8.20, 0.00),
        'N': (10.66, 8.20, 0.00), 'O': (9.31, 8.20, 0.00), 'P': (9.21, 8.20, 0.00),
        'Q': (9.31, 8.20, 2.33), 'R': (9.04, 8.20, 0.00), 'S': (7.92, 8.20, 0.00),
        'T': (8.52, 8.20, 0.00), 'U': (9.23, 8.20, 0.00), 'V': (9.46, 8.20, 0.00),
        'W': (12.72, 8.20, 0.00), 'X': (10.70, 8.20, 0.00), 'Y': (9.43, 8.20, 0.00),
        'Z': (8.90, 8.20, 0.00), '[': (3.33, 9.00, 3.00), '\\Delta': (9.79, 8.38, 0.00),
        '\\Gamma': (7.34, 8.38, 0.00), '\\Lambda': (8.16, 8.38, 0.00),
        '\\Omega': (8.49, 8.38, 0.00), '\\Phi': (8.49, 8.38, 0.00),
        '\\Psi': (9.14, 8.38, 0.00), '\\Sigma': (8.49, 8.38, 0.00),
        '\\Theta': (9.14, 8.38, 0.00), '\\alpha': (7.55, 5.17, 0.00),
        '\\approx': (9.33, 5.80, 0.00), '\\beta': (7.30, 8.33, 2.33),
        '\\cdot': (3.33, 5.33, 0.00), '\\cdots': (16.00, 5.33, 0.00),
        '\\chi': (7.36, 5.17, 2.33), '\\circ': (6.00, 5.33, 0.00),
        '\\colon': (8.60, 5.17, 0.00), '\\cos': (15.73, 5.17, 0.00),
        '\\delta': (5.65, 8.33, 0.00), '\\dots': (15.79, 1.17, 0.00),
        '\\ell': (4.93, 8.33, 0.00), '\\epsilon': (4.74, 5.17, 0.00),
        '\\eta': (6.23, 5.17, 2.33), '\\exp': (17.95, 5.17, 2.33),
        '\\gamma': (6.75, 5.17, 2.33), '\\ge': (9.33, 7.63, 1.63), '\\geq': (9.33, 7.63, 1.63),
        '\\in': (8.00, 6.47, 0.47), '\\infty': (12.00, 5.17, 0.00),
        '\\lambda': (6.85, 8.33, 0.00), '\\langle': (4.67, 9.00, 3.00),
        '\\lbrace': (6.00, 9.00, 3.00), '\\ldots': (13.79, 1.17, 0.00),
        '\\le': (9.33, 7.63, 1.63), '\\leq': (9.33, 7.63, 1.63), '\\log': (15.17, 8.38, 2.33),
        '\\lvert': (3.33, 9.00, 3.00), '\\mapsto': (12.00, 4.40, 0.00),
        '\\max': (22.07, 5.17, 0.00), '\\mid': (3.33, 9.00, 3.00),
        '\\min': (19.64, 7.56, 0.00), '\\mu': (7.07, 5.17, 2.33),
        '\\nabla': (10.00, 8.20, 0.00), '\\ne': (9.14, 8.33, 2.33),
        '\\neq': (9.14, 8.33, 2.33), '\\nu': (6.56, 5.17, 0.00), '\\odot': (9.33, 7.00, 1.00),
        '\\omega': (7.75, 5.17, 0.00), '\\partial': (6.86, 8.33, 0.00),
        '\\phi': (6.95, 8.33, 2.33), '\\pi': (7.10, 5.17, 0.00), '\\pm': (9.33, 7.00, 1.00),
        '\\prime': (3.30, 6.67, 0.00), '\\prod': (12.78, 11.00, 5.00),
        '\\psi': (8.07, 8.33, 2.33), '\\rangle': (4.67, 9.00, 3.00),
        '\\rbrace': (6.00, 9.00, 3.00), '\\rho': (6.06, 5.17, 2.33),
        '\\rvert': (3.33, 9.00, 3.00), '\\sigma': (7.11, 5.17, 0.00),
        '\\sin': (14.48, 7.56, 0.00), '\\sqrt{}': (10.00, 7.57, 4.91),
        '\\sum': (14.44, 11.00, 5.00), '\\tanh': (23.56, 8.38, 0.00),
        '\\tau': (6.44, 5.17, 0.00), '\\theta': (5.80, 8.33, 0.00),
        '\\times': (9.33, 7.00, 1.00), '\\to': (12.00, 4.40, 0.00),
        '\\top': (9.33, 8.33, 0.00), '\\varepsilon': (5.50, 5.17, 0.00),
        '\\varphi': (7.70, 5.17, 2.33), '\\vdots': (3.26, 15.17, 0.00),
        '\\xi': (5.71, 8.33, 2.33), '\\zeta': (6.04, 8.33, 2.33), '\\{': (6.00, 9.00, 3.00),
        '\\|': (6.00, 9.00, 3.00), '\\}': (6.00, 9.00, 3.00), ']': (3.26, 9.00, 3.00),
        'a': (6.17, 5.17, 0.00), 'b': (5.00, 8.33, 0.00), 'c': (5.06, 5.17, 0.00),
        'd': (6.11, 8.33, 0.00), 'e': (5.45, 5.17, 0.00), 'f': (7.07, 8.33, 2.33),
        'g': (6.06, 5.17, 2.33), 'h': (6.76, 8.33, 0.00), 'i': (4.01, 7.87, 0.00),
        'j': (5.54, 7.87, 2.33), 'k': (6.51, 8.33, 0.00), 'l': (3.76, 8.33, 0.00),
        'm': (10.28, 5.17, 0.00), 'n': (7.01, 5.17, 0.00), 'o': (5.65, 5.17, 0.00),
        'p': (5.90, 5.17, 2.33), 'q': (5.64, 5.17, 2.33), 'r': (5.62, 5.17, 0.00),
        's': (5.53, 5.17, 0.00), 't': (4.24, 7.38, 0.00), 'u': (6.69, 5.17, 0.00),
        'v': (6.11, 5.17, 0.00), 'w': (8.72, 5.17, 0.00), 'x': (6.68, 5.17, 0.00),
        'y': (6.16, 5.17, 2.33), 'z': (5.99, 5.17, 0.00), '|': (3.33, 9.00, 3.00),
    },
    'ms': {
        '!': (2.92, 7.23, 0.00), "'": (3.39, 9.64, 0.00), '(': (4.08, 7.88, 2.62),
        ')': (4.08, 7.88, 2.62), '*': (5.25, 4.89, 0.00), '+': (8.17, 6.12, 0.87),
        ',': (2.92, 1.11, 2.04), '-': (8.17, 6.12, 0.88), '.': (2.92, 1.11, 0.00),
        '/': (5.25, 7.88, 2.62), '0': (5.25, 6.61, 0.00), '1': (5.25, 6.61, 0.00),
        '2': (5.25, 6.61, 0.00), '3': (5.25, 6.61, 0.00), '4': (5.25, 6.61, 0.00),
        '5': (5.25, 6.61, 0.00), '6': (5.25, 6.61, 0.00), '7': (5.25, 6.61, 0.00),
        '8': (5.25, 6.61, 0.00), '9': (5.25, 6.61, 0.00), ':': (2.92, 4.52, 0.00),
        ';': (2.92, 4.52, 2.04), '<': (8.17, 5.66, 0.41), '=': (8.17, 4.00, 0.00),
        '>': (8.17, 5.66, 0.41), '?': (4.96, 7.23, 0.00), 'A': (7.88, 7.17, 0.00),
        'B': (8.49, 7.17, 0.00), 'C': (8.26, 7.17, 0.00), 'D': (8.98, 7.17, 0.00),
        'E': (8.36, 7.17, 0.00), 'F': (8.21, 7.17, 0.00), 'G': (8.26, 7.17, 0.00),
        'H': (9.58, 7.17, 0.00), 'I': (5.44, 7.17, 0.00), 'J': (6.83, 7.17, 0.00),
        'K': (9.67, 7.17, 0.00), 'L': (7.15, 7.17, 0.00), 'M': (11.33, 7.17, 0.00),
        'N': (9.58, 7.17, 0.00), 'O': (8.30, 7.17, 0.00), 'P': (8.20, 7.17, 0.00),
        'Q': (8.30, 7.17, 2.04), 'R': (8.05, 7.17, 0.00), 'S': (7.04, 7.17, 0.00),
        'T': (7.59, 7.17, 0.00), 'U': (8.31, 7.17, 0.00), 'V': (8.46, 7.17, 0.00),
        'W': (11.38, 7.17, 0.00), 'X': (9.52, 7.17, 0.00), 'Y': (8.43, 7.17, 0.00),
        'Z': (7.92, 7.17, 0.00), '[': (2.97, 7.88, 2.62), '\\Delta': (8.75, 7.52, 0.00),
        '\\Gamma': (6.56, 7.23, 0.00), '\\Lambda': (7.29, 7.52, 0.00),
        '\\Omega': (7.58, 7.23, 0.00), '\\Phi': (7.58, 7.23, 0.00),
        '\\Psi': (8.17, 7.23, 0.00), '\\Sigma': (7.58, 7.23, 0.00),
        '\\Theta': (8.17, 7.23, 0.00), '\\alpha': (6.76, 4.52, 0.00),
        '\\approx': (8.17, 5.07, 0.00), '\\beta': (6.49, 7.29, 2.04),
        '\\cdot': (2.92, 4.67, 0.00), '\\cdots': (10.50, 4.67, 0.00),
        '\\chi': (6.57, 4.52, 2.04), '\\circ': (5.25, 4.67, 0.00),
        '\\colon': (7.58, 4.52, 0.00), '\\cos': (14.06, 4.52, 0.00),
        '\\delta': (5.06, 7.29, 0.00), '\\dots': (10.50, 1.11, 0.00),
        '\\ell': (4.38, 7.29, 0.00), '\\epsilon': (4.26, 4.52, 0.00),
        '\\eta': (5.59, 4.52, 2.04), '\\exp': (16.04, 4.52, 2.04),
        '\\gamma': (6.02, 4.52, 2.04), '\\ge': (8.17, 6.68, 1.43), '\\geq': (8.17, 6.68, 1.43),
        '\\in': (7.00, 5.66, 0.41), '\\infty': (10.50, 4.52, 0.00),
        '\\lambda': (6.13, 7.29, 0.00), '\\langle': (4.08, 7.88, 2.62),
        '\\lbrace': (5.25, 7.88, 2.62), '\\ldots': (8.75, 1.11, 0.00),
        '\\le': (8.17, 6.68, 1.43), '\\leq': (8.17, 6.68, 1.43), '\\log': (13.55, 7.23, 2.04),
        '\\lvert': (2.92, 7.88, 2.62), '\\mapsto': (10.50, 3.85, 0.00),
        '\\max': (19.71, 4.52, 0.00), '\\mid': (2.92, 7.88, 2.62),
        '\\min': (17.58, 6.61, 0.00), '\\mu': (6.33, 4.52, 2.04),
        '\\nabla': (8.75, 7.17, 0.00), '\\ne': (8.17, 7.29, 2.04), '\\neq': (8.17, 7.29, 2.04),
        '\\nu': (5.86, 4.52, 0.00), '\\odot': (8.17, 6.12, 0.88),
        '\\omega': (6.91, 4.52, 0.00), '\\partial': (6.16, 7.29, 0.00),
        '\\phi': (6.26, 7.29, 2.04), '\\pi': (6.36, 4.52, 0.00), '\\pm': (8.17, 6.12, 0.88),
        '\\prime': (2.89, 5.83, 0.00), '\\prod': (9.44, 7.63, 2.38),
        '\\psi': (7.22, 7.29, 2.04), '\\rangle': (4.08, 7.88, 2.62),
        '\\rbrace': (5.25, 7.88, 2.62), '\\rho': (5.43, 4.52, 2.04),
        '\\rvert': (2.92, 7.88, 2.62), '\\sigma': (6.38, 4.52, 0.00),
        '\\sin': (12.97, 6.61, 0.00), '\\sqrt{}': (8.75, 6.13, 4.79),
        '\\sum': (10.56, 7.63, 2.38), '\\tanh': (21.08, 7.23, 0.00),
        '\\tau': (5.78, 4.52, 0.00), '\\theta': (5.22, 7.29, 0.00),
        '\\times': (8.17, 6.12, 0.88), '\\to': (10.50, 3.85, 0.00),
        '\\top': (8.17, 7.29, 0.00), '\\varepsilon': (4.90, 4.52, 0.00),
        '\\varphi': (6.87, 4.52, 2.04), '\\vdots': (3.26, 15.17, 0.00),
        '\\xi': (5.08, 7.29, 2.04), '\\zeta': (5.37, 7.29, 2.04), '\\{': (5.25, 7.88, 2.62),
        '\\|': (5.25, 7.88, 2.62), '\\}': (5.25, 7.88, 2.62), ']': (2.92, 7.88, 2.62),
        'a': (5.55, 4.52, 0.00), 'b': (4.51, 7.29, 0.00), 'c': (4.54, 4.52, 0.00),
        'd': (5.47, 7.29, 0.00), 'e': (4.89, 4.52, 0.00), 'f': (6.27, 7.29, 2.04),
        'g': (5.38, 4.52, 2.04), 'h': (6.05, 7.29, 0.00), 'i': (3.62, 6.92, 0.00),
        'j': (4.92, 6.92, 2.04), 'k': (5.80, 7.29, 0.00), 'l': (3.34, 7.29, 0.00),
        'm': (9.22, 4.52, 0.00), 'n': (6.30, 4.52, 0.00), 'o': (5.09, 4.52, 0.00),
        'p': (5.28, 4.52, 2.04), 'q': (5.06, 4.52, 2.04), 'r': (5.03, 4.52, 0.00),
        's': (4.92, 4.52, 0.00), 't': (3.79, 6.46, 0.00), 'u': (6.01, 4.52, 0.00),
        'v': (5.47, 4.52, 0.00), 'w': (7.80, 4.52, 0.00), 'x': (6.00, 4.52, 0.00),
        'y': (5.52, 4.52, 2.04), 'z': (5.34, 4.52, 0.00), '|': (2.92, 7.88, 2.62),
    },
    'r': {
        '!': (3.26, 8.38, 0.00), "'": (3.39, 10.19, 0.00), '(': (4.57, 9.00, 3.00),
        ')': (4.57, 9.00, 3.00), '*': (6.00, 5.58, 0.00), '+': (9.14, 6.92, 0.92),
        ',': (3.26, 1.17, 2.33), '-': (9.33, 7.00, 1.00), '.': (3.26, 1.17, 0.00),
        '/': (5.87, 9.00, 3.00), '0': (5.87, 7.56, 0.00), '1': (5.87, 7.56, 0.00),
        '2': (5.87, 7.56, 0.00), '3': (5.87, 7.56, 0.00), '4': (5.87, 7.56, 0.00),
        '5': (5.87, 7.56, 0.00), '6': (5.87, 7.56, 0.00), '7': (5.87, 7.56, 0.00),
        '8': (5.87, 7.56, 0.00), '9': (5.87, 7.56, 0.00), ':': (3.26, 5.17, 0.00),
        ';': (3.26, 5.17, 2.33), '<': (9.14, 6.32, 0.32), '=': (9.14, 4.52, 0.00),
        '>': (9.14, 6.32, 0.32), '?': (5.55, 8.38, 0.00), 'A': (8.81, 8.38, 0.00),
        'B': (8.32, 8.38, 0.00), 'C': (8.49, 8.38, 0.00), 'D': (8.97, 8.38, 0.00),
        'E': (7.99, 8.38, 0.00), 'F': (7.67, 8.38, 0.00), 'G': (9.22, 8.38, 0.00),
        'H': (8.81, 8.38, 0.00), 'I': (4.24, 8.38, 0.00), 'J': (6.04, 8.38, 0.00),
        'K': (9.13, 8.38, 0.00), 'L': (7.34, 8.38, 0.00), 'M': (10.77, 8.38, 0.00),
        'N': (8.81, 8.38, 0.00), 'O': (9.14, 8.38, 0.00), 'P': (7.99, 8.38, 0.00),
        'Q': (9.14, 8.38, 2.33), 'R': (8.94, 8.38, 0.00), 'S': (6.53, 8.38, 0.00),
        'T': (8.49, 8.38, 0.00), 'U': (8.81, 8.38, 0.00), 'V': (8.91, 8.38, 0.00),
        'W': (12.19, 8.38, 0.00), 'X': (8.87, 8.38, 0.00), 'Y': (9.01, 8.38, 0.00),
        'Z': (7.18, 8.38, 0.00), '[': (3.33, 9.00, 3.00), ']': (3.26, 9.00, 3.00),
        'a': (6.02, 5.17, 0.00), 'b': (6.53, 8.38, 0.00), 'c': (5.22, 5.17, 0.00),
        'd': (6.53, 8.38, 0.00), 'e': (5.22, 5.17, 0.00), 'f': (4.44, 8.38, 0.00),
        'g': (6.03, 5.17, 2.33), 'h': (6.59, 8.38, 0.00), 'i': (3.26, 7.56, 0.00),
        'j': (3.59, 7.56, 2.33), 'k': (6.33, 8.38, 0.00), 'l': (3.31, 8.38, 0.00),
        'm': (9.85, 5.17, 0.00), 'n': (6.59, 5.17, 0.00), 'o': (5.87, 5.17, 0.00),
        'p': (6.53, 5.17, 2.33), 'q': (6.51, 5.17, 2.33), 'r': (4.57, 5.17, 0.00),
        's': (4.63, 5.17, 0.00), 't': (4.57, 7.56, 0.00), 'u': (6.59, 5.17, 0.00),
        'v': (6.31, 5.17, 0.00), 'w': (8.59, 5.17, 0.00), 'x': (6.41, 5.17, 0.00),
        'y': (6.31, 5.17, 2.33), 'z': (5.22, 5.17, 0.00), '|': (3.33, 9.00, 3.00),
    },
    'rs': {
        '!': (2.92, 7.23, 0.00), "'": (3.39, 9.64, 0.00), '(': (4.08, 7.88, 2.62),
        ')': (4.08, 7.88, 2.62), '*': (5.25, 4.89, 0.00), '+': (8.17, 6.12, 0.87),
        ',': (2.92, 1.11, 2.04), '-': (8.17, 6.12, 0.88), '.': (2.92, 1.11, 0.00),
        '/': (5.25, 7.88, 2.62), '0': (5.25, 6.61, 0.00), '1': (5.25, 6.61, 0.00),
        '2': (5.25, 6.61, 0.00), '3': (5.25, 6.61, 0.00), '4': (5.25, 6.61, 0.00),
        '5': (5.25, 6.61, 0.00), '6': (5.25, 6.61, 0.00), '7': (5.25, 6.61, 0.00),
        '8': (5.25, 6.61, 0.00), '9': (5.25, 6.61, 0.00), ':': (2.92, 4.52, 0.00),
        ';': (2.92, 4.52, 2.04), '<': (8.17, 5.66, 0.41), '=': (8.17, 4.00, 0.00),
        '>': (8.17, 5.66, 0.41), '?': (4.96, 7.23, 0.00), 'A': (7.88, 7.23, 0.00),
        'B': (7.44, 7.23, 0.00), 'C': (7.58, 7.23, 0.00), 'D': (8.02, 7.23, 0.00),
        'E': (7.15, 7.23, 0.00), 'F': (6.85, 7.23, 0.00), 'G': (8.24, 7.23, 0.00),
        'H': (7.88, 7.23, 0.00), 'I': (3.79, 7.23, 0.00), 'J': (5.40, 7.23, 0.00),
        'K': (8.17, 7.23, 0.00), 'L': (6.56, 7.23, 0.00), 'M': (9.63, 7.23, 0.00),
        'N': (7.88, 7.23, 0.00), 'O': (8.17, 7.23, 0.00), 'P': (7.15, 7.23, 0.00),
        'Q': (8.17, 7.23, 2.04), 'R': (7.98, 7.23, 0.00), 'S': (5.83, 7.23, 0.00),
        'T': (7.58, 7.23, 0.00), 'U': (7.88, 7.23, 0.00), 'V': (7.96, 7.23, 0.00),
        'W': (10.89, 7.23, 0.00), 'X': (7.91, 7.23, 0.00), 'Y': (8.04, 7.23, 0.00),
        'Z': (6.42, 7.23, 0.00), '[': (2.97, 7.88, 2.62), ']': (2.92, 7.88, 2.62),
        'a': (5.36, 4.52, 0.00), 'b': (5.83, 7.23, 0.00), 'c': (4.67, 4.52, 0.00),
        'd': (5.83, 7.23, 0.00), 'e': (4.67, 4.52, 0.00), 'f': (4.04, 7.23, 0.00),
        'g': (5.38, 4.52, 2.04), 'h': (5.91, 7.23, 0.00), 'i': (2.92, 6.61, 0.00),
        'j': (3.21, 6.61, 2.04), 'k': (5.66, 7.23, 0.00), 'l': (2.97, 7.23, 0.00),
        'm': (8.83, 4.52, 0.00), 'n': (5.91, 4.52, 0.00), 'o': (5.25, 4.52, 0.00),
        'p': (5.83, 4.52, 2.04), 'q': (5.83, 4.52, 2.04), 'r': (4.11, 4.52, 0.00),
        's': (4.14, 4.52, 0.00), 't': (4.08, 6.61, 0.00), 'u': (5.91, 4.52, 0.00),
        'v': (5.63, 4.52, 0.00), 'w': (7.67, 4.52, 0.00), 'x': (5.71, 4.52, 0.00),
        'y': (5.63, 4.52, 2.04), 'z': (4.67, 4.52, 0.00), '|': (2.92, 7.88, 2.62),
    },
    't': {
        '!': (3.26, 8.27, 0.00), "'": (3.26, 8.27, 0.00), '(': (4.57, 9.00, 3.00),
        ')': (4.57, 9.00, 3.00), '*': (5.87, 9.00, 0.00), ',': (3.26, 1.17, 2.33),
        '-': (3.92, 2.90, 0.00), '.': (3.26, 1.17, 0.00), '/': (5.87, 9.00, 3.00),
        '0': (5.87, 7.56, 0.00), '1': (5.87, 7.56, 0.00), '2': (5.87, 7.56, 0.00),
        '3': (5.87, 7.56, 0.00), '4': (5.87, 7.56, 0.00), '5': (5.87, 7.56, 0.00),
        '6': (5.87, 7.56, 0.00), '7': (5.87, 7.56, 0.00), '8': (5.87, 7.56, 0.00),
        '9': (5.87, 7.56, 0.00), ':': (3.26, 5.17, 0.00), ';': (3.26, 5.17, 2.33),
        '?': (5.55, 8.27, 0.00), 'A': (8.81, 8.27, 0.00), 'B': (8.32, 8.27, 0.00),
        'C': (8.49, 8.27, 0.00), 'D': (8.97, 8.27, 0.00), 'E': (7.99, 8.27, 0.00),
        'F': (7.67, 8.27, 0.00), 'G': (9.22, 8.27, 0.00), 'H': (8.81, 8.27, 0.00),
        'I': (4.24, 8.27, 0.00), 'J': (6.04, 8.27, 0.00), 'K': (9.13, 8.27, 0.00),
        'L': (7.34, 8.27, 0.00), 'M': (10.77, 8.27, 0.00), 'N': (8.81, 8.27, 0.00),
        'O': (9.14, 8.27, 0.00), 'P': (7.99, 8.27, 0.00), 'Q': (9.14, 8.27, 2.33),
        'R': (8.65, 8.27, 0.00), 'S': (6.53, 8.27, 0.00), 'T': (8.49, 8.27, 0.00),
        'U': (8.81, 8.27, 0.00), 'V': (8.81, 8.27, 0.00), 'W': (12.07, 8.27, 0.00),
        'X': (8.81, 8.27, 0.00), 'Y': (8.81, 8.27, 0.00), 'Z': (7.18, 8.27, 0.00),
        '[': (3.26, 9.00, 3.00), '\\ ': (3.92, 0.00, 0.00), '\\&': (9.14, 8.27, 0.00),
        ']': (3.26, 9.00, 3.00), 'a': (5.87, 5.17, 0.00), 'b': (6.53, 8.27, 0.00),
        'c': (5.22, 5.17, 0.00), 'd': (6.53, 8.27, 0.00), 'e': (5.22, 5.17, 0.00),
        'f': (3.59, 8.27, 0.00), 'g': (5.87, 5.17, 2.33), 'h': (6.53, 8.27, 0.00),
        'i': (3.26, 7.56, 0.00), 'j': (3.59, 7.56, 2.33), 'k': (6.20, 8.27, 0.00),
        'l': (3.26, 8.27, 0.00), 'm': (9.79, 5.17, 0.00), 'n': (6.53, 5.17, 0.00),
        'o': (5.87, 5.17, 0.00), 'p': (6.53, 5.17, 2.33), 'q': (6.20, 5.17, 2.33),
        'r': (4.57, 5.17, 0.00), 's': (4.63, 5.17, 0.00), 't': (4.57, 7.56, 0.00),
        'u': (6.53, 5.17, 0.00), 'v': (6.20, 5.17, 0.00), 'w': (8.49, 5.17, 0.00),
        'x': (6.20, 5.17, 0.00), 'y': (6.20, 5.17, 2.33), 'z': (5.22, 5.17, 0.00),
        '|': (3.33, 9.00, 3.00), '’': (3.26, 8.27, 0.00),
    },
    'ts': {
        '!': (2.92, 7.23, 0.00), "'": (2.92, 7.23, 0.00), '(': (4.08, 7.88, 2.62),
        ')': (4.08, 7.88, 2.62), '*': (5.25, 7.88, 0.00), ',': (2.92, 1.11, 2.04),
        '-': (3.50, 2.54, 0.00), '.': (2.92, 1.11, 0.00), '/': (5.25, 7.88, 2.62),
        '0': (5.25, 6.61, 0.00), '1': (5.25, 6.61, 0.00), '2': (5.25, 6.61, 0.00),
        '3': (5.25, 6.61, 0.00), '4': (5.25, 6.61, 0.00), '5': (5.25, 6.61, 0.00),
        '6': (5.25, 6.61, 0.00), '7': (5.25, 6.61, 0.00), '8': (5.25, 6.61, 0.00),
        '9': (5.25, 6.61, 0.00), ':': (2.92, 4.52, 0.00), ';': (2.92, 4.52, 2.04),
        '?': (4.96, 7.23, 0.00), 'A': (7.88, 7.23, 0.00), 'B': (7.44, 7.23, 0.00),
        'C': (7.58, 7.23, 0.00), 'D': (8.02, 7.23, 0.00), 'E': (7.15, 7.23, 0.00),
        'F': (6.85, 7.23, 0.00), 'G': (8.24, 7.23, 0.00), 'H': (7.88, 7.23, 0.00),
        'I': (3.79, 7.23, 0.00), 'J': (5.40, 7.23, 0.00), 'K': (8.17, 7.23, 0.00),
        'L': (6.56, 7.23, 0.00), 'M': (9.63, 7.23, 0.00), 'N': (7.88, 7.23, 0.00),
        'O': (8.17, 7.23, 0.00), 'P': (7.15, 7.23, 0.00), 'Q': (8.17, 7.23, 2.04),
        'R': (7.73, 7.23, 0.00), 'S': (5.83, 7.23, 0.00), 'T': (7.58, 7.23, 0.00),
        'U': (7.88, 7.23, 0.00), 'V': (7.88, 7.23, 0.00), 'W': (10.79, 7.23, 0.00),
        'X': (7.88, 7.23, 0.00), 'Y': (7.88, 7.23, 0.00), 'Z': (6.42, 7.23, 0.00),
        '[': (2.92, 7.88, 2.62), '\\ ': (3.50, 0.00, 0.00), '\\&': (8.17, 7.23, 0.00),
        ']': (2.92, 7.88, 2.62), 'a': (5.25, 4.52, 0.00), 'b': (5.83, 7.23, 0.00),
        'c': (4.67, 4.52, 0.00), 'd': (5.83, 7.23, 0.00), 'e': (4.67, 4.52, 0.00),
        'f': (3.21, 7.23, 0.00), 'g': (5.25, 4.52, 2.04), 'h': (5.83, 7.23, 0.00),
        'i': (2.92, 6.61, 0.00), 'j': (3.21, 6.61, 2.04), 'k': (5.54, 7.23, 0.00),
        'l': (2.92, 7.23, 0.00), 'm': (8.75, 4.52, 0.00), 'n': (5.83, 4.52, 0.00),
        'o': (5.25, 4.52, 0.00), 'p': (5.83, 4.52, 2.04), 'q': (5.54, 4.52, 2.04),
        'r': (4.11, 4.52, 0.00), 's': (4.14, 4.52, 0.00), 't': (4.08, 6.61, 0.00),
        'u': (5.83, 4.52, 0.00), 'v': (5.54, 4.52, 0.00), 'w': (7.58, 4.52, 0.00),
        'x': (5.54, 4.52, 0.00), 'y': (5.54, 4.52, 2.04), 'z': (4.67, 4.52, 0.00),
        '|': (2.92, 7.88, 2.62), '’': (2.92, 7.23, 0.00),
    },
}

#: The fonts' parameters (pt, ``\fontdimen`` of the maths fonts at 12 pt; ``_S``: at
#: 10.5 pt): numerator and denominator shifts, superscript and subscript shifts, the
#: axis, the rule, the big operators' spacing, the x-height.
NUM1, NUM2, DENOM1, DENOM2 = 8.12, 4.72, 8.23, 4.14
SUP1, SUP2, SUP3, SUB1, SUB2 = 4.95, 4.35, 3.47, 1.80, 2.97
SUP1_S, SUP2_S, SUP3_S, SUB1_S, SUB2_S = 4.34, 3.81, 3.03, 1.57, 2.60
SUP_DROP, SUB_DROP = 4.05, 0.53
AXIS, RULE, XHEIGHT, XHEIGHT_S = 3.0, 0.4, 5.17, 4.52
BOS1, BOS2, BOS3, BOS4, BOS5 = 1.11, 1.67, 2.0, 6.0, 1.0
SCRIPT_SPACE, NULL_DELIMITER = 0.5, 1.2
#: Sizes (height + depth, pt) of the parentheses and braces TeX can choose, with their
#: widths; beyond the last, an extensible one of that width.
DELIMITERS = ((12.0, 4.57), (18.0, 5.97), (24.0, 7.36), (30.0, 8.75), (36.0, 8.75))
#: The height of the smallest radical sign (the thickness of the rule over its body).
RADICAL_TOP = 0.48
#: The deck's text: ``\baselineskip``, ``\lineskip``, ``\parskip`` (pt), the struts of
#: an array's rows, its column separation, the text width (pt) and an em (pt).
BASELINE, LINESKIP, PARSKIP = 16.67, 1.0, 5.87
STRUT_H, STRUT_D, ARRAYCOLSEP = 11.67, 5.0, 5.0
TEXT_WIDTH, EM = 398.34, 12.0
MU = EM / 18
#: The penalties TeX's line breaker pays for a break after a binary operator or a
#: relation, and (squared) per line: its demerits.
BIN_PENALTY, REL_PENALTY, LINE_DEMERITS = 700, 500, 100

_TOKEN = re.compile(r"\\[A-Za-z]+\*?|\\.|[{}_^&]|\s+|.", re.S)
_REL = {"=", "<", ">", r"\approx", r"\le", r"\leq", r"\ge", r"\geq", r"\to", r"\mapsto",
        r"\ne", r"\neq", r"\in", ":"}
_BIN = {"+", "-", r"\cdot", r"\times", r"\odot", r"\pm", r"\circ"}
_OPEN = {"(", "[", r"\langle", r"\{", r"\lbrace", r"\lvert"}
_CLOSE = {")", "]", r"\rangle", r"\}", r"\rbrace", r"\rvert"}
_PUNCT = {",", ";", r"\colon"}
_NAMED = {r"\exp", r"\sin", r"\cos", r"\tanh", r"\log", r"\ln", r"\max", r"\min",
          r"\sup", r"\inf", r"\det", r"\arg"}
_LIMITS = {r"\sum", r"\prod", r"\max", r"\min", r"\sup", r"\inf"}
_SPACES = {r"\quad": EM, r"\qquad": 2 * EM, r"\,": 3 * MU, r"\;": 5 * MU, r"\:": 4 * MU,
           r"\!": -3 * MU, r"\ ": 3.92, "~": 3.92, r"\enspace": EM / 2}
_UPRIGHT = {r"\mathrm", r"\operatorname", r"\text", r"\textrm", r"\mathrm*"}
_IGNORED = {r"\displaystyle", r"\textstyle", r"\nobreak", r"\allowbreak", r"\limits",
            r"\nolimits", r"\mathbf", r"\boldsymbol", r"\mathit", r"\mathnormal",
            r"\scriptstyle", r"\phantom", r"\hphantom", r"\vphantom", r"\strut",
            r"\mathbin", r"\mathrel", r"\mathord", r"\mathop", r"\mathinner"}
#: TeX's spacing between atoms (The TeXbook, chapter 18): thin (1), medium (2) and
#: thick (3) spaces, the latter two (negative here) only outside scripts.
_KINDS = "ord op bin rel open close punct inner".split()
_TABLE = ["0 1 -2 -3 0 0 0 1", "1 1 0 -3 0 0 0 1", "-2 -2 0 0 -2 0 0 -2",
          "-3 -3 0 0 -3 0 0 -3", "0 0 0 0 0 0 0 0", "0 1 -2 -3 0 0 0 1",
          "-1 -1 0 -1 -1 -1 -1 -1", "-1 1 -2 -3 -1 0 -1 -1"]
_SPACING = {(a, b): int(v) for a, row in zip(_KINDS, _TABLE)
            for b, v in zip(_KINDS, row.split())}


@dataclass(frozen=True)
class Box:
    """A set piece: width, height above the baseline, depth below it (pt)."""

    w: float
    h: float
    d: float


@dataclass(frozen=True)
class Atom:
    """One atom of a formula's top level: its kind (TeX's ord, bin, rel, ...), its box,
    and whether a line may break after it (bin and rel atoms, unless ``\\nobreak``)."""

    kind: str
    box: Box
    breakable: bool = True


@dataclass(frozen=True)
class _Style:
    script: bool = False  # set at the 10.5 pt of scripts
    display: bool = True  # display style (limits under sums, large fractions)
    cramped: bool = False  # superscripts set lower (denominators, radicals, subscripts)

    def sub(self) -> _Style:
        return _Style(True, False, True)

    def sup(self) -> _Style:
        return _Style(True, False, self.cramped)

    def fraction(self, denominator: bool) -> _Style:
        if self.display:
            return _Style(False, False, self.cramped or denominator)
        return _Style(True, False, self.cramped or denominator)

    def crampled(self) -> _Style:
        return _Style(self.script, self.display, True)


def _char(t: str, style: _Style, upright: bool = False) -> Box:
    table = ("rs" if style.script else "r") if upright else ("ms" if style.script else "md")
    metric = METRICS[table].get(t) or METRICS["ms" if style.script else "md"].get(t)
    if metric is None:
        size = 10.5 if style.script else EM
        return Box(0.55 * size, 0.7 * size, 0.0)
    return Box(*metric)


class _Parser:
    """A formula's tokens read as TeX reads them, into atoms and boxes."""

    def __init__(self, latex: str) -> None:
        # a space is kept (one token) for text; maths skips it
        self.tokens = [" " if t.isspace() else t for t in _TOKEN.findall(latex)]
        self.k = 0

    def peek(self) -> str | None:
        return self.tokens[self.k] if self.k < len(self.tokens) else None

    def take(self) -> str | None:
        t = self.peek()
        self.k += 1
        return t

    def atoms(self, style: _Style, stop: tuple[str, ...] = ("}",)) -> list[Atom]:
        """Atoms up to one of ``stop`` (consumed when it is a closing brace)."""
        out: list[Atom] = []
        while (t := self.peek()) is not None:
            if t == " ":
                self.k += 1
                continue
            if t in stop:
                if t == "}":
                    self.k += 1
                return out
            if t in ("^", "_", "'"):
                base = out.pop() if out else Atom("ord", Box(0.0, 0.0, 0.0))
                out.append(self.scripts(base, style))
                continue
            if t == r"\nobreak":
                self.k += 1
                if out:
                    out[-1] = Atom(out[-1].kind, out[-1].box, False)
                continue
            if t == r"\displaystyle":
                self.k += 1
                style = _Style(style.script, True, style.cramped)
                continue
            if t == r"\textstyle":
                self.k += 1
                style = _Style(style.script, False, style.cramped)
                continue
            atom = self.atom(style)
            if atom is not None:
                out.append(atom)
        return out

    def group(self, style: _Style) -> Box:
        """One argument: a braced group or a single token, as one box."""
        while self.peek() == " ":
            self.k += 1
        if self.peek() == "{":
            self.k += 1
            return hlist(self.atoms(style), style)
        atom = self.atom(style)
        return atom.box if atom is not None else Box(0.0, 0.0, 0.0)

    def text(self, style: _Style) -> Box:
        """A ``\\text{...}`` or ``\\mathrm{...}`` argument: upright letters."""
        while self.peek() == " ":
            self.k += 1
        if self.peek() != "{":
            t = self.take() or ""
            return _char(t, style, True)
        self.k += 1
        w = h = d = 0.0
        depth = 1
        while (t := self.take()) is not None:
            if t == "{":
                depth += 1
                continue
            if t == "}":
                depth -= 1
                if depth == 0:
                    break
                continue
            if t in ("^", "_"):
                b = self.group(style.sub())
                w, h = w + b.w, max(h, b.h + SUP2)
                continue
            if t in _SPACES:
                w += _SPACES[t]
                continue
            if t == " ":
                w += _SPACES[r"\ "] * (0.875 if style.script else 1.0)
                continue
            b = _char(t, style, True)
            w, h, d = w + b.w, max(h, b.h), max(d, b.d)
        return Box(w, h, d)

    def atom(self, style: _Style) -> Atom | None:
        t = self.take()
        if t is None:
            return None
        if t == "{":
            return Atom("ord", hlist(self.atoms(style), style))
        if t in _SPACES:
            return Atom("space", Box(_SPACES[t] * (0.875 if style.script else 1.0), 0, 0))
        if t in _IGNORED:
            if t in (r"\mathbf", r"\boldsymbol", r"\mathit", r"\mathnormal"):
                return Atom("ord", self.group(style))
            if t in (r"\phantom", r"\hphantom"):
                box = self.group(style)
                return Atom("ord", box if t == r"\phantom" else Box(box.w, 0, 0))
            if t == r"\mathbin":
                return Atom("bin", self.group(style))
            if t == r"\mathrel":
                return Atom("rel", self.group(style))
            return None
        if t == r"\mathopen":
            return Atom("open", self.group(style))
        if t == r"\mathclose":
            return Atom("close", self.group(style))
        if t in _UPRIGHT:
            box = self.text(style)
            return Atom("op" if t == r"\operatorname" else "ord", box)
        if t == r"\frac":
            return Atom("inner", self.fraction(style))
        if t == r"\sqrt":
            return Atom("ord", self.radical(style))
        if t in (r"\tilde", r"\hat", r"\bar", r"\overline", r"\widetilde", r"\widehat",
                 r"\vec", r"\dot"):
            box = self.group(style.crampled())
            lift = 3.22 if t in (r"\hat", r"\widehat", r"\vec") else 2.39
            return Atom("ord", Box(box.w, max(box.h, XHEIGHT) + lift, box.d))
        if t == r"\left":
            return Atom("inner", self.fenced(style))
        if t in (r"\right",):
            self.take()
            return None
        if re.fullmatch(r"\\[Bb]igg?[lr]?", t):
            delimiter = self.take() or ""
            size = {r"\big": 18.0, r"\Big": 24.0, r"\bigg": 30.0, r"\Bigg": 36.0}[
                t.rstrip("lr") if t[-1] in "lr" else t]
            kind = "open" if t.endswith("l") else "close" if t.endswith("r") else "ord"
            if delimiter in (".",):
                return Atom(kind, Box(NULL_DELIMITER, 0, 0))
            return Atom(kind, _delimiter(size))
        if t == r"\begin":
            name = self.text(style)  # the environment's name, read and dropped
            del name
            return Atom("inner", self.array(style))
        if t == r"\end":
            self.text(style)
            return None
        if t in _NAMED:
            word = t[1:]
            box = Box(*(sum(_char(c, style, True).w for c in word),
                        max(_char(c, style, True).h for c in word),
                        max(_char(c, style, True).d for c in word)))
            return Atom("op", box)
        if t in (r"\sum", r"\prod"):
            if style.display:
                return Atom("op", Box(14.44, 11.0, 5.0))
            return Atom("op", Box(10.56, 8.0, 2.0) if not style.script else _char(t, style))
        kind = ("rel" if t in _REL else "bin" if t in _BIN else "open" if t in _OPEN
                else "close" if t in _CLOSE else "punct" if t in _PUNCT else "ord")
        return Atom(kind, _char(t, style))

    def scripts(self, base: Atom, style: _Style) -> Atom:
        """The base with its superscript and subscript (either order, a prime first)."""
        sup: list[Box] = []
        sub: Box | None = None
        while (t := self.peek()) in ("^", "_", "'"):
            self.k += 1
            if t == "'":
                sup.append(_char(r"\prime", style.sup()))
            elif t == "^":
                sup.append(self.group(style.sup()))
            else:
                sub = self.group(style.sub())
        up = Box(sum(b.w for b in sup), max((b.h for b in sup), default=0.0),
                 max((b.d for b in sup), default=0.0)) if sup else None
        limits = base.kind == "op" and style.display and self._had_limits(base)
        if limits:
            return Atom("op", _limits(base.box, up, sub))
        return Atom(base.kind if base.kind != "op" else "op",
                    _attach(base.box, up, sub, style, base.kind == "ord" and
                            base.box.h <= 9.0 and base.box.w < 13.0))

    def _had_limits(self, base: Atom) -> bool:
        # a big operator or a named one that takes limits in display style
        k = self.k
        while k > 0:
            k -= 1
            if self.tokens[k] in _LIMITS:
                return True
            if self.tokens[k] not in ("^", "_", "'", "{", "}") and not self.tokens[k].isalnum():
                break
        return base.box.h >= 10.9 and base.box.w >= 14.0

    def fraction(self, style: _Style) -> Box:
        num = self.group(style.fraction(False))
        den = self.group(style.fraction(True))
        if style.display:
            u, v, clear = NUM1, DENOM1, 3 * RULE
        else:
            u, v, clear = NUM2, DENOM2, RULE
        if (u - num.d) - (AXIS + RULE / 2) < clear:
            u += clear - ((u - num.d) - (AXIS + RULE / 2))
        if (AXIS - RULE / 2) - (den.h - v) < clear:
            v += clear - ((AXIS - RULE / 2) - (den.h - v))
        return Box(max(num.w, den.w) + 2 * NULL_DELIMITER, u + num.h, v + den.d)

    def radical(self, style: _Style) -> Box:
        """TeX's rule 11: the radical sign as tall as the body and its clearance, the
        rule over the body (a kern and the rule, each as thick as the sign's top)."""
        if self.peek() == "[":  # an index: read and dropped
            while self.take() not in ("]", None):
                pass
        body = self.group(style.crampled())
        clear = RULE + (XHEIGHT / 4 if style.display else RULE / 4)
        need = body.h + body.d + clear + RULE
        size = next((s for s, _ in DELIMITERS if s >= need), need)
        top = RADICAL_TOP if size == DELIMITERS[0][0] else RULE
        below = size - top
        if below > body.h + body.d + clear:
            clear += (below - body.h - body.d - clear) / 2
        return Box(body.w + 10.0, body.h + clear + 2 * top,
                   max(body.d, below - body.h - clear))

    def fenced(self, style: _Style) -> Box:
        self.take()  # the left delimiter
        inner = hlist(self.atoms(style, stop=(r"\right",)), style)
        if self.peek() == r"\right":
            self.k += 1
            closing = self.take()
        else:
            closing = "."
        delta = max(inner.h - AXIS, inner.d + AXIS)
        need = max(2 * delta * 0.901, 2 * delta - 5.0)
        left = _delimiter(need)
        right = Box(NULL_DELIMITER, 0, 0) if closing == "." else left
        return Box(left.w + inner.w + right.w, max(inner.h, left.h), max(inner.d, left.d))

    def array(self, style: _Style) -> Box:
        """An ``array`` (after its column specification): rows of text-style cells."""
        if self.peek() == "{":  # the column specification
            spec = self.text(style)
            del spec
        cell_style = _Style(style.script, False, style.cramped)
        rows: list[list[Box]] = [[]]
        while self.peek() is not None and self.peek() != r"\end":
            cell = hlist(self.atoms(cell_style, stop=("&", r"\\", r"\end")), cell_style)
            rows[-1].append(cell)
            t = self.peek()
            if t == "&":
                self.k += 1
            elif t == r"\\":
                self.k += 1
                rows.append([])
        if rows and not rows[-1]:
            rows.pop()
        columns = max((len(r) for r in rows), default=0)
        widths = [max((r[j].w for r in rows if j < len(r)), default=0.0)
                  for j in range(columns)]
        total = sum(max(STRUT_H, max((c.h for c in r), default=0.0))
                    + max(STRUT_D, max((c.d for c in r), default=0.0)) for r in rows)
        if self.peek() == r"\end":
            self.k += 1
            self.text(style)
        return Box(sum(widths) + 2 * ARRAYCOLSEP * columns, total / 2 + AXIS,
                   total / 2 - AXIS)


def _delimiter(need: float) -> Box:
    size, w = next(((s, w) for s, w in DELIMITERS if s >= need),
                   (need, DELIMITERS[-1][1]))
    return Box(w, AXIS + size / 2, size / 2 - AXIS)


def _attach(base: Box, sup: Box | None, sub: Box | None, style: _Style,
            char: bool) -> Box:
    """TeX's rule 18: a superscript and a subscript set after ``base``."""
    if char:
        u = v = 0.0
    else:
        u, v = base.h - SUP_DROP, base.d + SUB_DROP
    sup1, sup2, sup3 = (SUP1_S, SUP2_S, SUP3_S) if style.script else (SUP1, SUP2, SUP3)
    sub1, sub2 = (SUB1_S, SUB2_S) if style.script else (SUB1, SUB2)
    xh = XHEIGHT_S if style.script else XHEIGHT
    if sup is None and sub is not None:
        v = max(v, sub1, sub.h - 0.8 * xh)
        return Box(base.w + sub.w + SCRIPT_SPACE, max(base.h, sub.h - v), max(base.d, v + sub.d))
    if sup is None:
        return base
    shift = sup3 if style.cramped else sup1 if style.display and not style.script else sup2
    u = max(u, shift, sup.d + xh / 4)
    w = base.w + SCRIPT_SPACE
    if sub is None:
        return Box(w + sup.w, max(base.h, u + sup.h), max(base.d, sup.d - u))
    v = max(v, sub2)
    if (u - sup.d) - (sub.h - v) < 4 * RULE:
        v = 4 * RULE - (u - sup.d) + sub.h
        psi = 0.8 * xh - (u - sup.d)
        if psi > 0:
            u += psi
            v -= psi
    return Box(w + max(sup.w, sub.w), max(base.h, u + sup.h), max(base.d, v + sub.d))


def _limits(op: Box, sup: Box | None, sub: Box | None) -> Box:
    """A big operator's limits above and below it (display style)."""
    h, d, w = op.h, op.d, op.w
    if sup is not None:
        h += max(BOS1, BOS3 - sup.d) + sup.d + sup.h + BOS5
        w = max(w, sup.w)
    if sub is not None:
        d += max(BOS2, BOS4 - sub.h) + sub.h + sub.d + BOS5
        w = max(w, sub.w)
    return Box(w, h, d)


def _space(a: str, b: str, style: _Style) -> float:
    code = _SPACING.get((a, b), 0)
    if code < 0 and style.script:
        return 0.0
    return {0: 0.0, 1: 3 * MU, 2: 4 * MU, 3: 5 * MU}[abs(code)]


def classify(atoms: list[Atom]) -> list[Atom]:
    """TeX's rule: a binary operator with nothing it could operate on before or after
    it (at the start, after an operator, a relation, an opening or punctuation; before
    a relation, a closing or punctuation) is an ordinary symbol."""
    out: list[Atom] = []
    real = [a for a in atoms if a.kind != "space"]
    for k, a in enumerate(real):
        kind = a.kind
        if kind == "bin":
            before = out[-1].kind if out else None
            after = real[k + 1].kind if k + 1 < len(real) else None
            if before in (None, "bin", "op", "rel", "open", "punct") or after in (
                    "rel", "close", "punct", None):
                kind = "ord"
        out.append(Atom(kind, a.box, a.breakable))
    # put the spaces back where they were
    merged, j = [], 0
    for a in atoms:
        if a.kind == "space":
            merged.append(a)
        else:
            merged.append(out[j])
            j += 1
    return merged


def spaced(atoms: list[Atom], style: _Style) -> list[tuple[Atom, float]]:
    """The atoms, each with the space TeX sets before it."""
    out, previous = [], None
    for a in classify(atoms):
        if a.kind == "space":
            out.append((a, 0.0))
            continue
        gap = _space(previous, a.kind, style) if previous else 0.0
        out.append((a, gap))
        previous = a.kind
    return out


def hlist(atoms: list[Atom], style: _Style) -> Box:
    """A list of atoms set on one line, as one box."""
    w = h = d = 0.0
    for a, gap in spaced(atoms, style):
        w += gap + a.box.w
        h, d = max(h, a.box.h), max(d, a.box.d)
    return Box(w, h, d)


@lru_cache(maxsize=100_000)
def box(latex: str, display: bool = True) -> Box:
    """``latex`` (maths) set on one line in display style (or text style), as one box."""
    style = _Style(False, display, False)
    return hlist(_Parser(latex).atoms(style, stop=()), style)


@lru_cache(maxsize=100_000)
def pieces_atoms(latex: str) -> tuple[tuple[Atom, float], ...]:
    """A formula's top-level atoms in display style, each with the space before it: the
    places a line may break (after a binary operator or a relation) are between them."""
    style = _Style(False, True, False)
    return tuple(spaced(_Parser(latex).atoms(style, stop=()), style))


def text_box(text: str, table: str = "t") -> Box:
    """Plain text (no commands) set in the deck's text font (``ts``: the tables')."""
    w = h = d = 0.0
    for c in text:
        metric = METRICS[table].get(c if c != " " else r"\ ")
        if metric is None:
            metric = (0.5 * EM, 0.7 * EM, 0.0)
        w, h, d = w + metric[0], max(h, metric[1]), max(d, metric[2])
    return Box(w, h, d)


@dataclass(frozen=True)
class Line:
    """One line of a paragraph as TeX breaks it: its height and depth (pt)."""

    h: float
    d: float


def paragraph(first: Box, parts: tuple[tuple[str, str], ...], room: float,
              hang: float) -> tuple[Line, ...]:
    """The lines of a paragraph that starts with the box ``first`` (a worked line's
    left-hand side, as wide as the frame's widest) and goes on with ``parts``:
    ``("math", latex)`` formulas and ``("text", words)``, a line break allowed between
    parts (``\\allowbreak``), after a formula's binary operators and relations, and at
    the words' spaces; every line but the first indented by ``hang`` (pt), all in a
    column ``room`` pt wide.  Broken as TeX breaks a ragged-right paragraph: the least
    sum of squared penalties, then the fewest lines."""
    items: list[tuple[float, float, Box, int | None]] = []  # (gap, width, box, penalty after)
    items.append((0.0, first.w, first, None))
    for kind, content in parts:
        if items:
            items[-1] = (*items[-1][:3], 0)  # \allowbreak between parts
        if kind == "text":
            words = content.split(" ")
            for k, word in enumerate(words):
                b = text_box(word)
                items.append((text_box(" ").w if k else 0.0, b.w, b, 0))
            continue
        atoms = pieces_atoms(content)
        real = [k for k, (a, _) in enumerate(atoms) if a.kind != "space"]
        last = real[-1] if real else -1
        for k, (a, gap) in enumerate(atoms):
            penalty = None
            if k != last and a.breakable and a.kind in ("bin", "rel"):
                penalty = BIN_PENALTY if a.kind == "bin" else REL_PENALTY
            items.append((gap, a.box.w, a.box, penalty))
    items[-1] = (*items[-1][:3], None)
    n = len(items)
    # best[k]: (penalties, lines, previous break) for a break after item k-1
    best: list[tuple[float, int, int] | None] = [None] * (n + 1)
    best[0] = (0.0, 0, -1)
    for k in range(n):
        if best[k] is None:
            continue
        width = hang if k else 0.0
        limit = room
        for j in range(k, n):
            gap, w, _, penalty = items[j]
            width += (gap if j > k else 0.0) + w
            if width > limit + 0.01 and j > k:
                break
            if j == n - 1 or penalty is not None:
                cost = best[k][0] + (0 if j == n - 1 else penalty ** 2) + LINE_DEMERITS
                candidate = (cost, best[k][1] + 1, k)
                if best[j + 1] is None or candidate[:2] < best[j + 1][:2]:
                    best[j + 1] = candidate
    if best[n] is None:  # some piece wider than the column: one line, overfull
        return (Line(max(b.h for _, _, b, _ in items), max(b.d for _, _, b, _ in items)),)
    starts, k = [], n
    while k > 0:
        start = best[k][2]
        starts.append((start, k))
        k = start
    out = []
    for a, b in reversed(starts):
        boxes = [items[j][2] for j in range(a, b)]
        out.append(Line(max(x.h for x in boxes), max(x.d for x in boxes)))
    return tuple(out)


def stacked(lines: tuple[Line, ...], previous: float | None) -> tuple[float, float]:
    """The height (pt) lines take under a line of depth ``previous`` (None: at the top
    of the frame's body), joined by ``\\baselineskip`` or, where too tall for it,
    ``\\lineskip``; and the last line's depth."""
    total, depth = 0.0, previous
    for line in lines:
        if depth is not None:
            glue = BASELINE - depth - line.h
            total += glue if glue >= 0 else LINESKIP
        total += line.h + line.d
        depth = line.d
    return total, depth if depth is not None else 0.0
