"""Core allocation files, in the spirit of Stream's mapping YAML.

```yaml
- name: default            # every op not matched below
  core_allocation: [0, 1, 2, 3]
- name: Conv               # an ONNX op type: the forward op and its gradients (ConvGrad...)
  core_allocation: [0, 1]
- name: Relu
  core_allocation: [5]
- name: /layer1/layer1.0/conv1/Conv   # an ONNX node name: that layer's ops in every phase
  core_allocation: [2]
- name: nn.softmax         # one of our op names
  core_allocation: [5]
- name: optimizer          # a phase: forward | backward | optimizer | recompute
  core_allocation: [5]
```

An op takes the first entry matching, in this order: its node name, its op name, its ONNX op
types (its class's `OnnxNames` trait), its phase, `default`. Without a match every core able to run it is allowed. Other Stream
keys (`intra_core_tiling`, ...) are accepted and ignored: layer fusion sets tiling.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from monet_ir.errors import MonetError
from monet_ir.schedule.taskgraph import Task


@functools.lru_cache(maxsize=1024)
def onnx_names(op_name: str) -> tuple[str, ...]:
    """The ONNX (and ONNX Runtime gradient) op types an op answers to in a mapping: its class's
    `OnnxNames` trait (`dialects.interfaces`), by the op's name."""
    from dialects import op_class
    from dialects.interfaces import onnx_names as names_of

    cls = op_class(op_name)
    return names_of(cls) if cls is not None else ()


class MappingError(MonetError):
    """A malformed allocation file; str() is one line naming the file and entry."""


@dataclass(frozen=True)
class Allocation:
    entries: dict[str, tuple[int, ...]]
    source: str = ""

    def __call__(self, task: Task) -> tuple[int, ...] | None:
        for key in (task.node, task.op, *onnx_names(task.op), task.phase, "default"):
            if key in self.entries:
                return self.entries[key]
        return None

    def check_cores(self, core_count: int) -> None:
        for name, cores in self.entries.items():
            bad = [c for c in cores if not 0 <= c < core_count]
            if bad:
                raise MappingError(f"{self.source}: entry '{name}': core_allocation {list(cores)} names core(s) "
                                   f"{bad}; the target has cores 0..{core_count - 1}")


def load_allocation(path: str) -> Allocation:
    import yaml

    from monet_ir.untrusted import UntrustedFileError, read_yaml_file

    try:
        data = read_yaml_file(path)
    except UntrustedFileError as e:
        raise MappingError(str(e)) from None
    except UnicodeDecodeError as e:
        raise MappingError(f"{path}: not UTF-8 text ({e.reason})") from None
    except OSError as e:
        raise MappingError(f"{path}: cannot read file: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise MappingError(f"{path}{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if isinstance(data, dict) and "mapping" in data:
        data = data["mapping"]
    if not isinstance(data, list):
        raise MappingError(f"{path}: expected a list of entries with 'name' and 'core_allocation'")
    entries: dict[str, tuple[int, ...]] = {}
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or "name" not in entry or "core_allocation" not in entry:
            raise MappingError(f"{path}: entry [{i}]: needs 'name' and 'core_allocation'")
        cores = entry["core_allocation"]
        if isinstance(cores, int):
            cores = [cores]
        if not isinstance(cores, list) or not cores or not all(isinstance(c, int) and not isinstance(c, bool) for c in cores):
            raise MappingError(f"{path}: entry [{i}] '{entry['name']}': core_allocation must be a non-empty list of core ids")
        entries[str(entry["name"])] = tuple(cores)
    return Allocation(entries, path)
