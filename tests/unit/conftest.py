"""Shared fixtures: where the optional ../shared material is."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("MONET_SHARED", REPO.parent / "shared"))
sys.path.insert(0, str(Path(__file__).parent))

# the persistent cost cache (monet_ir/cost/disk_cache.py) of this session: a fresh file, not the
# user's, shared by the in-process runs and the tools the tests start
if "MONET_COST_CACHE" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _cost_cache = tempfile.mkdtemp(prefix="monet-test-cost-cache-")
    os.environ["MONET_COST_CACHE"] = str(Path(_cost_cache) / "costs.sqlite")
    atexit.register(shutil.rmtree, _cost_cache, ignore_errors=True)


@pytest.fixture
def shared_models() -> Path:
    models = SHARED / "models"
    if not models.is_dir():
        pytest.skip("../shared/models is not present")
    return models
