"""The suite's file order (``tests/conftest.py``, the longest pipeline files first): every
file ``PIPELINE_ORDER`` names exists, once, so a renamed pipeline file cannot drop
silently to the end of the order (where a long file leaves the other worker idle)."""

from __future__ import annotations

from tests.conftest import PIPELINE_DIR, PIPELINE_ORDER


def test_every_ordered_pipeline_file_exists_once():
    assert len(set(PIPELINE_ORDER)) == len(PIPELINE_ORDER), PIPELINE_ORDER
    missing = [name for name in PIPELINE_ORDER if not (PIPELINE_DIR / name).is_file()]
    assert not missing, missing
