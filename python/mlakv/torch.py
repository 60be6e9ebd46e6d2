# SPDX-License-Identifier: Apache-2.0
"""Every public operation as a torch op, ``torch.ops.mlakv.*``: importing this module registers them.

``import mlakv`` never imports torch; an engine (or ``mlakv.integrations.vllm``)
imports ``mlakv.torch`` once, after which::

    torch.ops.mlakv.concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale)
    torch.ops.mlakv.concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, kv_cache, slot_mapping, scale, per_token_scale)
    kv_c, k_pe = torch.ops.mlakv.gather_records(format, kv_cache, slots, scale=None, rope_dtype="bf16", dtype=None)
    torch.ops.mlakv.gather_records_out(format, kv_cache, slots, out)    # out [N, 576]: the prefill layout
    out = torch.ops.mlakv.gather_records_paged(format, kv_cache, block_table, seq_lens, cu_seq_lens, num_rows, ...)
    out, lse = torch.ops.mlakv.sparse_mla_decode(format, q, kv_cache, indices, topk_len, sm_scale, ...,
                                                 attn_sink=None, extra_format=None, extra_kv_cache=None, ...)
    out, lse = torch.ops.mlakv.merge_attention_states(out_a, lse_a, out_b, lse_b)
    torch.ops.mlakv.sparse_mla_decode_workspace_size(rows, heads, topk, device)
    slots = torch.ops.mlakv.dcp_local_slots(indices, req_id, block_table, world_size=N, rank=r, block_size=B)
    out, lse = torch.ops.mlakv.merge_attention_states_stacked(outs, lses)   # [N, R, H, D], [N, R, H]: N-way

The schemas declare what each op writes (the cache, gather_records_out's out, the decode's workspace) and
nothing else. Each op hands the extension its tensors' pointers, dtypes, shapes,
strides and torch's current CUDA stream (no DLPack export), so Dynamo traces the
ops and ``torch.compile(fullgraph=True)`` holds over a writer -> reader ->
decode -> merge pipeline, and CUDA graphs capture them. Each fake
implementation computes the output shapes and runs the same checks as the real
call (``mlakv/checks.h``: shape, dtype, record width, format, strides,
alignment) on made-up addresses, so a traced program refuses what running it
would; only a CPU k_scale's value (read at run time) and shapes without a hint
(data-dependent sizes: the checks are skipped) escape it. The ops' schemas and
CPU/CUDA kernels are registered in C++ (``mlakv/_torch_ops.so``, built with
``-DMLAKV_BUILD_TORCH_OPS=ON``: the dispatcher calls the library directly) when
that extension is installed, else by ``torch.library.Library`` define/impl,
torch's fastest Python path; the fake implementations are this module's either
way. ``REGISTRATION`` says which ("cpp" or "python"); the environment variable
``MLAKV_TORCH_OPS`` = ``python`` forces the Python kernels, ``cpp`` requires the
extension. Schemas, errors and what is written are the same under both.
"""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path
from typing import Any, Optional

import torch

from . import _mlakv, _widths
from ._checks import Call

MINIMUM_TORCH = (2, 4)


def _torch_version(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


if _torch_version(torch.__version__) < MINIMUM_TORCH or not hasattr(torch.library, "register_fake"):
    raise ImportError(
        f"mlakv.torch needs torch >= {MINIMUM_TORCH[0]}.{MINIMUM_TORCH[1]} (torch.library.register_fake), "
        f"found torch {torch.__version__}; mlakv itself works without it"
    )

__all__ = ["MINIMUM_TORCH", "REGISTRATION"]

_raw = _mlakv.raw

# mlakv::DType's values (include/mlakv/tensor_view.h); any other torch dtype is kOther.
_OTHER = 10
_DTYPES = {
    torch.bfloat16: 0,
    torch.float16: 1,
    torch.float32: 2,
    torch.float64: 3,
    torch.uint8: 4,
    torch.int8: 5,
    torch.int16: 7,
    torch.int32: 8,
    torch.int64: 9,
}
# The stock writer's cache: engines type an fp8 cache float8_e4m3fn or uint8,
# the same bytes (16-bit caches the library itself reads as their bytes).
_CACHE_DTYPES = {**_DTYPES, torch.float8_e4m3fn: 4}


def _view(t: torch.Tensor, dtypes: dict = _DTYPES) -> tuple:
    """The extension's view of a real tensor: (data_ptr, dtype, shape, strides, device_index)."""
    return (t.data_ptr(), dtypes.get(t.dtype, _OTHER), t.shape, t.stride(), t.get_device())


def _optional_view(t: Optional[torch.Tensor]) -> Optional[tuple]:
    return None if t is None else _view(t)


def _stream(t: torch.Tensor) -> int:
    """torch's current stream on t's device (0 for the CPU), as the raw cudaStream_t."""
    return torch._C._cuda_getCurrentRawStream(t.get_device()) if t.is_cuda else 0


def _columns(view: tuple, start: int, width: int, itemsize: int) -> tuple:
    """Columns [start, start + width) of a 2-D view: the prefill output's latent and RoPE parts."""
    data, dtype, shape, strides, device = view
    return (data + start * strides[1] * itemsize, dtype, (shape[0], width), strides, device)


class _NoHint(Exception):
    """A size with no hint (data-dependent): the fake implementation cannot check concrete values."""


def _hint(x: Any) -> int:
    if isinstance(x, int):
        return x
    hint = getattr(getattr(x, "node", None), "hint", None)
    if hint is None:
        raise _NoHint
    return int(hint)


# A real k_scale for the checks of a fake CPU one: its value is read at run time.
_ONE = torch.ones(1, dtype=torch.float32)


class _FakeViews:
    """Views of fake tensors at made-up addresses: one 2^40-aligned base per storage (views of one
    storage overlap exactly as at run time), plus the tensor's offset; sizes are the trace's hints."""

    def __init__(self) -> None:
        self._bases: dict[int, int] = {}

    def __call__(self, t: torch.Tensor, dtypes: dict = _DTYPES) -> tuple:
        try:
            key = t.untyped_storage()._cdata
        except (RuntimeError, NotImplementedError, AttributeError):
            key = id(t)
        base = self._bases.setdefault(key, (len(self._bases) + 1) << 40)
        shape = tuple(_hint(d) for d in t.shape)
        strides = tuple(_hint(s) for s in t.stride())
        data = base + _hint(t.storage_offset()) * t.element_size()
        device = t.device.index if t.device.type == "cuda" else -1
        if device is None:
            device = 0
        return (data, dtypes.get(t.dtype, _OTHER), shape, strides, device)

    def optional(self, t: Optional[torch.Tensor]) -> Optional[tuple]:
        return None if t is None else self(t)

    def scale(self, t: Optional[torch.Tensor]) -> Optional[tuple]:
        """A CPU k_scale's value is read by the checks: a real 1.0 stands in at the fake's shape."""
        if t is None or t.device.type != "cpu":
            return self.optional(t)
        view = self(t)
        return (_ONE.data_ptr(), *view[1:])


class _RealViews:
    """Views of real tensors, with _FakeViews' interface."""

    __call__ = staticmethod(_view)
    optional = staticmethod(_optional_view)
    scale = staticmethod(_optional_view)


_REAL_VIEWS = _RealViews()


def _fake_checks(check: Any) -> None:
    """Runs a fake implementation's checks; sizes without a hint skip them (run time checks)."""
    try:
        check(_FakeViews())
    except _NoHint:
        pass


def _registration() -> str:
    """Loads mlakv/_torch_ops.so (the C++ schemas and kernels) when it is installed and not turned off."""
    choice = os.environ.get("MLAKV_TORCH_OPS", "")
    if choice not in ("", "cpp", "python"):
        raise ImportError(f"MLAKV_TORCH_OPS must be 'cpp', 'python' or unset, got {choice!r}")
    library = Path(__file__).with_name("_torch_ops.so")
    if choice == "python" or (not choice and not library.exists()):
        return "python"
    if not library.exists():
        raise ImportError(
            "MLAKV_TORCH_OPS=cpp: this mlakv has no C++ torch ops (build it with "
            "-C cmake.define.MLAKV_BUILD_TORCH_OPS=ON --no-build-isolation)"
        )
    try:
        torch.ops.load_library(str(library))
    except OSError as e:
        if choice == "cpp":
            raise ImportError(
                f"MLAKV_TORCH_OPS=cpp: {library.name} does not load into torch {torch.__version__}: {e}"
            ) from e
        # Built against another torch (its C++ ABI is per version): the Python kernels, said out loud.
        warnings.warn(
            f"mlakv.torch: {library.name} does not load into torch {torch.__version__} ({e}); "
            "registering the Python kernels (rebuild mlakv against this torch for the C++ ones)",
            RuntimeWarning,
            stacklevel=2,
        )
        return "python"
    return "cpp"


REGISTRATION = _registration()
# The schemas, name -> text: what this module defines, and what the C++ extension must define (tested).
_SCHEMAS: dict[str, str] = {}
_lib = torch.library.Library("mlakv", "DEF" if REGISTRATION == "python" else "FRAGMENT")


def _define(schema: str, impl: Any, fake: Any) -> None:
    name = schema.split("(")[0]  # no overloads: opcheck tests only operators without them
    _SCHEMAS[name] = schema
    if REGISTRATION == "python":
        _lib.define(schema)
        _lib.impl(name, impl, "CPU")
        _lib.impl(name, impl, "CUDA")
    torch.library.register_fake(f"mlakv::{name}", fake, lib=_lib)


# --- writers -------------------------------------------------------------------------------------------------------


def _concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale=None):
    _raw.concat_and_cache_mla(
        _view(kv_c),
        _view(k_pe),
        _view(kv_cache, _CACHE_DTYPES),
        _view(slot_mapping),
        kv_cache_dtype,
        None if scale is None else _view(scale),
        _stream(kv_c),
        True,
    )


def _concat_and_cache_mla_fake(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale=None):
    _fake_checks(
        lambda v: _raw.concat_and_cache_mla(
            v(kv_c), v(k_pe), v(kv_cache, _CACHE_DTYPES), v(slot_mapping), kv_cache_dtype, v.scale(scale), 0, False
        )
    )


_define(
    "concat_and_cache_mla(Tensor kv_c, Tensor k_pe, Tensor(a!) kv_cache, Tensor slot_mapping, str kv_cache_dtype, "
    "Tensor? scale=None) -> ()",
    _concat_and_cache_mla,
    _concat_and_cache_mla_fake,
)


def _concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, kv_cache, slot_mapping, scale=None, per_token_scale=False):
    _raw.concat_and_cache_nvfp4_mla_fp8_rope(
        _view(kv_c),
        _view(k_pe),
        _view(kv_cache),
        _view(slot_mapping),
        None if scale is None else _view(scale),
        per_token_scale,
        _stream(kv_c),
        True,
    )


def _concat_and_cache_nvfp4_mla_fp8_rope_fake(kv_c, k_pe, kv_cache, slot_mapping, scale=None, per_token_scale=False):
    _fake_checks(
        lambda v: _raw.concat_and_cache_nvfp4_mla_fp8_rope(
            v(kv_c), v(k_pe), v(kv_cache), v(slot_mapping), v.scale(scale), per_token_scale, 0, False
        )
    )


_define(
    "concat_and_cache_nvfp4_mla_fp8_rope(Tensor kv_c, Tensor k_pe, Tensor(a!) kv_cache, Tensor slot_mapping, "
    "Tensor? scale=None, bool per_token_scale=False) -> ()",
    _concat_and_cache_nvfp4_mla_fp8_rope,
    _concat_and_cache_nvfp4_mla_fp8_rope_fake,
)


# --- the engine seam (mlakv.integrations.vllm) ---------------------------------------------------------------------


@functools.cache
def _seam(kv_cache_dtype: str, fp8_rope: bool, per_token_scale: bool) -> Any:
    """The C++ seam of one configuration, built once (its construction fails closed)."""
    return _mlakv.MlaKvCacheWriter(kv_cache_dtype, fp8_rope, per_token_scale)


def _mla_kv_cache_writer_update(
    kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, k_scale, seam_kv_cache_dtype, fp8_rope, per_token_scale
):
    _seam(seam_kv_cache_dtype, fp8_rope, per_token_scale).update_raw(
        _view(kv_c),
        _view(k_pe),
        _view(kv_cache, _CACHE_DTYPES),
        _view(slot_mapping),
        kv_cache_dtype,
        None if k_scale is None else _view(k_scale),
        _stream(kv_c),
        True,
    )


def _mla_kv_cache_writer_update_fake(
    kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, k_scale, seam_kv_cache_dtype, fp8_rope, per_token_scale
):
    seam = _seam(seam_kv_cache_dtype, fp8_rope, per_token_scale)
    _fake_checks(
        lambda v: seam.update_raw(
            v(kv_c), v(k_pe), v(kv_cache, _CACHE_DTYPES), v(slot_mapping), kv_cache_dtype, v.scale(k_scale), 0, False
        )
    )


_define(
    "mla_kv_cache_writer_update(Tensor kv_c, Tensor k_pe, Tensor(a!) kv_cache, Tensor slot_mapping, "
    "str kv_cache_dtype, Tensor? k_scale, str seam_kv_cache_dtype, bool fp8_rope, bool per_token_scale) -> ()",
    _mla_kv_cache_writer_update,
    _mla_kv_cache_writer_update_fake,
)


# --- readers -------------------------------------------------------------------------------------------------------


def _output_dtype(function: str, format: str, dtype: Optional[torch.dtype], default: torch.dtype) -> torch.dtype:
    if dtype is None:
        return default
    if dtype not in (torch.float32, torch.bfloat16):
        Call(function, format).type_error(
            "dtype", f"must be torch.float32 or torch.bfloat16 (or None: {default})", str(dtype)
        )
    return dtype


def _gather_outputs(format, kv_cache, slots, dtype):
    dtype = _output_dtype("gather_records", format, dtype, torch.float32)
    rows = slots.shape[0] if slots.dim() >= 1 else 0
    nope, rope = _widths(format)
    kv_c = torch.empty((rows, nope), dtype=dtype, device=kv_cache.device)
    k_pe = torch.empty((rows, rope), dtype=dtype, device=kv_cache.device)
    return kv_c, k_pe


def _gather_records(format, kv_cache, slots, *, scale=None, rope_dtype="bf16", dtype=None):
    kv_c, k_pe = _gather_outputs(format, kv_cache, slots, dtype)
    _raw.gather_records(
        format,
        _view(kv_cache),
        _view(slots),
        _view(kv_c),
        _view(k_pe),
        _optional_view(scale),
        rope_dtype,
        _stream(kv_cache),
        True,
    )
    return kv_c, k_pe


def _gather_records_fake(format, kv_cache, slots, *, scale=None, rope_dtype="bf16", dtype=None):
    kv_c, k_pe = _gather_outputs(format, kv_cache, slots, dtype)
    _fake_checks(
        lambda v: _raw.gather_records(
            format, v(kv_cache), v(slots), v(kv_c), v(k_pe), v.scale(scale), rope_dtype, 0, False
        )
    )
    return kv_c, k_pe


_define(
    'gather_records(str format, Tensor kv_cache, Tensor slots, *, Tensor? scale=None, str rope_dtype="bf16", '
    "ScalarType? dtype=None) -> (Tensor, Tensor)",
    _gather_records,
    _gather_records_fake,
)


def _prefill_out(format, slots, out):
    """``out``'s [:, :nope] and [:, nope:] as the outputs, once it is [len(slots), nope + rope]."""
    nope, rope = _widths(format)
    rows = slots.shape[0] if slots.dim() >= 1 else 0
    if out.dim() != 2 or out.shape[1] != nope + rope or out.shape[0] != rows:
        Call("gather_records", format).value_error(
            "out", f"shape must be (N, {nope + rope}) with N = len(slots) = {rows}", str(tuple(out.shape))
        )
    return nope, rope


def _gather_records_out_call(views, format, kv_cache, slots, out, scale, rope_dtype, stream, run):
    nope, rope = _prefill_out(format, slots, out)
    out_view = views(out)
    _raw.gather_records(
        format,
        views(kv_cache),
        views(slots),
        _columns(out_view, 0, nope, out.element_size()),
        _columns(out_view, nope, rope, out.element_size()),
        scale,
        rope_dtype,
        stream,
        run,
    )


def _gather_records_out(format, kv_cache, slots, out, *, scale=None, rope_dtype="bf16"):
    _gather_records_out_call(
        _view, format, kv_cache, slots, out, _optional_view(scale), rope_dtype, _stream(kv_cache), True
    )


def _gather_records_out_fake(format, kv_cache, slots, out, *, scale=None, rope_dtype="bf16"):
    _fake_checks(
        lambda v: _gather_records_out_call(v, format, kv_cache, slots, out, v.scale(scale), rope_dtype, 0, False)
    )


# The prefill layout: one [N, 576] buffer the caller owns (the Python function's out=).
_define(
    "gather_records_out(str format, Tensor kv_cache, Tensor slots, Tensor(a!) out, *, Tensor? scale=None, "
    'str rope_dtype="bf16") -> ()',
    _gather_records_out,
    _gather_records_out_fake,
)


def _paged_output(format, kv_cache, num_rows, dtype):
    dtype = _output_dtype("gather_records_paged", format, dtype, torch.float32)
    if isinstance(num_rows, int) and num_rows < 0:
        Call("gather_records_paged", format).value_error("num_rows", "must be >= 0", str(num_rows))
    nope, rope = _widths(format)
    return torch.empty((num_rows, nope + rope), dtype=dtype, device=kv_cache.device), nope, rope


def _gather_records_paged_call(
    views, format, kv_cache, block_table, seq_lens, cu_seq_lens, out, nope, rope, scale, rope_dtype, stream, run
):
    out_view = views(out)
    _raw.gather_records_paged(
        format,
        views(kv_cache),
        views(block_table),
        views(seq_lens),
        views(cu_seq_lens),
        _columns(out_view, 0, nope, out.element_size()),
        _columns(out_view, nope, rope, out.element_size()),
        scale,
        rope_dtype,
        stream,
        run,
    )


def _gather_records_paged(
    format, kv_cache, block_table, seq_lens, cu_seq_lens, num_rows, *, scale=None, rope_dtype="bf16", dtype=None
):
    out, nope, rope = _paged_output(format, kv_cache, num_rows, dtype)
    _gather_records_paged_call(
        _view,
        format,
        kv_cache,
        block_table,
        seq_lens,
        cu_seq_lens,
        out,
        nope,
        rope,
        _optional_view(scale),
        rope_dtype,
        _stream(kv_cache),
        True,
    )
    return out


def _gather_records_paged_fake(
    format, kv_cache, block_table, seq_lens, cu_seq_lens, num_rows, *, scale=None, rope_dtype="bf16", dtype=None
):
    out, nope, rope = _paged_output(format, kv_cache, num_rows, dtype)
    _fake_checks(
        lambda v: _gather_records_paged_call(
            v,
            format,
            kv_cache,
            block_table,
            seq_lens,
            cu_seq_lens,
            out,
            nope,
            rope,
            v.scale(scale),
            rope_dtype,
            0,
            False,
        )
    )
    return out


_define(
    "gather_records_paged(str format, Tensor kv_cache, Tensor block_table, Tensor seq_lens, Tensor cu_seq_lens, "
    'SymInt num_rows, *, Tensor? scale=None, str rope_dtype="bf16", ScalarType? dtype=None) -> Tensor',
    _gather_records_paged,
    _gather_records_paged_fake,
)


# --- attention -----------------------------------------------------------------------------------------------------

_VALUE_DIM = _mlakv.VALUE_DIM


def _decode_outputs(q):
    rows = q.shape[0] if q.dim() >= 1 else 0
    heads = q.shape[1] if q.dim() >= 2 else 0
    out = torch.empty((rows, heads, _VALUE_DIM), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((rows, heads), dtype=torch.float32, device=q.device)
    return out, lse


def _sm_scale(sm_scale: Optional[float]) -> float:
    return 0.0 if sm_scale is None else float(sm_scale)


def _decode_raw(
    v,
    stream,
    run,
    out,
    lse,
    format,
    q,
    kv_cache,
    indices,
    topk_len=None,
    sm_scale=None,
    *,
    scale=None,
    rope_dtype="bf16",
    workspace=None,
    attn_sink=None,
    extra_format=None,
    extra_kv_cache=None,
    extra_indices=None,
    extra_topk_len=None,
):
    """The decode's raw entry point on views ``v`` makes (``_REAL_VIEWS`` or a ``_FakeViews``)."""
    _raw.sparse_mla_decode(
        format,
        v(q),
        v(kv_cache),
        v(indices),
        v(out),
        v(lse),
        v.optional(topk_len),
        _sm_scale(sm_scale),
        v.scale(scale),
        rope_dtype,
        v.optional(workspace),
        v.optional(attn_sink),
        extra_format,
        v.optional(extra_kv_cache),
        v.optional(extra_indices),
        v.optional(extra_topk_len),
        stream,
        run,
    )


def _sparse_mla_decode(format, q, *args, **kwargs):
    out, lse = _decode_outputs(q)
    _decode_raw(_REAL_VIEWS, _stream(q), True, out, lse, format, q, *args, **kwargs)
    return out, lse


def _sparse_mla_decode_fake(format, q, *args, **kwargs):
    out, lse = _decode_outputs(q)
    _fake_checks(lambda v: _decode_raw(v, 0, False, out, lse, format, q, *args, **kwargs))
    return out, lse


_define(
    "sparse_mla_decode(str format, Tensor q, Tensor kv_cache, Tensor indices, Tensor? topk_len=None, "
    'float? sm_scale=None, *, Tensor? scale=None, str rope_dtype="bf16", Tensor(a!)? workspace=None, '
    "Tensor? attn_sink=None, str? extra_format=None, Tensor? extra_kv_cache=None, Tensor? extra_indices=None, "
    "Tensor? extra_topk_len=None) -> (Tensor, Tensor)",
    _sparse_mla_decode,
    _sparse_mla_decode_fake,
)


def _merge_outputs(out_a, lse_a):
    out = torch.empty(out_a.shape, dtype=out_a.dtype, device=out_a.device)
    lse = torch.empty(lse_a.shape, dtype=torch.float32, device=out_a.device)
    return out, lse


def _merge_attention_states(out_a, lse_a, out_b, lse_b):
    out, lse = _merge_outputs(out_a, lse_a)
    _raw.merge_attention_states(
        _view(out_a), _view(lse_a), _view(out_b), _view(lse_b), _view(out), _view(lse), _stream(out_a), True
    )
    return out, lse


def _merge_attention_states_fake(out_a, lse_a, out_b, lse_b):
    out, lse = _merge_outputs(out_a, lse_a)
    _fake_checks(
        lambda v: _raw.merge_attention_states(v(out_a), v(lse_a), v(out_b), v(lse_b), v(out), v(lse), 0, False)
    )
    return out, lse


_define(
    "merge_attention_states(Tensor out_a, Tensor lse_a, Tensor out_b, Tensor lse_b) -> (Tensor, Tensor)",
    _merge_attention_states,
    _merge_attention_states_fake,
)


# --- context parallel (mlakv.context_parallel; docs/context_parallel.md) -----------------------------------------


def _dcp_local_slots(indices, req_id, block_table, *, world_size, rank, block_size, interleave=1):
    out = torch.empty(indices.shape, dtype=torch.int32, device=indices.device)
    _raw.dcp_local_slots(
        _view(indices),
        _view(req_id),
        _view(block_table),
        _view(out),
        world_size,
        rank,
        interleave,
        block_size,
        _stream(indices),
        True,
    )
    return out


def _dcp_local_slots_fake(indices, req_id, block_table, *, world_size, rank, block_size, interleave=1):
    out = torch.empty(indices.shape, dtype=torch.int32, device=indices.device)
    _fake_checks(
        lambda v: _raw.dcp_local_slots(
            v(indices),
            v(req_id),
            v(block_table),
            v(out),
            _hint(world_size),
            _hint(rank),
            _hint(interleave),
            _hint(block_size),
            0,
            False,
        )
    )
    return out


_define(
    "dcp_local_slots(Tensor indices, Tensor req_id, Tensor block_table, *, int world_size, int rank, "
    "int block_size, int interleave=1) -> Tensor",
    _dcp_local_slots,
    _dcp_local_slots_fake,
)


def _stacked_merge_outputs(outs, lses):
    out = torch.empty(outs.shape[1:], dtype=outs.dtype, device=outs.device)
    lse = torch.empty(outs.shape[1:3], dtype=torch.float32, device=outs.device)
    return out, lse


def _merge_attention_states_stacked(outs, lses):
    out, lse = _stacked_merge_outputs(outs, lses)
    _raw.merge_attention_states_stacked(_view(outs), _view(lses), _view(out), _view(lse), _stream(outs), True)
    return out, lse


def _merge_attention_states_stacked_fake(outs, lses):
    out, lse = _stacked_merge_outputs(outs, lses)
    _fake_checks(lambda v: _raw.merge_attention_states_stacked(v(outs), v(lses), v(out), v(lse), 0, False))
    return out, lse


# mlakv.context_parallel.merge_attention_states(outs, lses): its own name, as the ops have no overloads.
_define(
    "merge_attention_states_stacked(Tensor outs, Tensor lses) -> (Tensor, Tensor)",
    _merge_attention_states_stacked,
    _merge_attention_states_stacked_fake,
)


def _sparse_mla_decode_workspace_size(rows, heads, topk, device):
    """Bytes of workspace the decode uses on ``device`` (0 on the CPU): a pure function of its arguments."""
    call = Call("sparse_mla_decode_workspace_size")
    for name, value in (("rows", rows), ("heads", heads), ("topk", topk)):
        if not 0 <= value < 2**31:
            call.value_error(name, "must be in [0, 2^31)", str(value))
    cuda = device.type == "cuda"
    index = (device.index or 0) if cuda else 0
    return int(_mlakv.sparse_mla_decode_workspace_size(rows, heads, topk, cuda, index))


_SCHEMAS["sparse_mla_decode_workspace_size"] = (
    "sparse_mla_decode_workspace_size(int rows, int heads, int topk, Device device) -> int"
)
if REGISTRATION == "python":
    _lib.define(_SCHEMAS["sparse_mla_decode_workspace_size"])
    _lib.impl("sparse_mla_decode_workspace_size", _sparse_mla_decode_workspace_size, "CompositeExplicitAutograd")
