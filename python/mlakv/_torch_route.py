# SPDX-License-Identifier: Apache-2.0
"""The public functions' way to ``torch.ops.mlakv`` for torch tensors.

Called on torch tensors, ``mlakv.concat_and_cache_mla``, ``gather_records``, ``sparse_mla_decode``,
... hand them to the op of the same name (registered by ``mlakv.torch``, imported here on first use)
instead of exporting DLPack capsules, which Dynamo cannot trace: a pipeline of ``mlakv.*`` calls
then compiles whole, as one of ``torch.ops.mlakv.*`` calls does. The op runs the same library call
on the same views, so results and errors are the same. A call that passes an explicit ``stream``,
caller-owned outputs the op does not take, or any non-torch array keeps the DLPack path; so does
every call where ``mlakv.torch`` cannot register (torch < 2.4)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ._checks import real

# "ops": torch.ops.mlakv once mlakv.torch has registered it, or None where it cannot.
_LOADED: dict[str, Any] = {}


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _load() -> Any:
    try:
        import mlakv.torch  # noqa: F401  (registers torch.ops.mlakv)
    except ImportError:  # torch < 2.4: mlakv.torch says why when imported by name
        return None
    return sys.modules["torch"].ops.mlakv


def torch_ops(stream: Any, *arrays: Any, optional: tuple = ()) -> Any:
    """``torch.ops.mlakv`` when no stream is given, every required array is a torch tensor and every
    ``optional`` one a tensor or None; else None (the caller keeps the DLPack path, whose checks name
    a missing array: the op's schema would take None for an undefined tensor)."""
    if stream is not None or not all(_is_tensor(a) for a in arrays):
        return None
    if not all(a is None or _is_tensor(a) for a in optional):
        return None
    if "ops" not in _LOADED:
        _LOADED["ops"] = _load()
    return _LOADED["ops"]


class NotRoutable(Exception):
    """An argument the ops do not take as it is (a numpy k_scale with torch tensors): the DLPack path."""


def torch_scale(call: Any, scale: Any) -> Any:
    """A k_scale as the ops take it: None, a tensor, or a Python real as a 1-element float32 CPU tensor
    (the value the DLPack path would make of it); a bool is refused as there. Else NotRoutable."""
    if scale is None or _is_tensor(scale):
        return scale
    if isinstance(scale, (bool, np.bool_)):
        call.type_error("scale", "must be a float or a 1-element float32 array", "bool")
    if isinstance(scale, (int, float)):
        torch = sys.modules["torch"]
        return torch.tensor([real(scale)], dtype=torch.float32)
    raise NotRoutable
