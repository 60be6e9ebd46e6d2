# SPDX-License-Identifier: Apache-2.0
"""The KV-cache writer seam of a vLLM-style MLA attention backend: a thin adapter over the C++ seam.

Build one ``MlaKvCacheWriter`` when the backend is constructed; it binds the
library's seam (``mlakv::engine::MlaKvCacheWriter``, include/mlakv/mla_kv_cache_writer.h)
once, which binds the packaged compact writer only when the compact 368-byte
record is switched on for an NVFP4 MLA cache, and fails closed: a build without
the compact writer raises at construction (``NotImplementedError``) and never
falls back to the 432-byte record::

    from mlakv.integrations.vllm import MlaKvCacheWriter

    self.kv_writer = MlaKvCacheWriter(kv_cache_dtype)           # in __init__
    self.kv_writer.update(kv_c, k_pe, kv_cache, slot_mapping,   # in forward
                          kv_cache_dtype, layer._k_scale)

The engine's policy stays here: ``KV_FP8_ROPE=1`` (the B12X backend's switch)
requests the compact record when ``fp8_rope`` is not given. Every routing rule
(the empty cache, the cache dtype check, the record choice, the k_pe squeeze and
slot flattening) is the C++ seam's. With torch imported, construction imports
``mlakv.torch`` and ``update`` on torch tensors is the op
``torch.ops.mlakv.mla_kv_cache_writer_update``, so a model compiles with no
graph break at the write and the write is captured in CUDA graphs; other arrays
go through DLPack.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .. import _mlakv
from .._arrays import input_array, output_array, stream_handle
from .._checks import Call, text_fault

__all__ = ["MlaKvCacheWriter"]


def fp8_rope_from_env() -> bool:
    """vLLM's switch for the B12X compact record: ``KV_FP8_ROPE`` is exactly ``"1"``."""
    return os.environ.get("KV_FP8_ROPE") == "1"


class MlaKvCacheWriter:
    """Routes an MLA backend's cache writes to the stock or the bound compact writer.

    Args:
        kv_cache_dtype: the engine's cache dtype string (``nvfp4_ds_mla`` for the NVFP4 MLA cache).
        fp8_rope: request the compact 368-byte record; ``None`` reads ``KV_FP8_ROPE`` (``"1"`` = on).
        per_token_scale: write the per-token-scale variant of the compact record.
    """

    def __init__(self, kv_cache_dtype: str, *, fp8_rope: bool | None = None, per_token_scale: bool = False) -> None:
        call = Call("MlaKvCacheWriter", kv_cache_dtype)
        call.string("kv_cache_dtype", kv_cache_dtype, "must be a str (the engine's kv_cache_dtype)")
        self.kv_cache_dtype = kv_cache_dtype
        self.fp8_rope = fp8_rope_from_env() if fp8_rope is None else call.flag("fp8_rope", fp8_rope)
        self.per_token_scale = call.flag("per_token_scale", per_token_scale)
        self._seam = _mlakv.MlaKvCacheWriter(kv_cache_dtype, self.fp8_rope, self.per_token_scale)
        self.compact = self._seam.compact
        self._op = None
        self._tensor = ()  # isinstance(x, ()) is False: no torch, no op
        torch = sys.modules.get("torch")
        if torch is not None:
            from .. import torch as _ops  # noqa: F401  (registers torch.ops.mlakv)

            self._op = torch.ops.mlakv.mla_kv_cache_writer_update
            self._tensor = torch.Tensor

    def update(self, kv_c: Any, k_pe: Any, kv_cache: Any, slot_mapping: Any, kv_cache_dtype: str, k_scale: Any) -> None:
        """Write this step's tokens (``kv_c [T, 512]``, ``k_pe [T, 64]`` or ``[T, 1, 64]``) into ``kv_cache``."""
        tensors = (kv_c, k_pe, kv_cache, slot_mapping)
        if (
            all(isinstance(t, self._tensor) for t in tensors)
            and (k_scale is None or isinstance(k_scale, self._tensor))
            and isinstance(kv_cache_dtype, str)
            and (kv_cache_dtype == self.kv_cache_dtype or text_fault(kv_cache_dtype) is None)
        ):
            # Any other argument (a float k_scale, a numpy array, a kv_cache_dtype that is no str) takes
            # the DLPack path below: the same seam, whose checks name the argument (torch's schema would not).
            self._op(
                *tensors,
                kv_cache_dtype,
                k_scale,
                self.kv_cache_dtype,
                self.fp8_rope,
                self.per_token_scale,
            )
            return
        call = Call("MlaKvCacheWriter.update", kv_cache_dtype)
        call.string("kv_cache_dtype", kv_cache_dtype, "must be a str (the engine's kv_cache_dtype)")
        kv_c, kv_c_tag = input_array(call.array("kv_c", kv_c))
        k_pe, k_pe_tag = input_array(call.array("k_pe", k_pe))
        cache = call.array("kv_cache", kv_cache, writable=True)
        slots = input_array(call.slots("slot_mapping", slot_mapping))[0]
        scale = call.scale("scale", k_scale)
        self._seam.update(
            kv_c,
            kv_c_tag,
            k_pe,
            k_pe_tag,
            output_array(cache)[0],
            slots,
            kv_cache_dtype,
            None if scale is None else input_array(scale)[0],
            stream_handle(None, kv_cache),
        )

    def update_gathered(self, gathered_cache: Any, kv_c: Any, k_pe: Any, slots: Any, k_scale: Any) -> None:
        """Patch the current tokens into a gathered scratch cache (context-parallel decode),
        through the same binding and checks as :meth:`update`."""
        self.update(kv_c, k_pe, gathered_cache, slots, self.kv_cache_dtype, k_scale)
