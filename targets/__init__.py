"""Accelerator target descriptions: data model, loaders (our YAML, Stream/ZigZag YAML) and the
built-in targets.  Importing this package does not import yaml or numpy."""

from .errors import TargetError
from .loader import (
    builtin_target_path,
    get_target,
    list_builtin_targets,
    load_target_file,
    load_zigzag_core,
    missing_dram_warning,
    offchip_dram,
    target_from_zigzag_core,
    warn_missing_dram,
    with_dram,
)
from .model import (
    ArrayDim,
    Bus,
    Core,
    Dram,
    Interconnect,
    Link,
    MemoryLevel,
    OperationalArray,
    Port,
    PrecisionCost,
    SpatialUnroll,
    Storage,
    Target,
)

__all__ = [
    "ArrayDim",
    "Bus",
    "Core",
    "Dram",
    "Interconnect",
    "Link",
    "MemoryLevel",
    "OperationalArray",
    "Port",
    "PrecisionCost",
    "SpatialUnroll",
    "Storage",
    "Target",
    "TargetError",
    "builtin_target_path",
    "get_target",
    "list_builtin_targets",
    "load_target_file",
    "load_zigzag_core",
    "missing_dram_warning",
    "offchip_dram",
    "target_from_zigzag_core",
    "warn_missing_dram",
    "with_dram",
]
