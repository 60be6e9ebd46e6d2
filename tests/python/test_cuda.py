# SPDX-License-Identifier: Apache-2.0
"""The CUDA backend through Python: torch and CuPy tensors via DLPack give the CPU path's bytes.
Skipped without a CUDA device."""

from __future__ import annotations

import numpy as np
import pytest

import mlakv
from conftest import BF16, random_inputs
from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

RECORD_BYTES = {f["id"]: f["record_bytes"] for f in mlakv.formats() if f["geometry"]["nope_dims"] == 512}
ENGINE = {"bf16": "auto", "fp16": "auto"}


def to_torch(a: np.ndarray, device: str = "cuda") -> torch.Tensor:
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(a).to(device)


def cpu_write(fmt: str, kv_c, k_pe, slots, scale, cache_shape) -> np.ndarray:
    cache = np.zeros(cache_shape, dtype=np.uint8)
    if fmt.startswith("nvfp4_ds_mla_fp8_rope"):
        concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, slots, scale, per_token_scale=fmt.endswith("pts"))
    else:
        mlakv.concat_and_cache_mla(kv_c, k_pe, cache, slots, ENGINE.get(fmt, fmt), scale)
    return cache


@pytest.mark.parametrize("fmt", sorted(RECORD_BYTES))
def test_torch_cuda_writer_matches_cpu_bytes(fmt):
    dtype = np.float16 if fmt == "fp16" else BF16
    kv_c, k_pe = random_inputs(200, dtype, seed=7)
    kv_c[3, 5] = np.nan
    k_pe[4, 1] = np.inf
    slots = np.random.default_rng(1).permutation(256)[:200].astype(np.int64)
    slots[7] = -1
    shape = (16, 16, RECORD_BYTES[fmt])
    want = cpu_write(fmt, kv_c, k_pe, slots, 0.5, shape)
    cache = torch.zeros(shape, dtype=torch.uint8, device="cuda")
    scale = torch.tensor([0.5], device="cuda")  # k_scale on the device, read by the kernel
    if fmt.startswith("nvfp4_ds_mla_fp8_rope"):
        concat_and_cache_nvfp4_mla_fp8_rope(
            to_torch(kv_c), to_torch(k_pe), cache, to_torch(slots), scale, per_token_scale=fmt.endswith("pts")
        )
    else:
        mlakv.concat_and_cache_mla(
            to_torch(kv_c), to_torch(k_pe)[:, None, :], cache, to_torch(slots), ENGINE.get(fmt, fmt), scale
        )
    torch.cuda.synchronize()
    np.testing.assert_array_equal(cache.cpu().numpy(), want)


def test_cupy_arrays_match_cpu_bytes():
    cupy = pytest.importorskip("cupy")
    kv_c, k_pe = random_inputs(64, np.float16, seed=3)
    slots = np.arange(64, dtype=np.int64)
    want = cpu_write("nvfp4_ds_mla_fp8_rope", kv_c, k_pe, slots, None, (1, 64, 368))
    cache = cupy.zeros((1, 64, 368), dtype=cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    concat_and_cache_nvfp4_mla_fp8_rope(
        cupy.asarray(kv_c), cupy.asarray(k_pe), cache, cupy.asarray(slots), stream=stream
    )
    stream.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(cache), want)


@pytest.mark.parametrize("fmt", ["nvfp4_ds_mla_fp8_rope", "fp8_ds_mla", "nvfp4_fp8_ds_mla", "bf16"])
def test_cuda_readers_match_cpu(fmt):
    kv_c, k_pe = random_inputs(64, BF16, seed=5)
    slots = np.arange(64, dtype=np.int64)
    records = cpu_write(fmt, kv_c, k_pe, slots, 1.0, (4, 16, RECORD_BYTES[fmt]))
    query = np.array([3, -1, 63, 64, 17], dtype=np.int64)
    want_kv, want_pe = mlakv.gather_records(fmt, records, query)
    gpu_cache = torch.from_numpy(records).cuda()
    kv, pe = mlakv.gather_records(fmt, gpu_cache, to_torch(query))
    assert kv.is_cuda and kv.dtype == torch.float32
    np.testing.assert_array_equal(kv.cpu().numpy(), want_kv)
    np.testing.assert_array_equal(pe.cpu().numpy(), want_pe)
    # bf16 [N, 576] prefill layout, and the paged reader over two sequences.
    out = torch.empty((5, 576), dtype=torch.bfloat16, device="cuda")
    mlakv.gather_records(fmt, gpu_cache, to_torch(query), out=out)
    cpu_out = np.empty((5, 576), dtype=BF16)
    mlakv.gather_records(fmt, records, query, out=cpu_out)
    np.testing.assert_array_equal(out.cpu().view(torch.int16).numpy(), cpu_out.view(np.int16))
    table = np.array([[3, 0], [1, 2]], dtype=np.int32)
    lens = np.array([20, 9], dtype=np.int32)
    cu = np.array([0, 20, 29], dtype=np.int32)
    want = mlakv.gather_records_paged(fmt, records, table, lens, cu)
    got = mlakv.gather_records_paged(fmt, gpu_cache, to_torch(table), to_torch(lens), to_torch(cu), num_rows=29)
    np.testing.assert_array_equal(got.cpu().view(torch.int16).numpy(), want.view(np.int16))


def test_writer_is_captured_in_a_torch_cuda_graph_on_its_current_stream():
    kv_c = torch.zeros((32, 512), dtype=torch.bfloat16, device="cuda")
    k_pe = torch.zeros((32, 64), dtype=torch.bfloat16, device="cuda")
    slots = torch.arange(32, device="cuda")
    cache = torch.zeros((1, 32, 368), dtype=torch.uint8, device="cuda")
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, slots)  # warm-up outside capture
        with torch.cuda.graph(graph):
            concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, slots)
    a, b = random_inputs(32, BF16, seed=9)
    kv_c.copy_(to_torch(a))
    k_pe.copy_(to_torch(b))
    graph.replay()
    torch.cuda.synchronize()
    want = cpu_write("nvfp4_ds_mla_fp8_rope", a, b, np.arange(32, dtype=np.int64), None, (1, 32, 368))
    np.testing.assert_array_equal(cache.cpu().numpy(), want)


def test_capabilities_list_the_cuda_backend():
    cuda = {(c["format"], c["arch"]) for c in mlakv.capabilities() if c["backend"] == "cuda"}
    assert ("nvfp4_ds_mla_fp8_rope", "sm_90") in cuda


@pytest.mark.parametrize("fmt", ["nvfp4_ds_mla_fp8_rope", "fp8_ds_mla", "bf16"])
@pytest.mark.parametrize("use_workspace", [False, True])
def test_torch_sparse_mla_decode_matches_cpu(fmt, use_workspace):
    tokens = 512
    kv_c, k_pe = random_inputs(tokens, BF16, seed=9)
    cache = cpu_write(fmt, kv_c, k_pe, np.arange(tokens), 1.0, (tokens // 64, 64, RECORD_BYTES[fmt]))
    rng = np.random.default_rng(5)
    q = rng.standard_normal((3, 32, 576)).astype(np.float32).astype(BF16)
    indices = rng.integers(-1, tokens + 5, size=(3, 300)).astype(np.int32)
    topk_len = np.array([300, 17, 0], np.int32)
    out, lse = mlakv.sparse_mla_decode(fmt, q, cache, indices, topk_len=topk_len)
    tq, tindices = to_torch(q), to_torch(indices)
    workspace = mlakv.sparse_mla_workspace(tq, tindices) if use_workspace else None
    gout, glse = mlakv.sparse_mla_decode(
        fmt, tq, to_torch(cache), tindices, topk_len=to_torch(topk_len), workspace=workspace
    )
    torch.cuda.synchronize()
    assert gout.dtype == torch.bfloat16 and glse.dtype == torch.float32
    ref = out.astype(np.float32)
    scale = float(np.abs(kv_c.astype(np.float32)).max())
    np.testing.assert_allclose(gout.float().cpu().numpy(), ref, rtol=2**-8, atol=scale * 2**-8)
    np.testing.assert_allclose(glse.cpu().numpy(), lse, rtol=1e-3, atol=1e-3)


def test_torch_sparse_mla_decode_is_capturable_in_a_cuda_graph():
    tokens = 1024
    kv_c, k_pe = random_inputs(tokens, BF16, seed=3)
    cache = to_torch(cpu_write("nvfp4_ds_mla", kv_c, k_pe, np.arange(tokens), 1.0, (16, 64, 432)))
    q = torch.randn(2, 64, 576, device="cuda").to(torch.bfloat16)
    indices = torch.randint(0, tokens, (2, 512), device="cuda", dtype=torch.int32)
    out = torch.empty(2, 64, 512, device="cuda", dtype=torch.bfloat16)
    lse = torch.empty(2, 64, device="cuda", dtype=torch.float32)
    workspace = mlakv.sparse_mla_workspace(q, indices)
    mlakv.sparse_mla_decode("nvfp4_ds_mla", q, cache, indices, out=out, lse=lse, workspace=workspace)
    eager = out.clone()
    out.zero_()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mlakv.sparse_mla_decode("nvfp4_ds_mla", q, cache, indices, out=out, lse=lse, workspace=workspace)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)
