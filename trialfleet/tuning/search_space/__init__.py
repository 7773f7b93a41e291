"""NNI's search-space format: its validation and sampling (``validation``), the flat view of nested choices the
tuners work on (``flat``) and the unit cube the model-based tuners search (``unit_cube``)."""

from __future__ import annotations

from trialfleet.tuning.search_space.validation import (
    ALL_TYPES,
    contains,
    outside,
    sample,
    validate_search_space,
)

__all__ = ["ALL_TYPES", "contains", "outside", "sample", "validate_search_space"]
