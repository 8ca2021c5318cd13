"""Where the shared workloads are: $MONET_SHARED, else ../shared beside the checkout (a git
worktree elsewhere sets MONET_SHARED)."""

import os
from pathlib import Path

SHARED = Path(os.environ.get("MONET_SHARED", Path(__file__).resolve().parents[2] / "shared"))
