# SPDX-License-Identifier: Apache-2.0
"""The packaged compact writer: owns the 368-byte record's ABI and its input validation.

Engines bind it once, when their attention backend is built, and only when the
compact record is switched on::

    from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope
"""

from __future__ import annotations

import contextlib
from typing import Any

from . import _mlakv
from ._arrays import writer_arguments
from ._checks import Call
from ._torch_route import NotRoutable, torch_ops, torch_scale

__all__ = ["concat_and_cache_nvfp4_mla_fp8_rope"]


def concat_and_cache_nvfp4_mla_fp8_rope(
    kv_c: Any,
    k_pe: Any,
    kv_cache: Any,
    slot_mapping: Any,
    scale: Any = None,
    per_token_scale: bool = False,
    stream: Any = None,
) -> None:
    """Write tokens as 368-byte NVFP4 records with an FP8 RoPE.

    Args:
        kv_c: ``[>=T, 512]`` bf16 or fp16, rows innermost-contiguous.
        k_pe: ``[>=T, 64]``, kv_c's dtype.
        kv_cache: ``[num_blocks, block_size, 368]`` uint8, written in place.
        slot_mapping: ``[T]`` int64, contiguous; out-of-range slots are skipped.
        scale: accepted for signature parity with the stock writer, not consumed.
        per_token_scale: write the two-level ``nvfp4_ds_mla_fp8_rope_pts`` record instead.
        stream: CUDA stream for CUDA arrays (int, torch or CuPy stream); default: torch's
            current stream for torch tensors, else the legacy default stream.
    """
    call = Call("concat_and_cache_nvfp4_mla_fp8_rope", "nvfp4_ds_mla_fp8_rope")
    if call.flag("per_token_scale", per_token_scale):
        call = Call("concat_and_cache_nvfp4_mla_fp8_rope", "nvfp4_ds_mla_fp8_rope_pts")
    ops = torch_ops(stream, kv_c, k_pe, kv_cache, slot_mapping)
    if ops is not None:
        with contextlib.suppress(NotRoutable):
            s = torch_scale(call, scale)
            return ops.concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, kv_cache, slot_mapping, s, bool(per_token_scale))
    tensors, scale, handle = writer_arguments(call, kv_c, k_pe, kv_cache, slot_mapping, scale, stream)
    _mlakv.concat_and_cache_nvfp4_mla_fp8_rope(*tensors, scale, bool(per_token_scale), stream=handle)
