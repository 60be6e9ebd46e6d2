# SPDX-License-Identifier: Apache-2.0
"""The KV-cache writer seam of a vLLM-style MLA attention backend.

Build one ``MlaKvCacheWriter`` when the backend is constructed; it binds the
packaged compact writer once, and only when the compact 368-byte record is
switched on (``KV_FP8_ROPE=1``) for an NVFP4 MLA cache. It fails closed: a
build without the compact writer raises at construction and never falls back
to the 432-byte record::

    from mlakv.integrations.vllm import MlaKvCacheWriter

    self.kv_writer = MlaKvCacheWriter(kv_cache_dtype)           # in __init__
    self.kv_writer.update(kv_c, k_pe, kv_cache, slot_mapping,   # in forward
                          kv_cache_dtype, layer._k_scale)
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable

__all__ = ["COMPACT_UNAVAILABLE", "MlaKvCacheWriter"]

COMPACT_MODULE = "mlakv.kv_cache"
COMPACT_ATTRIBUTE = "concat_and_cache_nvfp4_mla_fp8_rope"
COMPACT_UNAVAILABLE = (
    "KV_FP8_ROPE=1 requires an mlakv build with concat_and_cache_nvfp4_mla_fp8_rope package API support"
)


def _fp8_rope_from_env() -> bool:
    return os.environ.get("KV_FP8_ROPE") == "1"


def _bind_compact_writer() -> Callable[..., None]:
    """The compact writer, or RuntimeError(COMPACT_UNAVAILABLE) when this build lacks it.

    Only "the module or the attribute is missing" becomes that error; anything
    else raised while importing the module (a failing dependency, a CUDA
    initialisation error) propagates as itself.
    """
    try:
        module = importlib.import_module(COMPACT_MODULE)
    except ModuleNotFoundError as error:
        if error.name not in (COMPACT_MODULE, COMPACT_MODULE.rpartition(".")[0]):
            raise
        raise RuntimeError(COMPACT_UNAVAILABLE) from error
    writer = getattr(module, COMPACT_ATTRIBUTE, None)
    if writer is None:
        raise RuntimeError(COMPACT_UNAVAILABLE)
    return writer


def _names_compact_record(kv_cache_dtype: str) -> bool:
    """Whether the engine name has a compact (``KV_FP8_ROPE=1``) record at all: the registry says (``nvfp4_ds_mla``)."""
    import mlakv

    names = (n for f in mlakv.formats() for n in f["engine_names"])
    return any(n["fp8_rope"] and n["kv_cache_dtype"] == kv_cache_dtype for n in names)


def _numel(x: Any) -> int:
    numel = getattr(x, "numel", None)
    if callable(numel):
        return int(numel())
    return int(x.size)


class MlaKvCacheWriter:
    """Routes an MLA backend's cache writes to the stock or the bound compact writer.

    Args:
        kv_cache_dtype: the engine's cache dtype string (``nvfp4_ds_mla`` for the NVFP4 MLA cache).
        fp8_rope: request the compact 368-byte record; ``None`` reads ``KV_FP8_ROPE`` (``"1"`` = on).
        per_token_scale: write the per-token-scale variant of the compact record.
    """

    def __init__(self, kv_cache_dtype: str, *, fp8_rope: bool | None = None, per_token_scale: bool = False) -> None:
        requested = _fp8_rope_from_env() if fp8_rope is None else bool(fp8_rope)
        self.kv_cache_dtype = kv_cache_dtype
        self.per_token_scale = bool(per_token_scale)
        self.compact = requested and _names_compact_record(kv_cache_dtype)
        self._writer = _bind_compact_writer() if self.compact else None

    def update(self, kv_c: Any, k_pe: Any, kv_cache: Any, slot_mapping: Any, kv_cache_dtype: str, k_scale: Any) -> None:
        """Write this step's tokens (``kv_c [T, 512]``, ``k_pe [T, 64]`` or ``[T, 1, 64]``) into ``kv_cache``."""
        if _numel(kv_cache) == 0:
            return
        if not self.compact:
            import mlakv  # looked up per call, so the stock op is the one the package exposes now

            mlakv.concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype=kv_cache_dtype, scale=k_scale)
            return
        if not _names_compact_record(kv_cache_dtype):
            raise RuntimeError(f"KV_FP8_ROPE writer reached a non-NVFP4 cache: {kv_cache_dtype!r}")
        import mlakv

        # The stock op's resolver: the switches pick the compact record, the cache must be as wide.
        record_bytes = int(kv_cache.shape[-1]) if len(kv_cache.shape) == 3 else 0
        fmt = mlakv.resolve_format(kv_cache_dtype, record_bytes, True, self.per_token_scale)
        if len(k_pe.shape) == 3 and k_pe.shape[1] == 1:
            k_pe = k_pe[:, 0, :]
        slot_mapping = slot_mapping.reshape(-1)
        if fmt == "nvfp4_ds_mla_fp8_rope_pts":
            self._writer(kv_c, k_pe, kv_cache, slot_mapping, k_scale, per_token_scale=True)
        else:
            self._writer(kv_c, k_pe, kv_cache, slot_mapping, k_scale)

    def update_gathered(self, gathered_cache: Any, kv_c: Any, k_pe: Any, slots: Any, k_scale: Any) -> None:
        """Patch the current tokens into a gathered scratch cache (context-parallel decode),
        through the same binding and checks as :meth:`update`."""
        self.update(kv_c, k_pe, gathered_cache, slots, self.kv_cache_dtype, k_scale)
