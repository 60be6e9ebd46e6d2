# SPDX-License-Identifier: Apache-2.0
"""The vLLM adapter over the C++ seam: KV_FP8_ROPE is the adapter's policy, the seam is bound once,
the routing rules and their errors are the seam's, and the bytes are the direct writers'."""

from __future__ import annotations

import builtins
import subprocess
import sys

import numpy as np
import pytest

import mlakv
from conftest import BF16, random_inputs
from mlakv import _mlakv
from mlakv.integrations import vllm
from mlakv.integrations.vllm import MlaKvCacheWriter
from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope


def tensors(tokens=4):
    kv_c, k_pe = random_inputs(tokens, BF16, seed=3)
    return kv_c, k_pe[:, None, :], np.zeros((2, 8, 368), np.uint8), np.arange(tokens, dtype=np.int64)[:, None]


def compact_bytes(kv_c, k_pe, slots, per_token_scale=False):
    want = np.zeros((2, 8, 368), np.uint8)
    concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe[:, 0, :], want, slots.ravel(), per_token_scale=per_token_scale)
    return want


def test_import_and_construction_without_torch_import_neither_torch_nor_the_compact_module():
    code = (
        "import sys\n"
        "from mlakv.integrations.vllm import MlaKvCacheWriter\n"
        "w = MlaKvCacheWriter('nvfp4_ds_mla', fp8_rope=True)\n"
        "v = MlaKvCacheWriter('nvfp4_ds_mla')\n"  # KV_FP8_ROPE unset: off
        "print(w.compact, v.compact, 'torch' in sys.modules, 'mlakv.kv_cache' in sys.modules)\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "KV_FP8_ROPE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["True", "False", "False", "False"]


@pytest.mark.parametrize("value", ["0", "true", "", "yes"])
def test_only_kv_fp8_rope_1_switches_the_compact_record_on(monkeypatch, value):
    monkeypatch.setenv("KV_FP8_ROPE", value)
    assert not MlaKvCacheWriter("nvfp4_ds_mla").compact
    monkeypatch.setenv("KV_FP8_ROPE", "1")
    assert MlaKvCacheWriter("nvfp4_ds_mla").compact
    assert not MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=False).compact


def test_compact_requested_for_another_cache_dtype_writes_the_stock_record():
    w = MlaKvCacheWriter("fp8_ds_mla", fp8_rope=True)
    assert not w.compact
    kv_c, k_pe, _, slots = tensors()
    got, want = np.zeros((2, 8, 656), np.uint8), np.zeros((2, 8, 656), np.uint8)
    w.update(kv_c, k_pe, got, slots, "fp8_ds_mla", 1.0)
    mlakv.concat_and_cache_mla(kv_c, k_pe, want, slots, "fp8_ds_mla")
    np.testing.assert_array_equal(got, want)


def test_the_seam_is_bound_once_and_update_imports_nothing(monkeypatch):
    built = []
    real = _mlakv.MlaKvCacheWriter
    monkeypatch.setattr(vllm._mlakv, "MlaKvCacheWriter", lambda *a: built.append(a) or real(*a))
    w = MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True, per_token_scale=True)
    assert built == [("nvfp4_ds_mla", True, True)]
    imported = []
    real_import = builtins.__import__
    monkeypatch.setattr(
        builtins, "__import__", lambda name, *a, **k: imported.append(name or ".") or real_import(name, *a, **k)
    )
    kv_c, k_pe, cache, slots = tensors()
    w.update(kv_c, k_pe, cache, slots, "nvfp4_ds_mla", None)
    w.update(kv_c, k_pe, cache, slots, "nvfp4_ds_mla", None)
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert len(built) == 1 and [n for n in imported if n.startswith(("mlakv", "torch", "."))] == []


def test_enabled_writer_squeezes_and_flattens_to_the_direct_calls_bytes():
    kv_c, k_pe, cache, slots = tensors()
    MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True).update(kv_c, k_pe, cache, slots, "nvfp4_ds_mla", None)
    np.testing.assert_array_equal(cache, compact_bytes(kv_c, k_pe, slots))


def test_per_token_scale_writes_the_pts_record():
    kv_c, k_pe, cache, slots = tensors()
    MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True, per_token_scale=True).update(
        kv_c, k_pe, cache, slots, "nvfp4_ds_mla", None
    )
    np.testing.assert_array_equal(cache, compact_bytes(kv_c, k_pe, slots, per_token_scale=True))
    assert not np.array_equal(cache, compact_bytes(kv_c, k_pe, slots))


def test_disabled_writer_writes_the_engines_stock_record():
    kv_c, k_pe, _, slots = tensors(8)
    stock, direct = np.zeros((1, 8, 432), np.uint8), np.zeros((1, 8, 432), np.uint8)
    MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=False).update(kv_c, k_pe, stock, slots, "nvfp4_ds_mla", None)
    mlakv.concat_and_cache_mla(kv_c, k_pe, direct, slots, "nvfp4_ds_mla")
    np.testing.assert_array_equal(stock, direct)


def test_wrong_cache_dtype_fails_before_a_byte_is_written():
    w = MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)
    kv_c, k_pe, cache, slots = tensors()
    with pytest.raises(ValueError, match=r"^KV_FP8_ROPE writer reached a non-NVFP4 cache: 'fp8'$"):
        w.update(kv_c, k_pe, cache, slots, "fp8", None)
    assert not cache.any()


def test_empty_cache_is_a_no_op_before_the_dtype_check():
    w = MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)
    kv_c, k_pe, _, slots = tensors()
    w.update(kv_c, k_pe, np.zeros((0, 8, 368), np.uint8), slots, "fp8", None)


def test_bad_arguments_raise_the_librarys_errors():
    kv_c, k_pe, cache, slots = tensors()
    with pytest.raises(TypeError, match="kv_c: dtype must be bf16 or fp16, got float32"):
        MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True).update(
            kv_c.astype(np.float32), k_pe, cache, slots, "nvfp4_ds_mla", None
        )
    with pytest.raises(TypeError, match=r"^mlakv::MlaKvCacheWriter: kv_cache_dtype: must be a str"):
        MlaKvCacheWriter(None)


def test_both_call_sites_route_through_the_one_binding():
    w = MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)
    kv_c, k_pe, cache, slots = tensors()
    gathered = np.zeros((2, 8, 368), np.uint8)
    w.update(kv_c, k_pe, cache, slots, "nvfp4_ds_mla", None)
    w.update_gathered(gathered, kv_c, k_pe, slots, None)
    np.testing.assert_array_equal(gathered, cache)
    np.testing.assert_array_equal(cache, compact_bytes(kv_c, k_pe, slots))


def test_torch_tensors_go_through_the_seam_op():
    torch = pytest.importorskip("torch")
    kv_c, k_pe, _, slots = tensors(8)
    t_kv = torch.from_numpy(kv_c.view(np.int16)).view(torch.bfloat16)
    t_pe = torch.from_numpy(np.ascontiguousarray(k_pe).view(np.int16)).view(torch.bfloat16)
    cache = torch.zeros((2, 8, 368), dtype=torch.uint8)
    w = MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)
    assert w._op is torch.ops.mlakv.mla_kv_cache_writer_update
    w.update(t_kv, t_pe, cache, torch.from_numpy(slots), "nvfp4_ds_mla", None)
    np.testing.assert_array_equal(cache.numpy(), compact_bytes(kv_c, k_pe, slots))
    with pytest.raises(ValueError, match=r"^KV_FP8_ROPE writer reached a non-NVFP4 cache: 'fp8'$"):
        w.update(t_kv, t_pe, cache, torch.from_numpy(slots), "fp8", None)
