# SPDX-License-Identifier: Apache-2.0
"""mlakv: the compact KV-cache record formats of MLA models.

Writers quantize each token's latent (512 values) and RoPE key (64 values) into
a record of a paged cache ``uint8[num_blocks, block_size, record_bytes]``; the
readers decode records back; ``sparse_mla_decode`` attends over records
directly. Arrays are any DLPack producer (numpy, torch, CuPy, JAX); numpy
bfloat16 comes from ``ml_dtypes``. Bad input raises ``ValueError`` or
``TypeError`` naming the argument, before any byte is written.

The packaged compact writer lives in the submodule ``mlakv.kv_cache``, which
this package does not import. ``import mlakv`` never imports torch: the torch
ops (``torch.ops.mlakv.*``, for ``torch.compile`` and CUDA graphs) register
when ``mlakv.torch`` is imported.
"""

from __future__ import annotations

import contextlib as _contextlib
import sys as _sys
from typing import Any

from . import _mlakv
from ._arrays import empty, stream_handle, tagged, writer_arguments
from ._arrays import export as export_cache
from ._checks import Call, shown
from ._torch_route import NotRoutable, torch_ops, torch_scale
from .attention import (
    merge_attention_states,
    sparse_mla_decode,
    sparse_mla_decode_workspace_size,
    sparse_mla_prefill,
    sparse_mla_workspace,
)

__version__: str = _mlakv.__version__

__all__ = [
    "__version__",
    "capabilities",
    "concat_and_cache_mla",
    "formats",
    "gather_records",
    "gather_records_paged",
    "merge_attention_states",
    "page_bytes",
    "resolve_format",
    "sparse_mla_decode",
    "sparse_mla_decode_workspace_size",
    "sparse_mla_prefill",
    "sparse_mla_workspace",
]

_LATENT_DIM = _mlakv.LATENT_DIM
_ROPE_DIM = _mlakv.ROPE_DIM
# Each format's (NoPE, RoPE) widths: 512 + 64, or 448 + 64 for DeepSeek V4.
_WIDTHS = {f["id"]: (f["geometry"]["nope_dims"], f["geometry"]["rope_dims"]) for f in _mlakv.formats()}


def _widths(format: str) -> tuple[int, int]:
    """kv_c's and k_pe's widths in ``format`` (an unknown id is refused by the native call)."""
    return _WIDTHS.get(format, (_LATENT_DIM, _ROPE_DIM))


def formats() -> list[dict[str, Any]]:
    """The formats of ABI.md: id, record_bytes, cache_alignment, layout, source, fields, engine_names,
    geometry (nope_dims, rope_dims, v_includes_rope) and page (kind "token_major" or "block_planar",
    data_row_bytes, scale_row_bytes, page_multiple) and policy (needs_k_scale; input_dtype: "bf16" or
    "fp16" for the records that store inputs verbatim, else None); each field has region ("data" or
    "scale"), element and group besides name, offset, bytes and contents."""
    return _mlakv.formats()


def page_bytes(format: str, block_size: int) -> int:
    """Bytes of one page (one block of ``block_size`` tokens) of a ``format`` cache, padding included:
    the smallest block stride its cache can have (``block_size * record_bytes`` for token-major
    formats; DeepSeek V4's block-planar pages are padded, e.g. to a multiple of 576)."""
    call = _format_call("page_bytes", format)
    block_size = call.count("block_size", block_size)
    if block_size >= 2**31:
        call.value_error("block_size", "must be < 2^31", str(block_size))
    if format not in _WIDTHS:
        call.value_error("format", "must be a format id of mlakv.formats()", repr(format))
    return int(_mlakv.page_bytes(format, block_size))


def resolve_format(
    kv_cache_dtype: str,
    record_bytes: int = 0,
    fp8_rope: bool = False,
    per_token_scale: bool = False,
    input_dtype: str | None = None,
) -> str:
    """The format id an engine's cache holds, e.g. ``resolve_format("nvfp4_ds_mla", 352) == "nvfp4_fp8_ds_mla"``.

    Args:
        kv_cache_dtype: an engine's name (``auto``, ``fp8``, ``fp8_e4m3``, ``fp8_ds_mla``, ``nvfp4_ds_mla``)
            or an mlakv format id, which names its format outright (``nvfp4_ds_mla``, both, resolves as
            the engine name).
        record_bytes: the cache's last dimension; 0 when not known. Upstream vLLM's ``nvfp4_ds_mla``
            is the 352-byte record, the B12X backend's the 432-byte one.
        fp8_rope: the B12X backend's compact record (``KV_FP8_ROPE=1``, 368 bytes).
        per_token_scale: with ``fp8_rope``, its per-token-scale variant.
        input_dtype: ``bf16`` or ``fp16``, the model's dtype, which ``auto`` follows.

    Raises:
        ValueError: naming the candidates when the arguments name no record or several.
        TypeError: for arguments of the wrong type.
    """
    call = Call("resolve_format", kv_cache_dtype)
    call.string("kv_cache_dtype", kv_cache_dtype, "must be a str (an engine's kv_cache_dtype or a format id)")
    if call.count("record_bytes", record_bytes) >= 2**31:
        call.value_error("record_bytes", "must be < 2^31", str(int(record_bytes)))
    fp8_rope, per_token_scale = call.flag("fp8_rope", fp8_rope), call.flag("per_token_scale", per_token_scale)
    if input_dtype is not None and (not isinstance(input_dtype, str) or input_dtype not in ("bf16", "fp16")):
        call.value_error("input_dtype", "must be bf16, fp16 or None", shown(input_dtype))
    return _mlakv.resolve_format(kv_cache_dtype, int(record_bytes), fp8_rope, per_token_scale, input_dtype)


def capabilities() -> list[dict[str, Any]]:
    """What this build supports: one dict per format x backend x arch, with writer/reader flags."""
    return _mlakv.capabilities()


def concat_and_cache_mla(
    kv_c: Any,
    k_pe: Any,
    kv_cache: Any,
    slot_mapping: Any,
    kv_cache_dtype: str,
    scale: Any = None,
    stream: Any = None,
) -> None:
    """Write tokens into ``kv_cache`` in the engine's ``kv_cache_dtype`` (vLLM's stock op).

    Args:
        kv_c: ``[>=T, 512]`` bf16 or fp16, rows innermost-contiguous.
        k_pe: ``[>=T, 64]`` or ``[>=T, 1, 64]``, kv_c's dtype.
        kv_cache: ``[num_blocks, block_size, record_bytes]`` uint8, written in place.
        slot_mapping: ``[T]`` or ``[T, 1]`` int64; slots outside ``[0, num_blocks*block_size)`` are skipped.
        kv_cache_dtype: an engine's name or an mlakv format id, resolved with the cache's record width
            (``resolve_format``): ``nvfp4_ds_mla`` writes upstream vLLM's record into a 352-byte cache
            and the B12X backend's into a 432-byte one.
        scale: k_scale, a float or 1-element float32 array (CPU or the tensors' device);
            required by ``fp8``/``fp8_e4m3``.
        stream: CUDA stream for CUDA arrays (int, torch or CuPy stream); default: torch's
            current stream for torch tensors, else the legacy default stream.
    """
    call = Call("concat_and_cache_mla", kv_cache_dtype)
    call.string("kv_cache_dtype", kv_cache_dtype, "must be a str (auto, fp8, fp8_e4m3, fp8_ds_mla, ...)")
    ops = torch_ops(stream, kv_c, k_pe, kv_cache, slot_mapping)
    if ops is not None:
        with _contextlib.suppress(NotRoutable):
            return ops.concat_and_cache_mla(
                kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, torch_scale(call, scale)
            )
    tensors, scale, handle = writer_arguments(call, kv_c, k_pe, kv_cache, slot_mapping, scale, stream)
    _mlakv.concat_and_cache_mla(*tensors, kv_cache_dtype, scale, stream=handle)


def _format_call(function: str, format: Any) -> Call:
    call = Call(function, format)
    call.string("format", format, "must be a str (a format id of mlakv.formats())")
    return call


def gather_records(
    format: str,
    kv_cache: Any,
    slots: Any,
    *,
    scale: Any = None,
    rope_dtype: str = "bf16",
    dtype: str = "float32",
    out: Any = None,
    stream: Any = None,
) -> tuple[Any, Any]:
    """Decode the records at flat ``slots``: ``(kv_c [N, 512], k_pe [N, 64])``.

    A slot outside ``[0, num_blocks*block_size)`` (e.g. -1) yields zeros. Outputs are
    ``dtype`` (``"float32"``, or ``"bfloat16"``/``"bf16"``; anything else is a ``ValueError``) arrays
    on the cache's device and framework, or the ``[:, :512]`` and ``[:, 512:]`` views of ``out``
    (``[N, 576]``), the prefill layout.
    ``scale`` is the k_scale ``fp8_e4m3`` records were written with (required there);
    ``rope_dtype`` says what ``fp8_ds_mla``'s raw 16-bit RoPE values are (``bf16`` or ``fp16``).
    """
    call = _format_call("gather_records", format)
    kv_cache = call.array("kv_cache", kv_cache)
    slots = call.slots("slots", slots)
    k_scale = call.scale("scale", scale)
    call.rope_dtype("rope_dtype", rope_dtype)
    dtype = call.output_dtype("dtype", dtype)
    ops = torch_ops(call.stream("stream", stream), kv_cache, slots, optional=(out,))
    if ops is not None:
        with _contextlib.suppress(NotRoutable):
            return _gather_records_op(
                ops, call, format, kv_cache, slots, torch_scale(call, scale), rope_dtype, dtype, out
            )
    scale = k_scale
    handle = stream_handle(call.stream("stream", stream), kv_cache)
    n = int(slots.shape[0]) if getattr(slots, "ndim", 0) >= 1 else 0
    nope, rope = _widths(format)
    options = {"scale": export_cache(scale), "rope_dtype": rope_dtype, "stream": handle}
    if out is not None:
        call.prefill_out("out", out, n, nope + rope)
        _mlakv.gather_records_out(format, export_cache(kv_cache), export_cache(slots), tagged(out), **options)
        return out[:, :nope], out[:, nope:]
    shapes = ((n, nope), (n, rope))
    kv_c = call.allocate("slots", lambda: empty(kv_cache, shapes[0], dtype), shapes[0], dtype)
    k_pe = call.allocate("slots", lambda: empty(kv_cache, shapes[1], dtype), shapes[1], dtype)
    _mlakv.gather_records(
        format, export_cache(kv_cache), export_cache(slots), kv_c=tagged(kv_c), k_pe=tagged(k_pe), **options
    )
    return kv_c, k_pe


def _gather_records_op(ops, call, format, kv_cache, slots, scale, rope_dtype, dtype, out):
    """gather_records through torch.ops.mlakv: two new outputs, or the prefill layout's out."""
    options = {"scale": scale, "rope_dtype": rope_dtype}
    if out is None:
        return ops.gather_records(format, kv_cache, slots, dtype=getattr(_sys.modules["torch"], dtype), **options)
    nope, rope = _widths(format)
    call.prefill_out("out", out, int(slots.shape[0]) if slots.dim() >= 1 else 0, nope + rope)
    ops.gather_records_out(format, kv_cache, slots, out, **options)
    return out[:, :nope], out[:, nope:]


def gather_records_paged(
    format: str,
    kv_cache: Any,
    block_table: Any,
    seq_lens: Any,
    cu_seq_lens: Any,
    *,
    num_rows: int | None = None,
    scale: Any = None,
    rope_dtype: str = "bf16",
    dtype: str = "float32",
    out: Any = None,
    stream: Any = None,
) -> Any:
    """Decode whole sequences through their block tables into ``[rows, 576]`` (the prefill gather).

    Row ``cu_seq_lens[b] + i`` (``i < seq_lens[b]``) holds position ``i`` of sequence ``b``;
    other rows are zeros. ``block_table`` is ``[B, max_blocks]`` int32, ``seq_lens`` ``[B]`` and
    ``cu_seq_lens`` ``[B + 1]`` int32. ``rows`` comes from ``out``, else ``num_rows``, else
    ``cu_seq_lens[-1]`` (which reads the device: pass ``out`` or ``num_rows`` in a CUDA graph).
    The output is ``dtype`` (``"float32"``, lossless, as ``gather_records``; or ``"bfloat16"``/``"bf16"``,
    the prefill layout's dtype).
    """
    call = _format_call("gather_records_paged", format)
    kv_cache = call.array("kv_cache", kv_cache)
    block_table = call.array("block_table", block_table)
    seq_lens = call.array("seq_lens", seq_lens)
    cu_seq_lens = call.array("cu_seq_lens", cu_seq_lens)
    k_scale = call.scale("scale", scale)
    call.rope_dtype("rope_dtype", rope_dtype)
    dtype = call.output_dtype("dtype", dtype)
    stream = call.stream("stream", stream)
    nope, rope = _widths(format)
    width = nope + rope
    if out is None:
        if num_rows is not None:
            rows = call.count("num_rows", num_rows)
        else:
            if getattr(cu_seq_lens, "ndim", 0) != 1 or int(cu_seq_lens.shape[0]) < 1:
                call.value_error("cu_seq_lens", "shape must be (B + 1,)", str(tuple(getattr(cu_seq_lens, "shape", ()))))
            try:  # the host reads it: a tensor with no data (meta) or a producer without items cannot say
                last = int(cu_seq_lens[-1])
            except (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError) as e:
                reason = str(e).splitlines()[0] if str(e) else type(e).__name__
                call.value_error(
                    "cu_seq_lens", "cu_seq_lens[-1] (the row count) must be readable (or pass num_rows)", reason
                )
            if last < 0:
                call.value_error("cu_seq_lens", "cu_seq_lens[-1] (the row count) must be >= 0", str(last))
            rows = last
        ops = torch_ops(stream, kv_cache, block_table, seq_lens, cu_seq_lens)
        if ops is not None:
            with _contextlib.suppress(NotRoutable):
                options = {"scale": torch_scale(call, scale), "rope_dtype": rope_dtype}
                torch_dtype = getattr(_sys.modules["torch"], dtype)
                return ops.gather_records_paged(
                    format, kv_cache, block_table, seq_lens, cu_seq_lens, rows, dtype=torch_dtype, **options
                )
        out = call.allocate("num_rows", lambda: empty(kv_cache, (rows, width), dtype), (rows, width), dtype)
    else:
        call.prefill_out("out", out, None, width)
    _mlakv.gather_records_paged(
        format,
        export_cache(kv_cache),
        export_cache(block_table),
        export_cache(seq_lens),
        export_cache(cu_seq_lens),
        int(out.shape[0]),
        scale=export_cache(k_scale),
        rope_dtype=rope_dtype,
        out=tagged(out),
        stream=stream_handle(stream, kv_cache),
    )
    return out
