# SPDX-License-Identifier: Apache-2.0
"""The writers as torch.library custom ops (``torch.ops.mlakv.*``), so they work
under ``torch.compile`` and CUDA-graph capture. Registered by ``import mlakv``
when torch is importable; the compact op imports ``mlakv.kv_cache`` only when
it runs."""

from __future__ import annotations

from typing import Optional

import torch

from . import concat_and_cache_mla as _stock_writer


@torch.library.custom_op("mlakv::concat_and_cache_mla", mutates_args=("kv_cache",))
def concat_and_cache_mla(
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    kv_cache_dtype: str,
    scale: Optional[torch.Tensor] = None,
) -> None:
    _stock_writer(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale)


@concat_and_cache_mla.register_fake
def _(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale=None) -> None:
    return None


@torch.library.custom_op("mlakv::concat_and_cache_nvfp4_mla_fp8_rope", mutates_args=("kv_cache",))
def concat_and_cache_nvfp4_mla_fp8_rope(
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    scale: Optional[torch.Tensor] = None,
    per_token_scale: bool = False,
) -> None:
    from .kv_cache import concat_and_cache_nvfp4_mla_fp8_rope as writer

    writer(kv_c, k_pe, kv_cache, slot_mapping, scale, per_token_scale)


@concat_and_cache_nvfp4_mla_fp8_rope.register_fake
def _(kv_c, k_pe, kv_cache, slot_mapping, scale=None, per_token_scale=False) -> None:
    return None
