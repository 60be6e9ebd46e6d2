# SPDX-License-Identifier: Apache-2.0
"""The public functions on torch tensors go through torch.ops.mlakv (mlakv/_torch_route.py): a
pipeline of mlakv.* calls compiles whole (no graph break under torch._dynamo.explain), with the
results and the errors of the DLPack path (which an explicit stream keeps). CPU tensors; skipped
without torch."""

from __future__ import annotations

import pytest

import mlakv
from conftest import error_of
from mlakv import context_parallel as cp
from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

torch = pytest.importorskip("torch")
pytest.importorskip("mlakv.torch")

FMT = "nvfp4_ds_mla_fp8_rope"
I32 = {"dtype": torch.int32}
LAYOUT = {"world_size": 2, "rank": 0, "block_size": 64}


def pipeline(kv_c, k_pe, cache, slots, q, idx, block_table, seq_lens, cu_seq_lens, req_id):
    """Writers -> readers -> decode -> merges, the context-parallel steps included, as public calls."""
    mlakv.concat_and_cache_mla(kv_c, k_pe, cache, slots, FMT)
    concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, slots + 64)
    kv, pe = mlakv.gather_records(FMT, cache, slots, dtype="bfloat16")
    paged = mlakv.gather_records_paged(FMT, cache, block_table, seq_lens, cu_seq_lens, num_rows=72)
    out, lse = mlakv.sparse_mla_decode(FMT, q, cache, idx, sm_scale=0.1)
    merged, merged_lse = mlakv.merge_attention_states(out, lse, out, lse)
    local = cp.dcp_local_slots(idx, req_id, block_table, **LAYOUT)
    stacked, stacked_lse = cp.merge_attention_states(torch.stack([out, merged]), torch.stack([lse, merged_lse]))
    return kv + 1, pe * 2, paged, merged, merged_lse, local, stacked, stacked_lse


def pipeline_args():
    g = torch.Generator().manual_seed(11)
    kv_c = torch.randn(8, 512, generator=g).to(torch.bfloat16)
    k_pe = torch.randn(8, 1, 64, generator=g).to(torch.bfloat16)
    q = torch.randn(2, 16, 576, generator=g).to(torch.bfloat16)
    idx = torch.tensor([[0, 1, 7, -1], [3, -1, 70, 2]], **I32)
    table, lens, cu = torch.tensor([[1, 0]], **I32), torch.tensor([70], **I32), torch.tensor([0, 70], **I32)
    cache = torch.zeros(2, 64, 368, dtype=torch.uint8)
    return kv_c, k_pe, cache, torch.arange(8), q, idx, table, lens, cu, torch.zeros(2, **I32)


def test_a_pipeline_of_public_calls_on_torch_tensors_compiles_with_no_graph_break():
    explanation = torch._dynamo.explain(pipeline)(*pipeline_args())
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1, explanation.break_reasons
    eager_args, compiled_args = pipeline_args(), pipeline_args()
    want = pipeline(*eager_args)
    got = torch.compile(pipeline, fullgraph=True, backend="aot_eager")(*compiled_args)
    assert torch.equal(compiled_args[2], eager_args[2]), "the compiled writes give the eager bytes"
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def dlpack_path(call, *args, **kwargs):
    """The same public call through the DLPack path: an explicit stream (0, the CPU's) keeps it."""
    return call(*args, **kwargs, stream=0)


def test_public_calls_on_torch_tensors_give_the_dlpack_paths_bytes():
    kv_c, k_pe, cache, slots, q, idx, table, lens, cu, req_id = pipeline_args()
    routed, direct = torch.zeros_like(cache), torch.zeros_like(cache)
    mlakv.concat_and_cache_mla(kv_c, k_pe, routed, slots, FMT)
    dlpack_path(mlakv.concat_and_cache_mla, kv_c, k_pe, direct, slots, FMT)
    assert torch.equal(routed, direct) and routed.any()
    fp8 = torch.zeros(1, 64, 576, dtype=torch.uint8)
    mlakv.concat_and_cache_mla(kv_c, k_pe, fp8, slots, "fp8", 0.5)  # a float k_scale: a float32 CPU tensor
    fp8_direct = torch.zeros_like(fp8)
    dlpack_path(mlakv.concat_and_cache_mla, kv_c, k_pe, fp8_direct, slots, "fp8", 0.5)
    assert torch.equal(fp8, fp8_direct)
    calls = [
        (mlakv.gather_records, (FMT, routed, slots), {}),
        (mlakv.gather_records, (FMT, routed, slots), {"dtype": "bf16"}),
        (mlakv.gather_records, ("fp8_e4m3", fp8, slots), {"scale": 0.5}),
        (mlakv.gather_records_paged, (FMT, routed, table, lens, cu), {"num_rows": 72}),
        (mlakv.gather_records_paged, (FMT, routed, table, lens, cu), {}),
        (mlakv.sparse_mla_decode, (FMT, q, routed, idx), {"topk_len": torch.tensor([2, 4], **I32)}),
        (cp.dcp_local_slots, (idx, req_id, table), {**LAYOUT, "rank": 1}),
    ]
    for call, args, kwargs in calls:
        got, want = call(*args, **kwargs), dlpack_path(call, *args, **kwargs)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert g.dtype == w.dtype and torch.equal(g, w), (call.__name__, kwargs)
    prefill = torch.empty(8, 576, dtype=torch.bfloat16)
    kv, pe = mlakv.gather_records(FMT, routed, slots, out=prefill)
    assert kv.data_ptr() == prefill.data_ptr() and torch.equal(torch.cat([kv, pe], 1), prefill)


def test_public_calls_on_torch_tensors_raise_the_dlpack_paths_errors():
    kv_c, k_pe, cache, slots, q, idx, table, lens, cu, req_id = pipeline_args()
    bad = [
        (mlakv.concat_and_cache_mla, (kv_c.float(), k_pe, cache, slots, FMT), {}),
        (mlakv.concat_and_cache_mla, (kv_c, k_pe, cache, slots, "fp7"), {}),
        (mlakv.concat_and_cache_mla, (kv_c, k_pe, cache, slots, "fp8", True), {}),
        (mlakv.concat_and_cache_mla, (kv_c, k_pe, torch.zeros(1, 64, 576, dtype=torch.uint8), slots, "fp8"), {}),
        (concat_and_cache_nvfp4_mla_fp8_rope, (kv_c, k_pe, cache[..., :100], slots), {}),
        (mlakv.gather_records, ("nvfp4_ds_mla", cache, slots), {}),
        (mlakv.gather_records, (FMT, cache, slots.int()), {}),
        (mlakv.gather_records, (FMT, cache, slots), {"out": torch.empty(7, 576)}),
        (mlakv.gather_records_paged, (FMT, cache, table, lens, cu), {"num_rows": 72, "rope_dtype": "fp32"}),
        (mlakv.sparse_mla_decode, (FMT, q[..., :512], cache, idx), {}),
        (mlakv.sparse_mla_decode, (FMT, q, cache, idx.long()), {}),
        (mlakv.sparse_mla_decode, (FMT, q, cache, idx), {"attn_sink": torch.zeros(16)}),
        (mlakv.merge_attention_states, (q[..., :512], q[:, :, 0].float(), q[:1, :, :512], q[:1, :, 0].float()), {}),
        (cp.dcp_local_slots, (idx, req_id, table), {**LAYOUT, "rank": 2}),
        (cp.merge_attention_states, (torch.zeros(2, 2, 16, 512), torch.zeros(1, 2, 16)), {}),
    ]
    for call, args, kwargs in bad:
        routed = error_of(call, *args, **kwargs)
        assert routed is not None, (call.__name__, kwargs)
        assert routed == error_of(dlpack_path, call, *args, **kwargs), (call.__name__, kwargs)
