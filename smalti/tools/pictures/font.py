"""A 3x5 pixel font for PNG text: digits, capitals and punctuation.

Lowercase letters are drawn as capitals; a character without a glyph as a block.
"""

from __future__ import annotations

from functools import cache

import numpy as np

GLYPH_WIDTH = 3
GLYPH_HEIGHT = 5
GLYPH_ADVANCE = GLYPH_WIDTH + 1

_GLYPHS: dict[str, str] = {
    " ": "... ... ... ... ...",
    "0": "### #.# #.# #.# ###",
    "1": ".#. ##. .#. .#. ###",
    "2": "### ..# ### #.. ###",
    "3": "### ..# .## ..# ###",
    "4": "#.# #.# ### ..# ..#",
    "5": "### #.. ### ..# ###",
    "6": "### #.. ### #.# ###",
    "7": "### ..# ..# .#. .#.",
    "8": "### #.# ### #.# ###",
    "9": "### #.# ### ..# ###",
    "A": ".#. #.# ### #.# #.#",
    "B": "##. #.# ##. #.# ##.",
    "C": ".## #.. #.. #.. .##",
    "D": "##. #.# #.# #.# ##.",
    "E": "### #.. ##. #.. ###",
    "F": "### #.. ##. #.. #..",
    "G": ".## #.. #.# #.# .##",
    "H": "#.# #.# ### #.# #.#",
    "I": "### .#. .#. .#. ###",
    "J": "..# ..# ..# #.# .#.",
    "K": "#.# #.# ##. #.# #.#",
    "L": "#.. #.. #.. #.. ###",
    "M": "#.# ### ### #.# #.#",
    "N": "##. #.# #.# #.# #.#",
    "O": ".#. #.# #.# #.# .#.",
    "P": "##. #.# ##. #.. #..",
    "Q": ".#. #.# #.# ##. .##",
    "R": "##. #.# ##. #.# #.#",
    "S": ".## #.. .#. ..# ##.",
    "T": "### .#. .#. .#. .#.",
    "U": "#.# #.# #.# #.# ###",
    "V": "#.# #.# #.# #.# .#.",
    "W": "#.# #.# ### ### #.#",
    "X": "#.# #.# .#. #.# #.#",
    "Y": "#.# #.# .#. .#. .#.",
    "Z": "### ..# .#. #.. ###",
    ".": "... ... ... ... .#.",
    ",": "... ... ... .#. .#.",
    ":": "... .#. ... .#. ...",
    ";": "... .#. ... .#. #..",
    "-": "... ... ### ... ...",
    "+": "... .#. ### .#. ...",
    "=": "... ### ... ### ...",
    "*": "... #.# .#. #.# ...",
    "/": "..# ..# .#. #.. #..",
    "_": "... ... ... ... ###",
    "<": "..# .#. #.. .#. ..#",
    ">": "#.. .#. ..# .#. #..",
    "[": "##. #.. #.. #.. ##.",
    "]": ".## ..# ..# ..# .##",
    "(": ".#. #.. #.. #.. .#.",
    ")": ".#. ..# ..# ..# .#.",
    "#": "#.# ### #.# ### #.#",
    "'": ".#. .#. ... ... ...",
    '"': "#.# #.# ... ... ...",
    "!": ".#. .#. .#. ... .#.",
    "?": "### ..# .#. ... .#.",
    "%": "#.# ..# .#. #.. #.#",
}
_UNKNOWN = "### ### ### ### ###"


def glyph_rows(char: str) -> tuple[str, ...]:
    """The five rows of `char`'s bitmap ('#' set), with capitals standing in for lowercase."""
    pattern = _GLYPHS.get(char) or _GLYPHS.get(char.upper()) or _UNKNOWN
    return tuple(pattern.split())


@cache
def glyph_mask(char: str, scale: int) -> np.ndarray:
    """A boolean [height, width] mask of `char`, each font pixel a `scale` x `scale` block."""
    bits = np.array([[c == "#" for c in row] for row in glyph_rows(char)], dtype=bool)
    return np.kron(bits, np.ones((scale, scale), dtype=bool)).astype(bool)
