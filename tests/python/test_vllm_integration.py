# SPDX-License-Identifier: Apache-2.0
"""The engine seam: bind once, disabled means untouched, fail closed, exact update semantics."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import numpy as np
import pytest

import mlakv
from conftest import BF16, random_inputs
from mlakv.integrations import vllm
from mlakv.integrations.vllm import COMPACT_UNAVAILABLE, MlaKvCacheWriter


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))


@pytest.fixture
def fake_compact(monkeypatch):
    """A stand-in mlakv.kv_cache module whose compact writer records its calls."""
    recorder = Recorder()
    module = types.ModuleType("mlakv.kv_cache")
    module.concat_and_cache_nvfp4_mla_fp8_rope = recorder
    monkeypatch.setitem(sys.modules, "mlakv.kv_cache", module)
    return recorder


@pytest.fixture
def stock(monkeypatch):
    recorder = Recorder()
    monkeypatch.setattr(mlakv, "concat_and_cache_mla", recorder)
    return recorder


def tensors(tokens=4):
    kv_c, k_pe = random_inputs(tokens, BF16, seed=3)
    return kv_c, k_pe[:, None, :], np.zeros((2, 8, 368), np.uint8), np.arange(tokens, dtype=np.int64)[:, None]


def test_import_and_disabled_construction_never_import_the_compact_writer():
    code = (
        "import sys\n"
        "from mlakv.integrations.vllm import MlaKvCacheWriter\n"
        "w = MlaKvCacheWriter('nvfp4_ds_mla', fp8_rope=False)\n"
        "v = MlaKvCacheWriter('nvfp4_ds_mla')\n"  # KV_FP8_ROPE unset: off
        "print(w.compact, v.compact, 'mlakv.kv_cache' in sys.modules)\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "KV_FP8_ROPE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["False", "False", "False"]


@pytest.mark.parametrize("value", ["0", "true", "", "yes"])
def test_only_kv_fp8_rope_1_switches_the_compact_record_on(monkeypatch, fake_compact, value):
    monkeypatch.setenv("KV_FP8_ROPE", value)
    assert not MlaKvCacheWriter("nvfp4_ds_mla").compact
    monkeypatch.setenv("KV_FP8_ROPE", "1")
    assert MlaKvCacheWriter("nvfp4_ds_mla").compact
    assert not MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=False).compact


def test_compact_requested_for_another_cache_dtype_stays_stock(fake_compact, stock):
    w = MlaKvCacheWriter("fp8_ds_mla", fp8_rope=True)
    assert not w.compact
    kv_c, k_pe, cache, slots = tensors()
    w.update(kv_c, k_pe, cache, slots, "fp8_ds_mla", 1.0)
    assert not fake_compact.calls and len(stock.calls) == 1


def test_disabled_writer_calls_the_stock_op_with_the_engine_arguments(monkeypatch, stock):
    imported = []
    real_import = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: imported.append(name) or real_import(name, *a))
    w = MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=False)
    kv_c, k_pe, cache, slots = tensors()
    scale = np.array([0.5], np.float32)
    w.update(kv_c, k_pe, cache, slots, "nvfp4_ds_mla", scale)
    ((args, kwargs),) = stock.calls
    assert args[0] is kv_c and args[1] is k_pe and args[2] is cache and args[3] is slots
    assert kwargs == {"kv_cache_dtype": "nvfp4_ds_mla", "scale": scale} and kwargs["scale"] is scale
    assert "mlakv.kv_cache" not in imported


def test_enabled_writer_binds_once_and_passes_squeezed_flattened_identical_arguments(monkeypatch, fake_compact):
    imported = []
    real_import = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: imported.append(name) or real_import(name, *a))
    w = MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)
    assert w.compact and imported.count("mlakv.kv_cache") == 1
    kv_c, k_pe, cache, slots = tensors()
    scale = np.array([1.0], np.float32)
    w.update(kv_c, k_pe, cache, slots, "nvfp4_ds_mla", scale)
    w.update(kv_c, k_pe, cache, slots, "nvfp4_ds_mla", scale)
    assert imported.count("mlakv.kv_cache") == 1, "no lookup per call"
    (args, kwargs) = fake_compact.calls[0]
    assert kwargs == {} and len(args) == 5
    assert args[0] is kv_c and args[2] is cache and args[4] is scale
    assert args[1].shape == (4, 64) and np.array_equal(args[1], k_pe[:, 0, :])
    assert args[3].shape == (4,) and np.array_equal(args[3], slots.ravel())


def test_per_token_scale_is_passed_only_when_requested(fake_compact):
    kv_c, k_pe, cache, slots = tensors()
    MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True, per_token_scale=True).update(
        kv_c, k_pe, cache, slots, "nvfp4_ds_mla", None
    )
    assert fake_compact.calls[0][1] == {"per_token_scale": True}


def test_wrong_cache_dtype_fails_before_the_writer_is_called(fake_compact):
    w = MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)
    kv_c, k_pe, cache, slots = tensors()
    with pytest.raises(RuntimeError, match=r"^KV_FP8_ROPE writer reached a non-NVFP4 cache: 'fp8'$"):
        w.update(kv_c, k_pe, cache, slots, "fp8", None)
    assert not fake_compact.calls


def test_empty_cache_is_a_no_op_before_the_dtype_check(fake_compact):
    w = MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)
    kv_c, k_pe, _, slots = tensors()
    w.update(kv_c, k_pe, np.zeros((0, 8, 368), np.uint8), slots, "fp8", None)
    assert not fake_compact.calls


def test_missing_module_fails_closed_with_the_targeted_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlakv.kv_cache", None)  # import raises ModuleNotFoundError for it
    with pytest.raises(RuntimeError) as info:
        MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)
    assert str(info.value) == COMPACT_UNAVAILABLE


def test_missing_attribute_fails_closed_with_the_targeted_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlakv.kv_cache", types.ModuleType("mlakv.kv_cache"))
    with pytest.raises(RuntimeError, match=COMPACT_UNAVAILABLE):
        MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)


@pytest.mark.parametrize(
    "failure",
    [ModuleNotFoundError("No module named 'cuda_helper'", name="cuda_helper"), RuntimeError("CUDA init failed")],
)
def test_other_import_failures_propagate_as_themselves(monkeypatch, failure):
    def failing_import(name, *args):
        raise failure

    monkeypatch.setattr(vllm.importlib, "import_module", failing_import)
    with pytest.raises(type(failure)) as info:
        MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)
    assert info.value is failure


def test_both_call_sites_route_through_the_one_binding(fake_compact):
    w = MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)
    kv_c, k_pe, cache, slots = tensors()
    gathered = np.zeros((1, 16, 368), np.uint8)
    w.update(kv_c, k_pe, cache, slots, "nvfp4_ds_mla", None)
    w.update_gathered(gathered, kv_c, k_pe, slots, None)
    assert [c[0][2] is x for c, x in zip(fake_compact.calls, (cache, gathered))] == [True, True]


def test_real_writers_give_the_direct_calls_bytes():
    kv_c, k_pe, _, slots = tensors(8)
    from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

    compact, direct = np.zeros((1, 8, 368), np.uint8), np.zeros((1, 8, 368), np.uint8)
    MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True).update(kv_c, k_pe, compact, slots, "nvfp4_ds_mla", None)
    concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe[:, 0, :], direct, slots.ravel())
    np.testing.assert_array_equal(compact, direct)
    stock, direct432 = np.zeros((1, 8, 432), np.uint8), np.zeros((1, 8, 432), np.uint8)
    MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=False).update(kv_c, k_pe, stock, slots, "nvfp4_ds_mla", None)
    mlakv.concat_and_cache_mla(kv_c, k_pe, direct432, slots, "nvfp4_ds_mla")
    np.testing.assert_array_equal(stock, direct432)


def test_torch_custom_ops_round_trip_on_cpu_tensors():
    torch = pytest.importorskip("torch")
    kv_c, k_pe, _, slots = tensors(8)
    want = np.zeros((1, 8, 368), np.uint8)
    from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

    concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe[:, 0, :], want, slots.ravel())
    t_kv = torch.from_numpy(kv_c.view(np.int16)).view(torch.bfloat16)
    t_pe = torch.from_numpy(np.ascontiguousarray(k_pe[:, 0, :]).view(np.int16)).view(torch.bfloat16)
    cache = torch.zeros((1, 8, 368), dtype=torch.uint8)
    torch.ops.mlakv.concat_and_cache_nvfp4_mla_fp8_rope(t_kv, t_pe, cache, torch.from_numpy(slots.ravel()), None, False)
    np.testing.assert_array_equal(cache.numpy(), want)
    stock = torch.zeros((1, 8, 432), dtype=torch.uint8)
    torch.ops.mlakv.concat_and_cache_mla(t_kv, t_pe, stock, torch.from_numpy(slots.ravel()), "nvfp4_ds_mla", None)
    want432 = np.zeros((1, 8, 432), np.uint8)
    mlakv.concat_and_cache_mla(kv_c, k_pe, want432, slots, "nvfp4_ds_mla")
    np.testing.assert_array_equal(stock.numpy(), want432)
    # Fake (meta) implementations: the ops trace without touching data.
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake_cache = torch.empty((1, 8, 368), dtype=torch.uint8)
        torch.ops.mlakv.concat_and_cache_nvfp4_mla_fp8_rope(
            torch.empty((8, 512), dtype=torch.bfloat16),
            torch.empty((8, 64), dtype=torch.bfloat16),
            fake_cache,
            torch.empty((8,), dtype=torch.int64),
            None,
            False,
        )
