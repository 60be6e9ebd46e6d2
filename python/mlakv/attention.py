# SPDX-License-Identifier: Apache-2.0
"""Decode-time attention over compact records: the sparse MLA decode and the
merge of partial results (context-parallel decode). See ``include/mlakv/attention.h``."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from . import _mlakv
from ._arrays import _is_cupy, _is_torch, empty, export, input_array, output_array, scale_array, stream_handle

_VALUE_DIM = 512


def _device_of(x: Any) -> tuple[bool, int]:
    if _is_torch(x):
        return x.is_cuda, (x.device.index or 0) if x.is_cuda else 0
    if _is_cupy(x):
        return True, int(x.device.id)
    return False, 0


def sparse_mla_decode_workspace_size(rows: int, heads: int, topk: int, like: Any = None) -> int:
    """Bytes of workspace ``sparse_mla_decode`` uses for these shapes on ``like``'s device (0 on the CPU)."""
    cuda, index = _device_of(like) if like is not None else (False, 0)
    return int(_mlakv.sparse_mla_decode_workspace_size(int(rows), int(heads), int(topk), cuda, index))


def sparse_mla_workspace(q: Any, indices: Any) -> Any:
    """A workspace for ``sparse_mla_decode(q, ..., indices, workspace=...)`` on q's device
    (allocate it once, outside a captured region, and reuse it every step)."""
    rows, heads = int(q.shape[0]), int(q.shape[1])
    size = sparse_mla_decode_workspace_size(rows, heads, int(indices.shape[1]), q)
    if _is_torch(q):
        torch = sys.modules["torch"]
        return torch.empty((max(size, 16),), dtype=torch.uint8, device=q.device)
    if _is_cupy(q):
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(q.device.id):
            return cupy.empty((max(size, 16),), dtype=cupy.uint8)
    return np.empty((max(size, 16),), dtype=np.uint8)


def sparse_mla_decode(
    q: Any,
    kv_cache: Any,
    format: str,
    indices: Any,
    topk_len: Any = None,
    sm_scale: float | None = None,
    out: Any = None,
    lse: Any = None,
    stream: Any = None,
    *,
    scale: Any = None,
    rope_dtype: str = "bf16",
    workspace: Any = None,
) -> tuple[Any, Any]:
    """Sparse MLA decode reading ``format`` records directly: ``(out [R, H, 512] bf16, lse [R, H] float32)``.

    q: ``[R, H, 576]`` bf16, the absorbed query (512 latent dims, then 64 RoPE dims).
    kv_cache: ``[num_blocks, block_size, record_bytes]`` uint8 in ``format`` (any format of ``formats()``).
    indices: ``[R, K]`` int32 flat slots; -1 or past capacity contributes nothing and is never read.
    topk_len: optional ``[R]`` int32; row r uses its first ``topk_len[r]`` entries (clamped to [0, K]).
    sm_scale: score scale, default ``1/sqrt(576)``.
    Keys are the records' decoded 576 values and values their 512 latent values, exactly as
    ``gather_records(..., dtype="bfloat16")`` gives them. ``lse`` is the natural-log sum of
    ``exp(sm_scale * q.k)`` over a row's valid entries; a row with none gives zeros and ``-inf``.
    ``scale`` (fp8_e4m3's k_scale) and ``rope_dtype`` (fp8_ds_mla) are as for ``gather_records``.
    ``workspace`` (CUDA, optional, from ``sparse_mla_workspace``) lets long rows be split over
    more thread blocks; without it nothing is allocated and each (row, 16 heads) is one block.
    """
    if rope_dtype not in ("bf16", "fp16"):
        raise ValueError(f"mlakv::sparse_mla_decode({format}): rope_dtype: must be bf16 or fp16, got {rope_dtype!r}")
    handle = stream_handle(stream, q, kv_cache)
    rows = int(q.shape[0]) if getattr(q, "ndim", 0) >= 1 else 0
    heads = int(q.shape[1]) if getattr(q, "ndim", 0) >= 2 else 0
    if out is None:
        out = empty(q, (rows, heads, _VALUE_DIM), "bfloat16")
    if lse is None:
        lse = empty(q, (rows, heads), "float32")
    q_arr, q_tag = input_array(q)
    out_arr, out_tag = output_array(out)
    _mlakv.sparse_mla_decode(
        format,
        q_arr,
        q_tag,
        export(kv_cache),
        export(indices),
        out_arr,
        out_tag,
        export(lse),
        None if topk_len is None else export(topk_len),
        0.0 if sm_scale is None else float(sm_scale),
        scale_array(scale),
        rope_dtype,
        None if workspace is None else export(workspace),
        handle,
    )
    return out, lse


def merge_attention_states(
    out_a: Any, lse_a: Any, out_b: Any, lse_b: Any, out: Any = None, lse: Any = None, stream: Any = None
) -> tuple[Any, Any]:
    """Combine partial results over disjoint key sets: ``(out, lse)`` over their union.

    ``out = (e^lse_a out_a + e^lse_b out_b) / (e^lse_a + e^lse_b)``, ``lse = log(e^lse_a + e^lse_b)``;
    a side with ``lse = -inf`` contributes nothing. ``out_*`` are ``[R, H, D]`` bf16 or float32,
    ``lse_*`` ``[R, H]`` float32; ``out``/``lse`` may be ``out_a``/``lse_a`` (in place).
    """
    handle = stream_handle(stream, out_a)
    a_arr, a_tag = input_array(out_a)
    b_arr, b_tag = input_array(out_b)
    if out is None:
        dtype = "float32" if str(getattr(out_a, "dtype", "")).endswith("float32") else "bfloat16"
        out = empty(out_a, tuple(int(d) for d in out_a.shape), dtype)
    if lse is None:
        lse = empty(out_a, tuple(int(d) for d in lse_a.shape), "float32")
    out_arr, out_tag = output_array(out)
    _mlakv.merge_attention_states(
        a_arr, a_tag, export(lse_a), b_arr, b_tag, export(lse_b), out_arr, out_tag, export(lse), handle
    )
    return out, lse
