"""Multi-chip training steps: the plan (`plan.py`: dp x tp x pp x ZeRO x micro-batches), and
the step of a parallelized function on a system (`step.py`: one chip's schedule from the
list scheduler, re-timed with its collectives run on the network simulator; per-device memory)."""
