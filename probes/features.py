"""Site features read one site at a time: what keeps a probe sweep's host memory flat in the number of sites.

A probe dataset's features (:class:`SiteFeatures`) are a mapping ``site -> float32 [n, d]`` that reads a
site from the activation cache when asked and keeps only the last one read; the probe code takes them as a
:class:`SiteSequence` (the sites in order, each made when indexed), so the solvers see one site (the torch
solver: one group of sites, on its device) at a time. At FairStress scale (50k items x 49 sites x 3,840
dims) a dataset that loaded every site held about 38 GB of float32 on the host before any fit; streamed, it
holds one site's matrix (768 MB). Ours: the file format and the join are EvenHand's (nothing to reuse).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np


class SiteFeatures(Mapping):
    """``site -> float32 [rows, d]`` for ``item_ids`` (in that order), read from ``cache``
    (:class:`evenhand.running.activations.ActivationCache`) when indexed. The last site read is kept (asked
    twice in a row, it is read once); it is let go before the next site is read, so at most one matrix
    of this mapping is alive at a time (plus what a caller holds)."""

    def __init__(self, cache, item_ids: list[str], sites: Sequence[str]):
        self.cache, self.item_ids, self._sites = cache, list(item_ids), list(sites)
        self._last: tuple[str, np.ndarray] | None = None

    def __getitem__(self, site: str) -> np.ndarray:
        if site not in self._sites:
            raise KeyError(site)
        if self._last is not None and self._last[0] == site:
            return self._last[1]
        self._last = None                                   # let the previous site go before reading
        mat = self.cache.load(site, self.item_ids)[1]
        self._last = (site, mat)
        return mat

    def __iter__(self) -> Iterator[str]:
        return iter(self._sites)

    def __len__(self) -> int:
        return len(self._sites)

    def width(self, site: str) -> int:
        """The feature width of ``site`` (the cache's ``d_model``), without reading it."""
        return int(self.cache.manifest["d_model"])


class SiteSequence(Sequence):
    """``n`` feature matrices, the ``i``-th made by ``get(i)`` each time it is indexed (nothing kept);
    ``widths`` (optional) their widths without making them."""

    def __init__(self, get: Callable[[int], np.ndarray], n: int, widths: Sequence[int] | None = None):
        self._get, self._n = get, n
        self.widths = list(widths) if widths is not None else None

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        if not -self._n <= i < self._n:
            raise IndexError(i)
        return self._get(i % self._n)

    def __len__(self) -> int:
        return self._n


def site_sequence(features: Mapping[str, np.ndarray], sites: Sequence[str],
                  transform: Callable[[np.ndarray], np.ndarray] | None = None, extra_width: int = 0) -> SiteSequence:
    """``features[site]`` for each of ``sites`` in order (through ``transform``, which adds ``extra_width``
    columns), made when indexed."""
    sites = list(sites)

    def get(i: int) -> np.ndarray:
        x = features[sites[i]]
        return transform(x) if transform is not None else x
    return SiteSequence(get, len(sites), [width(features, s) + extra_width for s in sites])


def width(features: Mapping[str, np.ndarray], site: str) -> int:
    """The width of ``features[site]``, read only where the mapping cannot say it without."""
    return features.width(site) if isinstance(features, SiteFeatures) else int(np.shape(features[site])[1])


def widths(Xs: Sequence[np.ndarray]) -> list[int]:
    """Each matrix's width; a :class:`SiteSequence` states them without making the matrices."""
    if isinstance(Xs, SiteSequence) and Xs.widths is not None:
        return Xs.widths
    return [int(np.shape(X)[1]) for X in Xs]
