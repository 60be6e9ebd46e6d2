# SPDX-License-Identifier: Apache-2.0
"""Adapts Python arguments for the extension: bf16 numpy arrays, torch tensors,
scales, slot lists, streams, and output allocation on the inputs' device."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _is_cupy(x: Any) -> bool:
    return type(x).__module__.startswith("cupy")


def export(x: Any) -> Any:
    """torch tensors travel as DLPack capsules: ``Tensor.__dlpack__()`` without a
    stream makes the legacy default stream wait on the current one, which breaks
    CUDA-graph capture; ``to_dlpack`` exports without touching any stream."""
    if _is_torch(x):
        import torch.utils.dlpack

        try:
            return torch.utils.dlpack.to_dlpack(x.detach())
        except (BufferError, RuntimeError, TypeError):
            return x  # a tensor DLPack cannot carry (meta): the extension's import names it, with torch's reason
    return x


def input_array(x: Any) -> tuple[Any, str | None]:
    """numpy has no bfloat16: an ml_dtypes.bfloat16 array travels as a uint16 view tagged 'bf16'."""
    if isinstance(x, np.ndarray) and x.dtype.name == "bfloat16":
        return x.view(np.uint16), "bf16"
    return export(x), None


def stream_handle(stream: Any, *arrays: Any) -> int:
    """The cudaStream_t to launch on: an int, a torch or CuPy stream object, or,
    when None, torch's current stream for torch CUDA tensors, else the legacy
    default stream (0). Ignored for CPU arrays."""
    if stream is not None:
        for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
            if hasattr(stream, attr):
                return int(getattr(stream, attr))
        return int(stream)
    for a in arrays:
        if _is_torch(a) and a.is_cuda:
            torch = sys.modules["torch"]
            return int(torch.cuda.current_stream(a.device).cuda_stream)
    return 0


def empty(like: Any, shape: tuple[int, ...], dtype: str) -> Any:
    """An uninitialised array of ``dtype`` ('float32' or 'bfloat16') on ``like``'s device and framework."""
    if _is_torch(like):
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
    if _is_cupy(like):
        cupy = sys.modules["cupy"]
        if dtype != "float32":
            raise TypeError(f"mlakv: CuPy has no {dtype}; pass dtype='float32' or an out= array")
        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype=cupy.float32)
    if dtype == "bfloat16":
        import ml_dtypes

        return np.empty(shape, dtype=ml_dtypes.bfloat16)
    return np.empty(shape, dtype=np.float32)


def output_array(x: Any) -> tuple[Any, str | None]:
    """Outputs travel like inputs: a numpy bfloat16 array as a uint16 view tagged 'bf16'."""
    return input_array(x)


def tagged(x: Any) -> Any:
    """An array as the op functions (mlakv._mlakv.<op>) take it: exported, or a numpy bfloat16 array as
    the pair (its uint16 view, 'bf16'); None stays None."""
    if x is None:
        return None
    array, tag = input_array(x)
    return array if tag is None else (array, tag)


def writer_arguments(
    call: Any, kv_c: Any, k_pe: Any, kv_cache: Any, slot_mapping: Any, scale: Any, stream: Any
) -> tuple:
    """The writer op functions' arguments, checked by ``call`` (a ``_checks.Call``):
    ((kv_c, k_pe, kv_cache, slots), scale, stream)."""
    kv_c = call.array("kv_c", kv_c)
    k_pe = call.array("k_pe", k_pe)
    kv_cache = call.array("kv_cache", kv_cache, writable=True)
    slot_mapping = call.slots("slot_mapping", slot_mapping)
    scale = call.scale("scale", scale)
    handle = stream_handle(call.stream("stream", stream), kv_c, kv_cache)
    tensors = (tagged(kv_c), tagged(k_pe), output_array(kv_cache)[0], export(slot_mapping))
    return tensors, export(scale), handle
