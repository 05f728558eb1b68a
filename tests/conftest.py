"""Suite-wide hooks."""

from __future__ import annotations

from pathlib import Path

import pytest

from .weights import WEIGHTS_S


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # schemathesis makes one item per API operation ("test_x[GET /api/health]"), but under
    # pytest 9 (structured node ids, built from the callspec, which these items lack) they all
    # get the function's node id. pytest-xdist schedules by node id, so it would run one
    # operation and drop the rest: each gets its own id, checked, since this uses a private
    # attribute (Node._id, pytest 9) that a later pytest may change.
    for item in items:
        label = getattr(item, "operation_label", None)
        if label and "[" not in item.nodeid:
            item._id = item._id.with_params(label)  # type: ignore[attr-defined]
            assert item.nodeid.endswith(f"[{label}]"), item.nodeid

    # the longest files first (tests/weights.py; pytest-xdist keeps this order with
    # --no-loadscope-reorder, scripts/test.sh): a stable sort, so each file's tests keep theirs
    items.sort(key=lambda item: -WEIGHTS_S.get(Path(item.path).name, 0))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The fuzz files' schemas are built when their tests run (schemathesis' `from_fixture`),
    whose runner reads and rewrites `Node._nodeid` to name each operation: pytest 9.2 keeps the
    id elsewhere, so without this the lazy tests fail before the first case. Harmless where the
    attribute exists."""
    if not hasattr(item, "_nodeid"):
        item._nodeid = item.nodeid  # type: ignore[attr-defined]
