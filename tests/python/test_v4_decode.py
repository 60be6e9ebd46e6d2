# SPDX-License-Identifier: Apache-2.0
"""The DeepSeek V4 family's sparse decode through every binding (CPU): q [R, H, 512] (448 NoPE + 64
RoPE), values all 512, an attention sink and an extra cache of its own format, against a float64
softmax over gather_records' keys; the arguments' rules; the torch op and its fake (skipped without
torch)."""

from __future__ import annotations

import numpy as np
import pytest

import mlakv
from conftest import BF16

FORMATS = {f["id"]: f for f in mlakv.formats()}
V4 = sorted(k for k, f in FORMATS.items() if f["geometry"]["nope_dims"] == 448)
# Each V4-family format with an extra cache of another one (V4.1 pairs fp8 with nvfp4, as an engine does).
PAIRS = [(fmt, V4[(i + 1) % len(V4)]) for i, fmt in enumerate(V4)]
BLOCK = 64


def v4_cache(fmt: str, blocks: int = 4, seed: int = 0) -> np.ndarray:
    """[blocks, 64, record_bytes] of random tokens; block-planar pages as the engine's view of padded pages."""
    rng = np.random.default_rng(seed)
    tokens = blocks * BLOCK
    row = (rng.standard_normal((tokens, 512)) * 0.5).astype(np.float32).astype(BF16)
    record, page = FORMATS[fmt]["record_bytes"], mlakv.page_bytes(fmt, BLOCK)
    pages = np.zeros((blocks, page), np.uint8)
    cache = np.lib.stride_tricks.as_strided(pages, shape=(blocks, BLOCK, record), strides=(page, record, 1))
    mlakv.concat_and_cache_mla(row[:, :448], row[:, 448:], cache, np.arange(tokens), fmt)
    return cache


def keys_of(fmt: str, cache: np.ndarray) -> np.ndarray:
    """[capacity, 512] float64: the decoded bf16 values, which are both key and value."""
    nope, rope = mlakv.gather_records(fmt, cache, np.arange(cache.shape[0] * cache.shape[1]), dtype="bfloat16")
    return np.concatenate([nope, rope], axis=1).astype(np.float64)


def used(indices, lengths, row: int, capacity: int) -> list[int]:
    n = indices.shape[1] if lengths is None else min(max(int(lengths[row]), 0), indices.shape[1])
    return [int(i) for i in indices[row, :n] if 0 <= i < capacity]


def reference(q, sm_scale, main, extra=None, sink=None):
    """(out, lse) in float64; main and extra are (keys, indices, lengths or None)."""
    rows, heads = q.shape[:2]
    out, lse = np.zeros((rows, heads, 512)), np.full((rows, heads), -np.inf)
    for r in range(rows):
        sets = (main,) if extra is None else (main, extra)
        k = np.concatenate([keys[used(idx, lens, r, keys.shape[0])] for keys, idx, lens in sets])
        if not len(k):
            continue
        s = sm_scale * (q[r].astype(np.float64) @ k.T)
        m = s.max(axis=1, keepdims=True)
        w = np.exp(s - m)
        lse[r] = m[:, 0] + np.log(w.sum(axis=1))
        out[r] = (w @ k) / w.sum(axis=1, keepdims=True)
        if sink is not None:
            out[r] *= (1 / (1 + np.exp(sink.astype(np.float64) - lse[r])))[:, None]
    return out, lse


def decode_case(fmt: str, extra_fmt: str, seed: int = 1):
    """A V4 decode's arguments: 3 rows x 16 heads, -1 and out-of-range entries, lengths, a sink."""
    rng = np.random.default_rng(seed)
    cache, extra_cache = v4_cache(fmt, seed=seed), v4_cache(extra_fmt, blocks=2, seed=seed + 1)
    q = rng.standard_normal((3, 16, 512)).astype(np.float32).astype(BF16)
    indices = rng.integers(0, 256, size=(3, 24)).astype(np.int32)
    indices[0, 2], indices[1, 7] = -1, 9999
    extra_indices = rng.integers(0, 128, size=(3, 10)).astype(np.int32)
    extra_indices[2, 0] = -1
    topk_len = np.array([24, 5, 0], np.int32)  # row 2 attends only to its extra entries
    extra_topk_len = np.array([10, 3, 9], np.int32)
    sink = rng.standard_normal(16).astype(np.float32)
    sink[3] = -np.inf  # no sink for head 3
    return {
        "cache": cache,
        "q": q,
        "indices": indices,
        "topk_len": topk_len,
        "attn_sink": sink,
        "extra_kv_cache": extra_cache,
        "extra_indices": extra_indices,
        "extra_topk_len": extra_topk_len,
    }


def expected(fmt: str, extra_fmt: str, case: dict, sm_scale: float):
    main = (keys_of(fmt, case["cache"]), case["indices"], case["topk_len"])
    extra = (keys_of(extra_fmt, case["extra_kv_cache"]), case["extra_indices"], case["extra_topk_len"])
    return reference(case["q"], sm_scale, main, extra, case["attn_sink"])


def assert_close(out, lse, want_out, want_lse):
    assert out.shape == want_out.shape and lse.shape == want_lse.shape
    np.testing.assert_allclose(np.asarray(out, np.float64), want_out, rtol=2**-7, atol=2e-3)
    np.testing.assert_allclose(np.asarray(lse, np.float64), want_lse, rtol=1e-5, atol=1e-4)


def test_the_cpu_decodes_every_v4_family_format():
    decoding = {c["format"] for c in mlakv.capabilities() if c["backend"] == "cpu" and c["decode"]}
    assert V4 and set(V4) <= decoding


@pytest.mark.parametrize(("fmt", "extra_fmt"), PAIRS)
def test_v4_decode_with_sink_and_extra_cache_equals_softmax_over_both_key_sets(fmt, extra_fmt):
    case = decode_case(fmt, extra_fmt)
    c = dict(case)
    out, lse = mlakv.sparse_mla_decode(
        fmt, c.pop("q"), c.pop("cache"), c.pop("indices"), sm_scale=0.05, extra_format=extra_fmt, **c
    )
    assert out.dtype == BF16 and out.shape == (3, 16, 512) and lse.dtype == np.float32
    assert_close(out.astype(np.float32), lse, *expected(fmt, extra_fmt, case, 0.05))
    assert np.isfinite(lse[2]).all()  # the extra entries alone carry row 2


@pytest.mark.parametrize("fmt", V4)
def test_v4_decode_without_options_scales_by_one_over_sqrt_512(fmt):
    case = decode_case(fmt, fmt, seed=4)
    out, lse = mlakv.sparse_mla_decode(fmt, case["q"], case["cache"], case["indices"])
    want = reference(case["q"], 1 / np.sqrt(512), (keys_of(fmt, case["cache"]), case["indices"], None))
    assert_close(out.astype(np.float32), lse, *want)


def test_a_sink_scales_out_and_leaves_lse():
    fmt = "fp8_ds_mla_v41"
    case = decode_case(fmt, fmt, seed=5)
    args = (fmt, case["q"], case["cache"], case["indices"])
    plain, plain_lse = mlakv.sparse_mla_decode(*args)
    sunk, sunk_lse = mlakv.sparse_mla_decode(*args, attn_sink=case["attn_sink"])
    np.testing.assert_array_equal(sunk_lse, plain_lse)
    factor = 1 / (1 + np.exp(case["attn_sink"].astype(np.float64)[None, :] - plain_lse))
    want = plain.astype(np.float64) * factor[:, :, None]
    np.testing.assert_allclose(sunk.astype(np.float64), want, rtol=2**-7, atol=1e-3)


def test_an_empty_row_gives_zeros_and_minus_inf_even_with_a_sink():
    fmt = "nvfp4_ds_mla_v41"
    case = decode_case(fmt, fmt, seed=6)
    indices = np.full((3, 4), -1, np.int32)
    out, lse = mlakv.sparse_mla_decode(fmt, case["q"], case["cache"], indices, attn_sink=case["attn_sink"])
    assert (lse == -np.inf).all() and not out.astype(np.float32).any()


def test_the_workspace_helper_counts_the_extra_entries():
    case = decode_case("fp8_ds_mla_v4", "fp8_ds_mla_v4")
    workspace = mlakv.sparse_mla_workspace(case["q"], case["indices"], case["extra_indices"])
    assert workspace.dtype == np.uint8 and workspace.ndim == 1  # the CPU needs none: the 16-byte minimum
    with pytest.raises(ValueError, match=r"^mlakv::sparse_mla_workspace: extra_indices: shape must be \(R, K\)"):
        mlakv.sparse_mla_workspace(case["q"], case["indices"], case["extra_indices"][0])


def test_page_bytes_is_the_page_stride_padding_included():
    assert mlakv.page_bytes("fp8_ds_mla_v4", 64) == 65 * 576  # 64 x 584 bytes, padded to a multiple of 576
    assert mlakv.page_bytes("fp8_ds_mla", 64) == 64 * 656
    with pytest.raises(ValueError, match=r"^mlakv::page_bytes\(fp7\): format: must be a format id"):
        mlakv.page_bytes("fp7", 64)
    with pytest.raises(TypeError, match=r"^mlakv::page_bytes\(bf16\): block_size: must be an int"):
        mlakv.page_bytes("bf16", 6.5)


# --- the arguments' rules -----------------------------------------------------------------------------------------

PREFIX = r"^mlakv::sparse_mla_decode\(fp8_ds_mla_v41\): "


def refusals(case: dict):
    """(keyword arguments, error type, message) of calls every binding refuses before writing."""
    x = {"extra_kv_cache": case["extra_kv_cache"], "extra_indices": case["extra_indices"]}
    return [
        (x, ValueError, PREFIX + r"extra_format: is required with extra_kv_cache"),
        ({"extra_format": "fp8_ds_mla_v41"}, ValueError, PREFIX + r"extra_kv_cache: is required with extra_format"),
        ({"extra_indices": x["extra_indices"]}, ValueError, PREFIX + r"extra_kv_cache: is required"),
        ({"extra_topk_len": case["extra_topk_len"]}, ValueError, PREFIX + r"extra_kv_cache: is required"),
        (
            {"extra_format": "fp8_ds_mla_v41", "extra_kv_cache": x["extra_kv_cache"]},
            ValueError,
            PREFIX + r"extra_indices: is required with an extra cache",
        ),
        ({**x, "extra_format": "fp7"}, ValueError, PREFIX + r"extra_format: unknown id, expected one of .*got 'fp7'"),
        ({**x, "extra_format": "bf16"}, NotImplementedError, PREFIX + r"extra_format: must be a DeepSeek V4 family"),
        (
            {"attn_sink": case["attn_sink"][:8]},
            ValueError,
            PREFIX + r"attn_sink: shape must be \(H,\) with H = q heads",
        ),
        ({"attn_sink": case["attn_sink"].astype(np.float64)}, TypeError, PREFIX + r"attn_sink: dtype must be float32"),
        (
            {**x, "extra_format": "fp8_ds_mla_v41", "extra_indices": x["extra_indices"][:2]},
            ValueError,
            PREFIX + r"extra_indices: shape must be \(R, K\)",
        ),
    ]


def test_bad_v4_arguments_are_refused_by_name_and_nothing_is_written():
    fmt = "fp8_ds_mla_v41"
    case = decode_case(fmt, fmt)
    out = np.full((3, 16, 512), 7, BF16)
    lse = np.full((3, 16), 7, np.float32)
    for kwargs, error, message in refusals(case):
        with pytest.raises(error, match=message):
            mlakv.sparse_mla_decode(fmt, case["q"], case["cache"], case["indices"], out=out, lse=lse, **kwargs)
        assert (out.astype(np.float32) == 7).all() and (lse == 7).all(), kwargs


def test_the_v32_era_decode_refuses_a_sink_and_an_extra_cache():
    cache = np.zeros((1, 64, 656), np.uint8)
    q, indices = np.zeros((1, 16, 576), BF16), np.zeros((1, 4), np.int32)
    with pytest.raises(NotImplementedError, match=r"fp8_ds_mla\): attn_sink: is read by the DeepSeek V4 family"):
        mlakv.sparse_mla_decode("fp8_ds_mla", q, cache, indices, attn_sink=np.zeros(16, np.float32))
    with pytest.raises(ValueError, match=r"fp8_ds_mla_v41\): q: shape must be \(R, H, 512\)"):
        mlakv.sparse_mla_decode("fp8_ds_mla_v41", q, np.zeros((1, 64, 528), np.uint8), indices)
    with pytest.raises(TypeError, match=r"^mlakv::sparse_mla_decode\(fp8_ds_mla\): extra_format: must be a str"):
        mlakv.sparse_mla_decode("fp8_ds_mla", q, cache, indices, extra_format=3)


# --- torch.ops.mlakv.sparse_mla_decode (skipped without torch) ------------------------------------------------------


def torch_ops():
    torch = pytest.importorskip("torch")
    pytest.importorskip("mlakv.torch")
    return torch, torch.ops.mlakv


def as_torch(torch, case: dict) -> dict:
    """The same arrays as torch tensors sharing their memory (a padded cache keeps its page stride)."""

    def convert(x):
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) if x.dtype == BF16 else torch.from_numpy(x)

    return {k: convert(v) for k, v in case.items()}


@pytest.mark.parametrize(("fmt", "extra_fmt"), PAIRS[:2])
def test_torch_op_v4_decode_equals_the_reference_and_the_python_function(fmt, extra_fmt):
    torch, ops = torch_ops()
    case = decode_case(fmt, extra_fmt)
    t = as_torch(torch, case)
    out, lse = ops.sparse_mla_decode(
        fmt,
        t["q"],
        t["cache"],
        t["indices"],
        t["topk_len"],
        0.05,
        attn_sink=t["attn_sink"],
        extra_format=extra_fmt,
        extra_kv_cache=t["extra_kv_cache"],
        extra_indices=t["extra_indices"],
        extra_topk_len=t["extra_topk_len"],
    )
    assert out.dtype == torch.bfloat16 and out.shape == (3, 16, 512) and lse.dtype == torch.float32
    assert_close(out.float().numpy(), lse.numpy(), *expected(fmt, extra_fmt, case, 0.05))
    c = dict(t)
    want, want_lse = mlakv.sparse_mla_decode(
        fmt, c.pop("q"), c.pop("cache"), c.pop("indices"), sm_scale=0.05, extra_format=extra_fmt, **c
    )
    assert torch.equal(out, want) and torch.equal(lse, want_lse)
    # test_aot_dispatch_dynamic hands the op contiguous clones, which drop a block-planar page's padding.
    planar = "block_planar" in (FORMATS[f]["page"]["kind"] for f in (fmt, extra_fmt))
    torch.library.opcheck(
        ops.sparse_mla_decode,
        (fmt, t["q"], t["cache"], t["indices"], t["topk_len"], 0.05),
        {k: t[k] for k in ("attn_sink", "extra_kv_cache", "extra_indices", "extra_topk_len")}
        | {"extra_format": extra_fmt},
        test_utils=("test_schema", "test_faketensor") + (() if planar else ("test_aot_dispatch_dynamic",)),
    )


def test_a_compiled_write_and_decode_keep_the_padded_v4_pages_stride():
    torch, ops = torch_ops()
    fmt = "fp8_ds_mla_v4"
    case = as_torch(torch, decode_case(fmt, fmt, seed=7))
    g = torch.Generator().manual_seed(8)
    kv_c, k_pe = torch.randn(8, 448, generator=g).to(torch.bfloat16), torch.randn(8, 64, generator=g).to(torch.bfloat16)

    def step(kv_c, k_pe, cache, slots, q, indices):
        ops.concat_and_cache_mla(kv_c, k_pe, cache, slots, fmt, None)
        return ops.sparse_mla_decode(fmt, q, cache, indices)

    def args():
        page = mlakv.page_bytes(fmt, BLOCK)  # the engine's view of padded pages
        cache = torch.zeros(4 * page, dtype=torch.uint8).as_strided((4, BLOCK, 584), (page, 584, 1))
        return kv_c, k_pe, cache, torch.arange(8), case["q"], case["indices"]

    eager_args, compiled_args = args(), args()
    want = step(*eager_args)
    got = torch.compile(step, fullgraph=True, backend="aot_eager", dynamic=True)(*compiled_args)
    assert compiled_args[2].stride() == eager_args[2].stride() == (mlakv.page_bytes(fmt, BLOCK), 584, 1)
    assert torch.equal(compiled_args[2], eager_args[2])
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_torch_op_and_its_fake_refuse_bad_v4_arguments_as_the_python_function_does():
    torch, ops = torch_ops()
    from torch._subclasses.fake_tensor import FakeTensorMode

    fmt = "fp8_ds_mla_v41"
    case = decode_case(fmt, fmt)
    t = as_torch(torch, case)
    for kwargs, error, message in refusals(case):
        kwargs = {k: v if isinstance(v, str) else as_torch(torch, {k: v})[k] for k, v in kwargs.items()}
        with pytest.raises(error, match=message):
            ops.sparse_mla_decode(fmt, t["q"], t["cache"], t["indices"], **kwargs)
        with FakeTensorMode() as mode, pytest.raises(error, match=message):
            fake = {k: v if isinstance(v, str) else mode.from_tensor(v) for k, v in kwargs.items()}
            ops.sparse_mla_decode(fmt, *(mode.from_tensor(t[k]) for k in ("q", "cache", "indices")), **fake)


def test_torch_fake_decode_of_a_512_query_has_the_real_shapes():
    torch, ops = torch_ops()
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fake = mode.from_tensor
        out, lse = ops.sparse_mla_decode(
            "fp8_ds_mla_v41",
            fake(torch.zeros(5, 64, 512, dtype=torch.bfloat16)),
            fake(torch.zeros(2, 64, 528, dtype=torch.uint8)),
            fake(torch.zeros(5, 7, dtype=torch.int32)),
            attn_sink=fake(torch.zeros(64, dtype=torch.float32)),
            extra_format="nvfp4_ds_mla_v41",
            extra_kv_cache=fake(torch.zeros(2, 64, 288, dtype=torch.uint8)),
            extra_indices=fake(torch.zeros(5, 3, dtype=torch.int32)),
        )
        assert out.shape == (5, 64, 512) and out.dtype == torch.bfloat16
        assert lse.shape == (5, 64) and lse.dtype == torch.float32
