# SPDX-License-Identifier: Apache-2.0
"""mlakv: the compact KV-cache record formats of MLA models.

Writers quantize each token's latent (512 values) and RoPE key (64 values) into
a record of a paged cache ``uint8[num_blocks, block_size, record_bytes]``; the
reader decodes records back. Arrays are any DLPack producer (numpy, torch, CuPy,
JAX); numpy bfloat16 comes from ``ml_dtypes``. Bad input raises ``ValueError``
or ``TypeError`` naming the argument, before any byte is written.

The packaged compact writer lives in the submodule ``mlakv.kv_cache``, which
this package does not import.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _mlakv
from ._arrays import input_array, scale_array, slot_array

__version__: str = _mlakv.__version__

__all__ = ["__version__", "capabilities", "concat_and_cache_mla", "formats", "gather_records"]

_LATENT_DIM = 512
_ROPE_DIM = 64


def formats() -> list[dict[str, Any]]:
    """The record formats of ABI.md: id, record_bytes, cache_alignment, layout, source, fields."""
    return _mlakv.formats()


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
) -> None:
    """Write tokens into ``kv_cache`` in the engine's ``kv_cache_dtype`` (vLLM's stock op).

    Args:
        kv_c: ``[>=T, 512]`` bf16 or fp16, rows innermost-contiguous.
        k_pe: ``[>=T, 64]`` or ``[>=T, 1, 64]``, kv_c's dtype.
        kv_cache: ``[num_blocks, block_size, record_bytes]`` uint8, written in place.
        slot_mapping: ``[T]`` or ``[T, 1]`` int64; slots outside ``[0, num_blocks*block_size)`` are skipped.
        kv_cache_dtype: ``auto``, ``fp8``, ``fp8_e4m3``, ``fp8_ds_mla``, ``nvfp4_ds_mla`` or ``nvfp4_fp8_ds_mla``.
        scale: k_scale, a float or 1-element float32 array; required by ``fp8``/``fp8_e4m3``.
    """
    kv_c, kv_c_tag = input_array(kv_c)
    k_pe, k_pe_tag = input_array(k_pe)
    _mlakv.concat_and_cache_mla(
        kv_c, kv_c_tag, k_pe, k_pe_tag, kv_cache, slot_array(slot_mapping), kv_cache_dtype, scale_array(scale)
    )


def gather_records(
    format: str,
    kv_cache: Any,
    slots: Any,
    *,
    scale: Any = None,
    rope_dtype: str = "bf16",
) -> tuple[np.ndarray, np.ndarray]:
    """Decode the records at flat ``slots`` to float32 ``(kv_c [N, 512], k_pe [N, 64])``.

    A slot outside ``[0, num_blocks*block_size)`` (e.g. -1) yields zeros.
    ``scale`` is the k_scale ``fp8_e4m3`` records were written with (required there);
    ``rope_dtype`` says what ``fp8_ds_mla``'s raw 16-bit RoPE values are (``bf16`` or ``fp16``).
    """
    slots = slot_array(slots)
    n = int(slots.shape[0]) if getattr(slots, "ndim", 0) >= 1 else 0
    kv_c = np.empty((n, _LATENT_DIM), dtype=np.float32)
    k_pe = np.empty((n, _ROPE_DIM), dtype=np.float32)
    if rope_dtype not in ("bf16", "fp16"):
        raise ValueError(f"mlakv::gather_records({format}): rope_dtype: must be bf16 or fp16, got {rope_dtype!r}")
    _mlakv.gather_records(format, kv_cache, slots, kv_c, k_pe, scale_array(scale), rope_dtype)
    return kv_c, k_pe
