"""Design-space exploration of a training step: checkpointing and core allocation (genetic
search and an exact MILP for checkpointing), and hardware sweeps.

- `monet_ir.explore.evaluate`: one candidate (recompute set + core allocation) -> latency,
  energy and peak memory of the scheduled training step, in tens of milliseconds.
- `monet_ir.explore.ga`: NSGA-II (DEAP) over those decisions; Pareto front, plots, the chosen
  point and the `monet report` command line that reproduces it.
- `monet_ir.explore.milp`: the checkpoint choice solved exactly (HiGHS via SciPy) under a
  saved-activation memory budget, for small graphs.
- `monet_ir.explore.sweep`: hardware parameter sweeps over a target YAML template.

See docs/explore.md.
"""
