# SPDX-License-Identifier: Apache-2.0
"""Decode-time attention over compact records: the sparse MLA decode and the
merge of partial results (context-parallel decode). See ``include/mlakv/attention.h``."""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Any

import numpy as np

from . import _mlakv
from ._arrays import _is_cupy, _is_torch, empty, export, stream_handle, tagged
from ._checks import Call
from ._torch_route import NotRoutable, torch_ops, torch_scale

_QUERY_DIM = _mlakv.QUERY_DIM
_VALUE_DIM = _mlakv.VALUE_DIM
# Each format's d_qk, a key's values: 576, or 512 for the DeepSeek V4 family (448 NoPE + 64 RoPE).
_QUERY_DIMS = {f["id"]: f["geometry"]["nope_dims"] + f["geometry"]["rope_dims"] for f in _mlakv.formats()}


def _device_of(x: Any) -> tuple[bool, int]:
    if _is_torch(x):
        return x.is_cuda, (x.device.index or 0) if x.is_cuda else 0
    if _is_cupy(x):
        return True, int(x.device.id)
    return False, 0


def sparse_mla_decode_workspace_size(rows: int, heads: int, topk: int, like: Any = None) -> int:
    """Bytes of workspace ``sparse_mla_decode`` uses for these shapes on ``like``'s device (0 on the CPU).
    ``topk`` counts every entry of a row: ``K + K_extra`` with an extra cache (DeepSeek V4)."""
    call = Call("sparse_mla_decode_workspace_size")
    rows, heads, topk = call.count("rows", rows), call.count("heads", heads), call.count("topk", topk)
    for name, value in (("rows", rows), ("heads", heads), ("topk", topk)):
        if value >= 2**31:
            call.value_error(name, "must be < 2^31", str(value))
    cuda, index = _device_of(like) if like is not None else (False, 0)
    return int(_mlakv.sparse_mla_decode_workspace_size(rows, heads, topk, (cuda, index)))


def _entries(call: Call, name: str, indices: Any) -> int:
    """K of an [R, K] indices array."""
    if getattr(indices, "ndim", 0) != 2:
        call.value_error(name, "shape must be (R, K)", str(tuple(getattr(indices, "shape", ()))))
    return int(indices.shape[1])


def sparse_mla_workspace(q: Any, indices: Any, extra_indices: Any = None) -> Any:
    """A workspace for ``sparse_mla_decode(format, q, ..., indices, workspace=...)`` on q's device
    (allocate it once, outside a captured region, and reuse it every step). With an extra cache
    (DeepSeek V4), pass its ``extra_indices`` too: the workspace holds ``K + K_extra`` entries a row."""
    call = Call("sparse_mla_workspace")
    call.array("q", q)
    call.array("indices", indices)
    if extra_indices is not None:
        call.array("extra_indices", extra_indices)
    if getattr(q, "ndim", 0) != 3:
        call.value_error("q", f"shape must be (R, H, {_QUERY_DIM})", str(tuple(getattr(q, "shape", ()))))
    topk = _entries(call, "indices", indices)
    if extra_indices is not None:
        topk += _entries(call, "extra_indices", extra_indices)
    rows, heads = int(q.shape[0]), int(q.shape[1])
    size = sparse_mla_decode_workspace_size(rows, heads, topk, q)
    if _is_torch(q):
        torch = sys.modules["torch"]
        return torch.empty((max(size, 16),), dtype=torch.uint8, device=q.device)
    if _is_cupy(q):
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(q.device.id):
            return cupy.empty((max(size, 16),), dtype=cupy.uint8)
    return np.empty((max(size, 16),), dtype=np.uint8)


def _wants_call_workspace(q: Any, indices: Any, extra_indices: Any) -> bool:
    """A torch CUDA call without a workspace gets one for the call (torch's allocator is graph-safe);
    malformed arguments are left to the call's own validation, which names them."""
    if not (_is_torch(q) and q.is_cuda and getattr(q, "ndim", 0) == 3 and getattr(indices, "ndim", 0) == 2):
        return False
    return extra_indices is None or getattr(extra_indices, "ndim", 0) == 2


# Whether a call in the old argument order (q, kv_cache, format, ...) has warned in this process.
_legacy_order_warned = False


def _format_first(format: Any, q: Any, kv_cache: Any) -> tuple[Any, Any, Any]:
    """(format, q, kv_cache) from a call in either order. The old order passes an
    array first and the format id third; the documented one a str first and an
    array third, so the two cannot be mistaken: a str third and no str first is
    the old order, which warns once (DeprecationWarning) and is reordered."""
    global _legacy_order_warned
    if isinstance(format, str) or not isinstance(kv_cache, str):
        return format, q, kv_cache
    if not _legacy_order_warned:
        _legacy_order_warned = True
        warnings.warn(
            "mlakv.sparse_mla_decode(q, kv_cache, format, ...) is deprecated: pass the format first, "
            "sparse_mla_decode(format, q, kv_cache, indices, ...), as the C++ call and torch.ops.mlakv do",
            DeprecationWarning,
            stacklevel=3,
        )
    return kv_cache, format, q


def sparse_mla_decode(
    format: str,
    q: Any,
    kv_cache: Any,
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
    attn_sink: Any = None,
    extra_format: str | None = None,
    extra_kv_cache: Any = None,
    extra_indices: Any = None,
    extra_topk_len: Any = None,
) -> tuple[Any, Any]:
    """Sparse MLA decode reading ``format`` records directly: ``(out [R, H, 512] bf16, lse [R, H] float32)``.

    The format comes first, as in every other call (C++ ``mlakv::sparse_mla_decode``,
    ``torch.ops.mlakv.sparse_mla_decode``). The old order ``(q, kv_cache, format, ...)`` still
    works, told apart by the str in third place; it warns once (DeprecationWarning).

    q: ``[R, H, d_qk]`` bf16, the absorbed query: d_qk = 576 (512 latent dims, then 64 RoPE dims),
    or 512 for the DeepSeek V4 family (448 NoPE dims, then 64 RoPE dims).
    kv_cache: ``[num_blocks, block_size, record_bytes]`` uint8 in ``format`` (any format of ``formats()``).
    indices: ``[R, K]`` int32 flat slots; -1 or past capacity contributes nothing and is never read.
    topk_len: optional ``[R]`` int32; row r uses its first ``topk_len[r]`` entries (clamped to [0, K]).
    sm_scale: score scale, default ``1/sqrt(d_qk)``.
    Keys are the records' decoded d_qk values exactly as ``gather_records(..., dtype="bfloat16")``
    gives them; values are their 512 latent values (576) or all 512 values (DeepSeek V4). ``lse`` is
    the natural-log sum of ``exp(sm_scale * q.k)`` over a row's valid entries; a row with none gives
    zeros and ``-inf``. ``scale`` (fp8_e4m3's k_scale) and ``rope_dtype`` (fp8_ds_mla) are as for
    ``gather_records``. ``workspace`` (CUDA, from ``sparse_mla_workspace``) lets long rows be split
    over more thread blocks: for torch CUDA tensors one is allocated for the call when none is given
    (torch's caching allocator, so a captured graph holds it too); pass your own to reuse it every
    step. Other CUDA arrays (CuPy) without one allocate nothing and run each (row, heads) as one block.

    The DeepSeek V4 family only:
    attn_sink: optional ``[H]`` float32, a per-head logit that takes softmax mass but carries no
    value: ``out`` is scaled by ``e^lse / (e^lse + e^attn_sink[h])``; ``lse`` is unchanged.
    extra_format, extra_kv_cache, extra_indices, extra_topk_len: a second cache (its own V4-family
    format id, ``[num_blocks, block_size, record_bytes]`` uint8, ``[R, K_extra]`` int32 slots and an
    optional ``[R]`` int32 of lengths) whose entries a row attends to together with ``indices``'.
    ``extra_kv_cache`` and ``extra_format`` come together, and ``extra_indices`` with them;
    ``sparse_mla_workspace(q, indices, extra_indices)`` sizes a workspace for both.
    """
    format, q, kv_cache = _format_first(format, q, kv_cache)
    if workspace is None and _wants_call_workspace(q, indices, extra_indices):
        workspace = sparse_mla_workspace(q, indices, extra_indices)
    options = {
        "workspace": workspace,
        "attn_sink": attn_sink,
        "extra_format": extra_format,
        "extra_kv_cache": extra_kv_cache,
        "extra_indices": extra_indices,
        "extra_topk_len": extra_topk_len,
    }
    rows = (format, q, kv_cache, indices, topk_len, sm_scale)
    return _sparse_attention("sparse_mla_decode", *rows, out, lse, stream, scale, rope_dtype, options)


def sparse_mla_prefill(
    format: str,
    q: Any,
    kv_cache: Any,
    indices: Any,
    topk_len: Any = None,
    sm_scale: float | None = None,
    attn_sink: Any = None,
    *,
    scale: Any = None,
    rope_dtype: str = "bf16",
    out: Any = None,
    lse: Any = None,
    stream: Any = None,
) -> tuple[Any, Any]:
    """Sparse MLA prefill reading ``format`` records directly: ``(out [s_q, H, 512] bf16, lse [s_q, H] float32)``.

    Each of the ``s_q`` query rows (a prompt's tokens) attends to its top-k cached tokens with
    ``sparse_mla_decode``'s semantics exactly (q ``[s_q, H, d_qk]``, indices ``[s_q, K]``, topk_len,
    sm_scale, the DeepSeek V4 family's ``attn_sink``, scale and rope_dtype as there); what differs is
    the shape of the work: many rows that share only the cache, none split, so no workspace. See
    ``include/mlakv/prefill.h``.
    """
    rows = (format, q, kv_cache, indices, topk_len, sm_scale)
    return _sparse_attention("sparse_mla_prefill", *rows, out, lse, stream, scale, rope_dtype, {"attn_sink": attn_sink})


# The attention calls' keyword arguments that are format ids, and that the call writes.
_FORMAT_IDS = ("extra_format",)
_WRITTEN = ("workspace",)


def _sparse_attention(
    function: str,
    format: Any,
    q: Any,
    kv_cache: Any,
    indices: Any,
    topk_len: Any,
    sm_scale: Any,
    out: Any,
    lse: Any,
    stream: Any,
    scale: Any,
    rope_dtype: Any,
    options: dict[str, Any],
) -> tuple[Any, Any]:
    """The decode's and the prefill's call (``options``: the op's own keyword arguments): checks, then
    ``torch.ops.mlakv.<function>`` for torch tensors, else ``_mlakv.<function>`` on outputs allocated here."""
    call = Call(function, format)
    call.string("format", format, "must be a str (a format id of mlakv.formats())")
    q = call.array("q", q)
    kv_cache = call.array("kv_cache", kv_cache)
    indices = call.array("indices", indices)
    topk_len = call.optional_array("topk_len", topk_len)
    out = call.optional_array("out", out, writable=True)
    lse = call.optional_array("lse", lse, writable=True)
    k_scale = call.scale("scale", scale)
    call.rope_dtype("rope_dtype", rope_dtype)
    for name, value in options.items():
        if name in _FORMAT_IDS:
            call.optional_string(name, value, "must be a str (a DeepSeek V4 family format id) or None")
        else:
            options[name] = call.optional_array(name, value, writable=name in _WRITTEN)
    query_dim = _QUERY_DIMS.get(format, _QUERY_DIM)
    sm_scale = call.optional_real("sm_scale", sm_scale, f"must be a float (None: 1/sqrt({query_dim}))")
    stream = call.stream("stream", stream)
    arrays = [v for k, v in options.items() if k not in _FORMAT_IDS]
    routable = out is None and lse is None
    ops = torch_ops(stream, q, kv_cache, indices, optional=(topk_len, *arrays)) if routable else None
    if ops is not None:
        with contextlib.suppress(NotRoutable):
            k_scale_tensor = torch_scale(call, scale)
            return getattr(ops, function)(
                format, q, kv_cache, indices, topk_len, sm_scale, scale=k_scale_tensor, rope_dtype=rope_dtype, **options
            )
    handle = stream_handle(stream, q, kv_cache)
    rows = int(q.shape[0]) if getattr(q, "ndim", 0) >= 1 else 0
    heads = int(q.shape[1]) if getattr(q, "ndim", 0) >= 2 else 0
    if out is None:
        out = call.allocate(
            "q", lambda: empty(q, (rows, heads, _VALUE_DIM), "bfloat16"), (rows, heads, _VALUE_DIM), "bf16"
        )
    if lse is None:
        lse = call.allocate("q", lambda: empty(q, (rows, heads), "float32"), (rows, heads), "float32")
    getattr(_mlakv, function)(
        format,
        tagged(q),
        export(kv_cache),
        export(indices),
        tagged(topk_len),
        sm_scale,
        scale=export(k_scale),
        rope_dtype=rope_dtype,
        **{name: value if name in _FORMAT_IDS else tagged(value) for name, value in options.items()},
        out=tagged(out),
        lse=tagged(lse),
        stream=handle,
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
    call = Call("merge_attention_states")
    out_a, lse_a = call.array("out_a", out_a), call.array("lse_a", lse_a)
    out_b, lse_b = call.array("out_b", out_b), call.array("lse_b", lse_b)
    out = call.optional_array("out", out, writable=True)
    lse = call.optional_array("lse", lse, writable=True)
    stream = call.stream("stream", stream)
    ops = torch_ops(stream, out_a, lse_a, out_b, lse_b) if out is None and lse is None else None
    if ops is not None:
        return ops.merge_attention_states(out_a, lse_a, out_b, lse_b)
    handle = stream_handle(stream, out_a)
    if out is None:
        dtype = "float32" if str(getattr(out_a, "dtype", "")).endswith("float32") else "bfloat16"
        # A producer without a shape gets an empty output here; the extension names what it is.
        shape = tuple(int(d) for d in getattr(out_a, "shape", ()))
        out = call.allocate("out_a", lambda: empty(out_a, shape, dtype), shape, dtype)
    if lse is None:
        shape = tuple(int(d) for d in getattr(lse_a, "shape", ()))
        lse = call.allocate("lse_a", lambda: empty(out_a, shape, "float32"), shape, "float32")
    _mlakv.merge_attention_states(
        tagged(out_a), export(lse_a), tagged(out_b), export(lse_b), out=tagged(out), lse=export(lse), stream=handle
    )
    return out, lse
