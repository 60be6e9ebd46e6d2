# SPDX-License-Identifier: Apache-2.0
"""mlakv.sparse_mla_decode and mlakv.merge_attention_states on numpy arrays (the CPU
reference): agreement with a softmax over gather_records' keys, entry rules, merging."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mlakv
import mlakv.attention
from conftest import BF16

FORMATS = [f["id"] for f in mlakv.formats() if f["geometry"]["nope_dims"] == 512]  # the decode reads these
ENGINE = {"bf16": "auto", "fp16": "auto", "fp8_e4m3": "fp8_e4m3"}


def make_cache(fmt: str, tokens: int = 256, seed: int = 3):
    dtype = np.float16 if fmt == "fp16" else BF16
    rng = np.random.default_rng(seed)
    kv_c = (rng.standard_normal((tokens, 512)) * 0.5).astype(np.float32).astype(dtype)
    k_pe = rng.standard_normal((tokens, 64)).astype(np.float32).astype(dtype)
    cache = np.zeros((tokens // 64, 64, mlakv.formats()[FORMATS.index(fmt)]["record_bytes"]), np.uint8)
    slots = np.arange(tokens, dtype=np.int64)
    if fmt.startswith("nvfp4_ds_mla_fp8_rope"):
        from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

        concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, slots, per_token_scale=fmt.endswith("pts"))
    else:
        mlakv.concat_and_cache_mla(kv_c, k_pe, cache, slots, ENGINE.get(fmt, fmt), 1.0)
    return cache


def reference(fmt, cache, q, indices, sm_scale=1 / 24):
    kv, pe = mlakv.gather_records(fmt, cache, np.arange(cache.shape[0] * cache.shape[1]), scale=1.0, dtype="bfloat16")
    keys = np.concatenate([kv.astype(np.float64), pe.astype(np.float64)], axis=1)
    rows, heads = q.shape[:2]
    out = np.zeros((rows, heads, 512))
    lse = np.full((rows, heads), -np.inf)
    for r in range(rows):
        used = [int(i) for i in indices[r] if 0 <= i < keys.shape[0]]
        if not used:
            continue
        k = keys[used]
        s = sm_scale * (q[r].astype(np.float64) @ k.T)
        m = s.max(axis=1, keepdims=True)
        w = np.exp(s - m)
        out[r] = (w @ k[:, :512]) / w.sum(axis=1, keepdims=True)
        lse[r] = (m + np.log(w.sum(axis=1, keepdims=True)))[:, 0]
    return out, lse


@pytest.mark.parametrize("fmt", FORMATS)
def test_sparse_mla_decode_equals_softmax_over_gathered_keys(fmt):
    cache = make_cache(fmt)
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 16, 576)).astype(np.float32).astype(BF16)
    indices = rng.integers(0, 256, size=(2, 40)).astype(np.int32)
    indices[0, 3] = -1
    indices[1, 5] = 9999
    out, lse = mlakv.sparse_mla_decode(fmt, q, cache, indices, scale=1.0)
    assert out.dtype == BF16 and out.shape == (2, 16, 512)
    assert lse.dtype == np.float32 and lse.shape == (2, 16)
    ref_out, ref_lse = reference(fmt, cache, q, indices)
    np.testing.assert_allclose(out.astype(np.float64), ref_out, rtol=2**-8, atol=1e-3)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)


def test_topk_len_and_empty_rows():
    cache = make_cache("nvfp4_ds_mla")
    rng = np.random.default_rng(2)
    q = rng.standard_normal((2, 16, 576)).astype(np.float32).astype(BF16)
    indices = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.int32)
    out, lse = mlakv.sparse_mla_decode("nvfp4_ds_mla", q, cache, indices, topk_len=np.array([2, 0], np.int32))
    want, want_lse = mlakv.sparse_mla_decode("nvfp4_ds_mla", q, cache, np.array([[1, 2, -1, -1], [-1] * 4], np.int32))
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(lse, want_lse)
    assert np.all(lse[1] == -np.inf) and not np.any(out[1].astype(np.float32))


def test_merge_of_two_halves_equals_the_whole():
    cache = make_cache("nvfp4_ds_mla_fp8_rope")
    rng = np.random.default_rng(4)
    q = rng.standard_normal((1, 32, 576)).astype(np.float32).astype(BF16)
    indices = rng.integers(0, 256, size=(1, 128)).astype(np.int32)
    a, la = mlakv.sparse_mla_decode("nvfp4_ds_mla_fp8_rope", q, cache, indices[:, :50].copy())
    b, lb = mlakv.sparse_mla_decode("nvfp4_ds_mla_fp8_rope", q, cache, indices[:, 50:].copy())
    whole, lw = mlakv.sparse_mla_decode("nvfp4_ds_mla_fp8_rope", q, cache, indices)
    merged, lm = mlakv.merge_attention_states(a, la, b, lb)
    np.testing.assert_allclose(merged.astype(np.float32), whole.astype(np.float32), rtol=2**-7, atol=2e-3)
    np.testing.assert_allclose(lm, lw, rtol=1e-5)


def decode_inputs(fmt: str, rows: int, topk: int, seed: int):
    """A cache of ``fmt``, a bf16 query [rows, 16, 576] and random slots [rows, topk]."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((rows, 16, 576)).astype(np.float32).astype(BF16)
    return make_cache(fmt), q, rng.integers(0, 256, size=(rows, topk)).astype(np.int32)


def test_format_first_order_does_not_warn():
    cache = make_cache("nvfp4_ds_mla")
    q = np.random.default_rng(5).standard_normal((1, 16, 576)).astype(np.float32).astype(BF16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mlakv.sparse_mla_decode("nvfp4_ds_mla", q, cache, np.array([[1, 2, 3]], np.int32))


def test_old_argument_order_gives_the_same_bytes_and_warns_once(monkeypatch):
    monkeypatch.setattr(mlakv.attention, "_legacy_order_warned", False)
    cache, q, indices = decode_inputs("nvfp4_ds_mla_fp8_rope", rows=2, topk=40, seed=6)
    want, want_lse = mlakv.sparse_mla_decode("nvfp4_ds_mla_fp8_rope", q, cache, indices)
    with pytest.warns(DeprecationWarning, match=r"pass the format first") as caught:
        out, lse = mlakv.sparse_mla_decode(q, cache, "nvfp4_ds_mla_fp8_rope", indices)
    assert caught[0].filename == __file__  # the caller's line, not mlakv's
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(lse, want_lse)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        mlakv.sparse_mla_decode(q, cache, "nvfp4_ds_mla_fp8_rope", indices)


def test_old_order_with_every_positional_argument_as_flashmla_bench_calls_it(monkeypatch):
    # ../shared/anchors/flashmla/bench.py: sparse_mla_decode(q, cache, fmt, idx, None, SM_SCALE, o, lz, workspace=ws)
    monkeypatch.setattr(mlakv.attention, "_legacy_order_warned", True)
    cache, q, idx = decode_inputs("bf16", rows=1, topk=24, seed=7)
    o, lz = np.zeros((1, 16, 512), BF16), np.zeros((1, 16), np.float32)
    ws = mlakv.sparse_mla_workspace(q, idx)
    got = mlakv.sparse_mla_decode(q, cache, "bf16", idx, None, 0.05, o, lz, workspace=ws)
    assert got[0] is o and got[1] is lz
    want, want_lse = mlakv.sparse_mla_decode("bf16", q, cache, idx, sm_scale=0.05)
    np.testing.assert_array_equal(o.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(lz, want_lse)


def test_a_format_that_is_not_a_str_is_refused_by_name():
    cache = make_cache("bf16")
    q = np.zeros((1, 16, 576), BF16)
    with pytest.raises(TypeError, match=r"sparse_mla_decode: format: must be a str"):
        mlakv.sparse_mla_decode(None, q, cache, np.zeros((1, 4), np.int32))


def test_bad_arguments_name_the_argument():
    cache = make_cache("bf16")
    q = np.zeros((1, 16, 512), BF16)
    with pytest.raises(ValueError, match=r"sparse_mla_decode\(bf16\): q: shape must be \(R, H, 576\)"):
        mlakv.sparse_mla_decode("bf16", q, cache, np.zeros((1, 4), np.int32))
    q = np.zeros((1, 16, 576), BF16)
    with pytest.raises(TypeError, match=r"indices: dtype must be int32, got int64"):
        mlakv.sparse_mla_decode("bf16", q, cache, np.zeros((1, 4), np.int64))
    with pytest.raises(ValueError, match=r"rope_dtype"):
        mlakv.sparse_mla_decode("fp8_ds_mla", q, cache, np.zeros((1, 4), np.int32), rope_dtype="fp32")
    x = np.zeros((1, 2, 4), np.float32)
    with pytest.raises(ValueError, match=r"merge_attention_states: lse_b: shape must be \(R, H\)"):
        mlakv.merge_attention_states(x, np.zeros((1, 2), np.float32), x, np.zeros((2, 1), np.float32))


def test_workspace_size_is_zero_on_the_cpu():
    assert mlakv.sparse_mla_decode_workspace_size(4, 128, 2048) == 0
