"""Shared fixtures: where the optional ../shared material is."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("MONET_SHARED", REPO.parent / "shared"))
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def shared_models() -> Path:
    models = SHARED / "models"
    if not models.is_dir():
        pytest.skip("../shared/models is not present")
    return models
