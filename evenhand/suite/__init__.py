"""The decision suite: content, the lazy item generator, named subsets, validation, the datasheet.

``evenhand.suite.items(...)`` is the item loader (a subset, filtered, optionally spread across
scenarios); the rest is for building and checking the suite. Names load on first use.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..support.lazy import lazy_exports

_EXPORTS = {
    "items": ".loader", "spread": ".loader",
    "iter_subset": ".subsets", "subset_size": ".subsets", "SUBSETS": ".subsets",
    "iter_items": ".generate", "item_by_id": ".generate", "render_item": ".generate",
    "load_content": ".content", "Content": ".content", "ContentError": ".content",
    "validate_items": ".validate", "suite_stats": ".datasheet", "datasheet": ".datasheet",
    "write_items": ".export",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .content import Content, ContentError, load_content
    from .export import write_items
    from .generate import item_by_id, iter_items, render_item
    from .loader import items, spread
    from .datasheet import datasheet, suite_stats
    from .subsets import SUBSETS, iter_subset, subset_size
    from .validate import validate_items
