"""The set of threads an instruction executes for."""

from __future__ import annotations

from functools import lru_cache

import numpy as np


class Lanes:
    """Active threads as a mask over the launch; `index` is None when every thread is active."""

    __slots__ = ("index", "mask")

    def __init__(self, mask: np.ndarray, everyone: bool | None = None) -> None:
        self.mask = mask
        if everyone is None:
            everyone = bool(mask.all())
        self.index: np.ndarray | None = None if everyone else np.flatnonzero(mask)

    @property
    def count(self) -> int:
        """How many threads are active."""
        return self.mask.size if self.index is None else int(self.index.size)

    def narrowed(self, keep: np.ndarray) -> Lanes:
        """The subset of these lanes where `keep` (a full-launch bool array) holds."""
        mask = self.mask & keep
        return Lanes(mask, everyone=self.index is None and bool(keep.all()))

    def first(self, where: np.ndarray | None = None) -> int:
        """The launch-wide id of the first active thread (among `where`, compressed)."""
        ids = np.arange(self.mask.size) if self.index is None else self.index
        if where is not None:
            ids = ids[where]
        return int(ids[0])


@lru_cache(maxsize=4)
def _everyone(count: int) -> np.ndarray:
    ids = np.arange(count)
    ids.flags.writeable = False
    return ids


def thread_ids(lanes: Lanes) -> np.ndarray:
    """Launch-wide ids of the active lanes (read-only)."""
    return _everyone(lanes.mask.size) if lanes.index is None else lanes.index
