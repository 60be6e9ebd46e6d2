# SPDX-License-Identifier: Apache-2.0
"""torch.ops.mlakv.* (mlakv.torch): opcheck of every op over every format, fake implementations that
refuse what the real call refuses, torch.compile(fullgraph=True) of writer -> reader -> decode ->
merge with no graph break, the engine drop-in cases, and CUDA-graph capture. CPU tensors here; the
same tests run on CUDA tensors where a device is present. Skipped without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mlakv
from conftest import error_of

torch = pytest.importorskip("torch")
mlakv_torch = pytest.importorskip("mlakv.torch")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

ops = torch.ops.mlakv
FORMATS = {f["id"]: f for f in mlakv.formats()}
TOKEN_MAJOR = [k for k, f in FORMATS.items() if f["geometry"]["nope_dims"] == 512]  # what the decode reads
COMPACT = ("nvfp4_ds_mla_fp8_rope", "nvfp4_ds_mla_fp8_rope_pts")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def inputs(fmt: str, tokens: int, device: str, seed: int = 0):
    """kv_c [T, nope], k_pe [T, 1, rope] (vLLM's view) in the format's input dtype."""
    g = torch.Generator().manual_seed(seed)
    nope, rope = FORMATS[fmt]["geometry"]["nope_dims"], FORMATS[fmt]["geometry"]["rope_dims"]
    dtype = torch.float16 if fmt == "fp16" else torch.bfloat16
    kv_c = (torch.randn(tokens, nope, generator=g) * 0.5).to(dtype).to(device)
    k_pe = torch.randn(tokens, 1, rope, generator=g).to(dtype).to(device)
    return kv_c, k_pe


def cache_for(fmt: str, blocks: int, device: str) -> torch.Tensor:
    """[blocks, 64, record_bytes] uint8: token-major dense, DeepSeek V4's page as the engine's padded view."""
    record = FORMATS[fmt]["record_bytes"]
    if FORMATS[fmt]["page"]["kind"] == "block_planar":
        page = -(-64 * record // 576) * 576
        pages = torch.zeros(blocks * page, dtype=torch.uint8, device=device)
        return pages.as_strided((blocks, 64, record), (page, record, 1))
    return torch.zeros(blocks, 64, record, dtype=torch.uint8, device=device)


def scale_for(fmt: str, device: str):
    return torch.ones(1, dtype=torch.float32, device=device) if fmt == "fp8_e4m3" else None


def written(fmt: str, tokens: int, device: str):
    kv_c, k_pe = inputs(fmt, tokens, device)
    cache = cache_for(fmt, 2, device)
    slots = torch.arange(tokens, device=device)
    ops.concat_and_cache_mla(kv_c, k_pe, cache, slots, fmt, scale_for(fmt, device))
    return kv_c, k_pe, cache, slots


# --- the two registrations (mlakv/_torch_ops.so, or mlakv.torch's Python kernels) --------------------------------


def test_every_op_has_the_schema_mlakv_torch_states():
    """Under either registration: the C++ extension's schemas are mlakv.torch's, op by op."""
    assert len(mlakv_torch._SCHEMAS) == 12
    for name, schema in mlakv_torch._SCHEMAS.items():
        assert str(getattr(ops, name).default._schema) == str(torch._C.parse_schema(f"mlakv::{schema}")), name


def test_the_cpp_registration_is_used_when_installed_unless_turned_off():
    built = (Path(mlakv_torch.__file__).parent / "_torch_ops.so").exists()
    choice = os.environ.get("MLAKV_TORCH_OPS", "")
    assert mlakv_torch.REGISTRATION == ("python" if choice == "python" or not built else "cpp")


# Both registrations in fresh processes: schemas, the bytes and values each op gives, and the errors.
_COMPARE = """
import json, torch, mlakv.torch
ops = torch.ops.mlakv
report = {"registration": mlakv.torch.REGISTRATION}
report["schemas"] = {n: str(getattr(ops, n).default._schema) for n in sorted(mlakv.torch._SCHEMAS)}
g = torch.Generator().manual_seed(3)
kv_c = torch.randn(6, 512, generator=g).to(torch.bfloat16)
k_pe = torch.randn(6, 1, 64, generator=g).to(torch.bfloat16)
slots = torch.tensor([0, 3, -1, 70, 5, 64])
def errors(*calls):
    out = []
    for call in calls:
        try:
            call()
            out.append(None)
        except Exception as e:
            out.append([type(e).__name__, str(e)])
    return out
for fmt in ("fp8_ds_mla", "nvfp4_ds_mla_fp8_rope", "fp8_ds_mla_v41"):
    width = next(f["record_bytes"] for f in mlakv.formats() if f["id"] == fmt)
    nope = 448 if fmt.endswith("v41") else 512
    cache = torch.zeros(2, 64, width, dtype=torch.uint8)
    ops.concat_and_cache_mla(kv_c[:, :nope].contiguous(), k_pe, cache, slots, fmt, None)
    kv, pe = ops.gather_records(fmt, cache, slots, dtype=torch.bfloat16)
    i32 = {"dtype": torch.int32}
    paged = ops.gather_records_paged(fmt, cache, torch.tensor([[1, 0]], **i32), torch.tensor([70], **i32),
                                     torch.tensor([0, 70], **i32), 72)
    report[fmt] = [cache.sum().item(), kv.float().sum().item(), pe.float().sum().item(), paged.float().sum().item()]
cache = torch.zeros(2, 64, 368, dtype=torch.uint8)
ops.mla_kv_cache_writer_update(kv_c, k_pe, cache, slots[:, None], "nvfp4_ds_mla", None, "nvfp4_ds_mla", True, False)
q = torch.randn(2, 16, 576, generator=g).to(torch.bfloat16)
idx = torch.tensor([[0, 3, 70, -1], [5, -1, 64, 3]], dtype=torch.int32)
out, lse = ops.sparse_mla_decode("nvfp4_ds_mla_fp8_rope", q, cache, idx, None, 0.1)
merged, merged_lse = ops.merge_attention_states(out.float(), lse, out.float(), lse)
report["decode"] = [cache.sum().item(), out.float().sum().item(), lse.sum().item(), merged.sum().item()]
prefill, prefill_lse = ops.sparse_mla_prefill("nvfp4_ds_mla_fp8_rope", q, cache, idx, None, 0.1)
report["prefill"] = [prefill.float().sum().item(), prefill_lse.sum().item()]
report["workspace"] = ops.sparse_mla_decode_workspace_size(4, 16, 2048, torch.device("cpu"))
cp_idx = torch.tensor([[0, 1, 64, 130, -1], [63, 127, 200, 5, 64]], dtype=torch.int32)
req, table = torch.zeros(2, dtype=torch.int32), torch.tensor([[1, 0, 3, 2]], dtype=torch.int32)
local = ops.dcp_local_slots(cp_idx, req, table, world_size=2, rank=1, block_size=64, interleave=16)
stacked, stacked_lse = ops.merge_attention_states_stacked(torch.stack([out.float(), merged]), torch.stack([lse, lse]))
report["context_parallel"] = [local.tolist(), stacked.sum().item(), stacked_lse.sum().item()]
report["errors"] = errors(
    lambda: ops.concat_and_cache_mla(kv_c.float(), k_pe, cache, slots, "fp8_ds_mla", None),
    lambda: ops.concat_and_cache_mla(kv_c, k_pe, cache, slots, "fp7", None),
    lambda: ops.concat_and_cache_mla(kv_c, k_pe, cache, slots, "fp8_e5m2", torch.ones(1)),
    lambda: ops.concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache[..., :100], slots, None, False),
    lambda: ops.mla_kv_cache_writer_update(kv_c, k_pe, cache, slots, "fp8", None, "nvfp4_ds_mla", True, False),
    lambda: ops.gather_records("fp8_ds_mla", cache, slots),
    lambda: ops.gather_records("fp8_ds_mla", cache, slots, dtype=torch.float16),
    lambda: ops.gather_records("fp7", cache, slots),
    lambda: ops.gather_records_out("nvfp4_ds_mla_fp8_rope", cache, slots, torch.empty(5, 576)),
    lambda: ops.gather_records_out("nvfp4_ds_mla_fp8_rope", cache, slots, torch.empty(6)),
    lambda: ops.gather_records_paged("nvfp4_ds_mla_fp8_rope", cache, idx, idx[0], idx[0], -1),
    lambda: ops.sparse_mla_decode("nvfp4_ds_mla_fp8_rope", q[..., :512], cache, idx),
    lambda: ops.sparse_mla_decode("nvfp4_ds_mla_fp8_rope", q, cache, idx.long()),
    lambda: ops.sparse_mla_prefill("nvfp4_ds_mla_fp8_rope", q[..., :512], cache, idx),
    lambda: ops.merge_attention_states(out, lse, out[:1], lse[:1]),
    lambda: ops.sparse_mla_decode_workspace_size(-1, 16, 2048, torch.device("cpu")),
    lambda: ops.concat_and_cache_mla(kv_c[None, None, None], k_pe, cache, slots, "fp8_ds_mla", None),
    lambda: ops.dcp_local_slots(cp_idx, req, table, world_size=2, rank=2, block_size=64),
    lambda: ops.dcp_local_slots(cp_idx.long(), req, table, world_size=2, rank=0, block_size=64),
    lambda: ops.merge_attention_states_stacked(torch.stack([out, out]), lse[None]),
    lambda: ops.gather_records("fp8_ds_mla", cache, slots.to("meta")),
    lambda: ops.concat_and_cache_mla(kv_c, k_pe, cache, slots, "fp8", torch.ones(1, device="meta")),
    lambda: ops.gather_records_paged("nvfp4_ds_mla_fp8_rope", cache, idx, idx[0], idx[0], 2**40),
    lambda: ops.concat_and_cache_mla(kv_c, k_pe, cache, slots, "fp8\\0", None),
)
print(json.dumps(report))
"""


@pytest.mark.skipif(
    not (Path(mlakv_torch.__file__).parent / "_torch_ops.so").exists(), reason="mlakv built without the C++ torch ops"
)
def test_cpp_and_python_registrations_give_the_same_schemas_results_and_errors():
    reports = {}
    for choice in ("cpp", "python"):
        env = {**os.environ, "MLAKV_TORCH_OPS": choice}
        run = subprocess.run([sys.executable, "-c", _COMPARE], capture_output=True, text=True, env=env)
        assert run.returncode == 0, run.stderr
        reports[choice] = json.loads(run.stdout)
        assert reports[choice].pop("registration") == choice
    assert reports["cpp"]["errors"].count(None) == 0, reports["cpp"]["errors"]
    assert reports["cpp"] == reports["python"]


def opcheck(op, args, kwargs=None, planar=False):
    # test_autograd_registration needs inputs that require grad; these ops take none. test_aot_dispatch_dynamic
    # hands the op contiguous clones of its inputs, which drop a block-planar cache's padded page stride (the
    # library refuses a block stride below page_bytes); torch.compile itself keeps it (test_v4_decode.py).
    utils = ("test_schema", "test_faketensor") + (() if planar else ("test_aot_dispatch_dynamic",))
    torch.library.opcheck(op, args, kwargs or {}, test_utils=utils)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_opcheck_writer_and_readers(fmt, device):
    kv_c, k_pe, cache, slots = written(fmt, 8, device)
    planar = FORMATS[fmt]["page"]["kind"] == "block_planar"
    opcheck(ops.concat_and_cache_mla, (kv_c, k_pe, cache, slots, fmt, scale_for(fmt, device)), planar=planar)
    if fmt in COMPACT:
        opcheck(
            ops.concat_and_cache_nvfp4_mla_fp8_rope,
            (kv_c, k_pe, cache, slots, None, fmt.endswith("pts")),
            planar=planar,
        )
    opcheck(ops.gather_records, (fmt, cache, slots), {"scale": scale_for(fmt, device)}, planar=planar)
    opcheck(
        ops.gather_records,
        (fmt, cache, slots),
        {"scale": scale_for(fmt, device), "dtype": torch.bfloat16},
        planar=planar,
    )
    width = sum(FORMATS[fmt]["geometry"][k] for k in ("nope_dims", "rope_dims"))
    prefill = torch.empty(8, width, dtype=torch.bfloat16, device=device)
    opcheck(ops.gather_records_out, (fmt, cache, slots, prefill), {"scale": scale_for(fmt, device)}, planar=planar)
    i32 = {"dtype": torch.int32, "device": device}
    table, lens, cu = torch.tensor([[0, 1]], **i32), torch.tensor([8], **i32), torch.tensor([0, 8], **i32)
    opcheck(
        ops.gather_records_paged, (fmt, cache, table, lens, cu, 8), {"scale": scale_for(fmt, device)}, planar=planar
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", TOKEN_MAJOR)
def test_opcheck_decode_and_merge(fmt, device):
    _, _, cache, _ = written(fmt, 8, device)
    q = torch.randn(2, 16, 576).to(torch.bfloat16).to(device)
    idx = torch.tensor([[0, 1, 7, -1], [3, -1, 5, 2]], dtype=torch.int32, device=device)
    opcheck(ops.sparse_mla_decode, (fmt, q, cache, idx), {"scale": scale_for(fmt, device)})
    lens = torch.tensor([2, 4], dtype=torch.int32, device=device)
    opcheck(ops.sparse_mla_decode, (fmt, q, cache, idx, lens, 0.1), {"scale": scale_for(fmt, device)})
    out, lse = ops.sparse_mla_decode(fmt, q, cache, idx, scale=scale_for(fmt, device))
    opcheck(ops.merge_attention_states, (out, lse, out, lse))
    opcheck(ops.merge_attention_states, (out.float(), lse, out.float(), lse))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fp8_rope", [False, True])
def test_opcheck_the_vllm_seams_write(device, fp8_rope):
    fmt = "nvfp4_ds_mla_fp8_rope" if fp8_rope else "nvfp4_ds_mla"
    kv_c, k_pe = inputs(fmt, 8, device)
    slots = torch.arange(8, device=device)[:, None]
    seam = ("nvfp4_ds_mla", fp8_rope, False)
    opcheck(ops.mla_kv_cache_writer_update, (kv_c, k_pe, cache_for(fmt, 1, device), slots, "nvfp4_ds_mla", None, *seam))


@pytest.mark.parametrize("device", DEVICES)
def test_workspace_size_op_and_a_decode_through_the_workspace(device):
    q = torch.randn(4, 16, 576).to(torch.bfloat16).to(device)
    size = ops.sparse_mla_decode_workspace_size(4, 16, 2048, q.device)
    assert size == mlakv.sparse_mla_decode_workspace_size(4, 16, 2048, q)
    assert (size == 0) == (device == "cpu")
    fmt = "nvfp4_ds_mla_fp8_rope"
    _, _, cache, _ = written(fmt, 64, device)
    idx = torch.randint(-1, 128, (4, 2048), dtype=torch.int32, generator=torch.Generator().manual_seed(2)).to(device)
    workspace = torch.empty(max(size, 16), dtype=torch.uint8, device=device)
    opcheck(ops.sparse_mla_decode, (fmt, q, cache, idx), {"workspace": workspace})
    out, lse = ops.sparse_mla_decode(fmt, q, cache, idx, workspace=workspace)
    want_out, want_lse = mlakv.sparse_mla_decode(fmt, q, cache, idx, workspace=workspace)
    assert torch.equal(out, want_out) and torch.equal(lse, want_lse)


@pytest.mark.parametrize("device", DEVICES)
def test_ops_give_the_python_functions_results(device):
    fmt = "nvfp4_ds_mla_fp8_rope"
    kv_c, k_pe, cache, slots = written(fmt, 8, device)
    want = torch.zeros_like(cache)
    mlakv.concat_and_cache_mla(kv_c, k_pe, want, slots, fmt)
    assert torch.equal(cache, want)
    compact = torch.zeros_like(cache)
    ops.concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, compact, slots)
    assert torch.equal(compact, want)
    kv, pe = ops.gather_records(fmt, cache, slots)
    kv_want, pe_want = mlakv.gather_records(fmt, cache, slots)
    assert torch.equal(kv, kv_want) and torch.equal(pe, pe_want) and kv.dtype == torch.float32
    prefill = torch.empty(8, 576, dtype=torch.bfloat16, device=device)
    ops.gather_records_out(fmt, cache, slots, prefill)
    assert torch.equal(prefill, torch.cat([kv, pe], 1).to(torch.bfloat16))
    with pytest.raises(ValueError, match=r"out: shape must be \(N, 576\) with N = len\(slots\) = 8, got \(7, 576\)$"):
        ops.gather_records_out(fmt, cache, slots, prefill[:7])
    q = torch.randn(2, 16, 576).to(torch.bfloat16).to(device)
    idx = torch.tensor([[0, 1, 7, -1], [3, -1, 5, 2]], dtype=torch.int32, device=device)
    out, lse = ops.sparse_mla_decode(fmt, q, cache, idx)
    out_want, lse_want = mlakv.sparse_mla_decode(fmt, q, cache, idx)
    assert torch.equal(out, out_want) and torch.equal(lse, lse_want)
    i32 = {"dtype": torch.int32, "device": device}
    table, lens, cu = torch.tensor([[1, 0]], **i32), torch.tensor([70], **i32), torch.tensor([0, 70], **i32)
    paged = ops.gather_records_paged(fmt, cache, table, lens, cu, 72)
    paged_want = mlakv.gather_records_paged(fmt, cache, table, lens, cu, num_rows=72)
    assert torch.equal(paged, paged_want) and paged.shape == (72, 576) and paged.dtype == torch.float32  # the default
    merged, merged_lse = ops.merge_attention_states(out, lse, out, lse)
    want_out, want_lse = mlakv.merge_attention_states(out, lse, out, lse)
    assert torch.equal(merged, want_out) and torch.equal(merged_lse, want_lse)


def bad_writer_calls(device: str):
    """(name, args) of stock-writer calls the library refuses."""
    kv_c, k_pe = inputs("fp8_ds_mla", 4, device)
    cache = torch.zeros(2, 64, 656, dtype=torch.uint8, device=device)
    slots = torch.arange(4, device=device)
    return [
        (
            "100-byte record",
            (kv_c, k_pe, torch.zeros(2, 64, 100, dtype=torch.uint8, device=device), slots, "fp8_ds_mla"),
        ),
        ("float32 kv_c", (kv_c.float(), k_pe.float(), cache, slots, "fp8_ds_mla")),
        ("unknown format", (kv_c, k_pe, cache, slots, "fp7")),
        ("k_pe width", (kv_c, k_pe[..., :32], cache, slots, "fp8_ds_mla")),
        ("int32 slots", (kv_c, k_pe, cache, slots.int(), "fp8_ds_mla")),
        ("fp8 without scale", (kv_c, k_pe, torch.zeros(2, 64, 576, dtype=torch.uint8, device=device), slots, "fp8")),
    ]


# --- context parallel: dcp_local_slots and the N-way merge ----------------------------------------------------------


def context_parallel_args(device: str):
    """Rank 0 of 2 (block size 64): a block table of one request, 2 rows of positions, 3 partials to merge."""
    i32 = {"dtype": torch.int32, "device": device}
    indices = torch.tensor([[0, 1, 64, 130, -1], [63, 127, 200, 5, 64]], **i32)
    req_id, block_table = torch.zeros(2, **i32), torch.tensor([[1, 0, 3, 2]], **i32)
    g = torch.Generator().manual_seed(8)
    outs = torch.randn(3, 2, 16, 512, generator=g).to(device)
    lses = torch.randn(3, 2, 16, generator=g).to(device)
    lses[1, 0] = float("-inf")
    return indices, req_id, block_table, outs, lses


LAYOUT = {"world_size": 2, "rank": 0, "block_size": 64}


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_context_parallel(device):
    indices, req_id, block_table, outs, lses = context_parallel_args(device)
    opcheck(ops.dcp_local_slots, (indices, req_id, block_table), LAYOUT)
    opcheck(ops.dcp_local_slots, (indices, req_id, block_table), {**LAYOUT, "rank": 1, "interleave": 16})
    opcheck(ops.merge_attention_states_stacked, (outs, lses))
    opcheck(ops.merge_attention_states_stacked, (outs.to(torch.bfloat16), lses))


@pytest.mark.parametrize("device", DEVICES)
def test_context_parallel_ops_give_the_python_functions_results(device):
    from mlakv import context_parallel as cp

    indices, req_id, block_table, outs, lses = context_parallel_args(device)
    for layout in (LAYOUT, {**LAYOUT, "rank": 1}, {**LAYOUT, "rank": 1, "interleave": 16}):
        got = ops.dcp_local_slots(indices, req_id, block_table, **layout)
        want = cp.dcp_local_slots(indices, req_id, block_table, **layout)
        assert got.dtype == torch.int32 and torch.equal(got, want), layout
    assert (ops.dcp_local_slots(indices, req_id, block_table, **LAYOUT) >= 0).sum() > 0  # some local, some not
    out, lse = ops.merge_attention_states_stacked(outs, lses)
    out_want, lse_want = cp.merge_attention_states(outs, lses)
    assert out.shape == (2, 16, 512) and lse.shape == (2, 16)
    assert torch.equal(out, out_want) and torch.equal(lse, lse_want)


@pytest.mark.parametrize("device", DEVICES)
def test_fake_context_parallel_ops_refuse_what_the_real_calls_refuse(device):
    indices, req_id, block_table, outs, lses = context_parallel_args(device)
    calls = [
        (ops.dcp_local_slots, (indices, req_id, block_table), {**LAYOUT, "rank": 2}),
        (ops.dcp_local_slots, (indices, req_id, block_table), {**LAYOUT, "interleave": 3}),
        (ops.dcp_local_slots, (indices.long(), req_id, block_table), LAYOUT),
        (ops.dcp_local_slots, (indices, req_id[:1], block_table), LAYOUT),
        (ops.merge_attention_states_stacked, (outs, lses[:2]), {}),
        (ops.merge_attention_states_stacked, (outs.half(), lses), {}),
    ]
    for op, args, kwargs in calls:
        real = error_of(op, *args, **kwargs)
        assert real is not None, (op, args, kwargs)
        with FakeTensorMode() as mode:
            fake_args = [mode.from_tensor(a) for a in args]
            fake = error_of(op, *fake_args, **kwargs)
        assert fake == real, (op, args, kwargs)


@pytest.mark.parametrize("device", DEVICES)
def test_context_parallel_step_compiles_with_no_graph_break(device):
    fmt = "nvfp4_ds_mla_fp8_rope"
    _, _, cache, _ = written(fmt, 8, device)
    q = torch.randn(2, 16, 576).to(torch.bfloat16).to(device)
    indices, req_id, block_table, _, _ = context_parallel_args(device)

    def step(q, cache, indices, req_id, block_table):
        slots = ops.dcp_local_slots(indices, req_id, block_table, **LAYOUT)
        out, lse = ops.sparse_mla_decode(fmt, q, cache, slots)
        return ops.merge_attention_states_stacked(torch.stack([out, out]), torch.stack([lse, lse]))

    args = (q, cache, indices, req_id, block_table)
    explanation = torch._dynamo.explain(step)(*args)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1, explanation.break_reasons
    want = step(*args)
    got = torch.compile(step, fullgraph=True, backend="aot_eager")(*args)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.parametrize("device", DEVICES)
def test_fake_writer_refuses_what_the_real_call_refuses(device):
    for name, args in bad_writer_calls(device):
        real = error_of(ops.concat_and_cache_mla, *args, None)
        assert real is not None, name
        with FakeTensorMode() as mode:
            fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
            fake = error_of(ops.concat_and_cache_mla, *fake_args, None)
        assert fake == real, name


@pytest.mark.parametrize("device", DEVICES)
def test_fake_readers_and_decode_refuse_what_the_real_calls_refuse(device):
    _, _, cache, slots = written("fp8_ds_mla", 8, device)
    q = torch.randn(2, 16, 576).to(torch.bfloat16).to(device)
    idx = torch.zeros(2, 4, dtype=torch.int32, device=device)
    out = torch.zeros(2, 16, 512, dtype=torch.bfloat16, device=device)
    lse = torch.zeros(2, 16, dtype=torch.float32, device=device)
    inside_cache = cache.view(-1)[: 8 * 576 * 2].view(torch.bfloat16).view(8, 576)
    calls = [
        (ops.gather_records, ("nvfp4_ds_mla", cache, slots), {}),  # 656-byte cache, 432-byte format
        (ops.gather_records, ("fp8_ds_mla", cache, slots.int()), {}),
        (ops.gather_records, ("fp8_ds_mla", cache, slots), {"dtype": torch.float16}),
        (ops.gather_records, ("fp8_ds_mla", cache, slots), {"rope_dtype": "fp32"}),
        (ops.gather_records_out, ("fp8_ds_mla", cache, slots, torch.empty(8, 576, device=device).half()), {}),
        (ops.gather_records_out, ("fp8_ds_mla", cache, slots, inside_cache), {}),  # overlaps: same storage
        (ops.sparse_mla_decode, ("fp8_ds_mla", q[..., :512], cache, idx), {}),
        (ops.sparse_mla_decode, ("fp8_ds_mla", q, cache, idx.long()), {}),
        (ops.merge_attention_states, (out, lse, out[:1], lse[:1]), {}),
    ]
    for op, args, kwargs in calls:
        real = error_of(op, *args, **kwargs)
        assert real is not None, (op, args)
        with FakeTensorMode() as mode:
            fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
            fake = error_of(op, *fake_args, **kwargs)
        assert fake == real, (op, args)


def test_fake_outputs_have_the_real_shapes():
    kv_c, k_pe, cache, slots = written("fp8_ds_mla_v4", 8, "cpu")
    with FakeTensorMode() as mode:
        fake_cache, fake_slots = mode.from_tensor(cache), mode.from_tensor(slots)
        kv, pe = ops.gather_records("fp8_ds_mla_v4", fake_cache, fake_slots, dtype=torch.bfloat16)
        assert kv.shape == (8, 448) and pe.shape == (8, 64) and kv.dtype == torch.bfloat16
        q = mode.from_tensor(torch.zeros(3, 32, 576, dtype=torch.bfloat16))
        out, lse = ops.sparse_mla_decode(
            "fp8_ds_mla",
            q,
            mode.from_tensor(torch.zeros(1, 64, 656, dtype=torch.uint8)),
            mode.from_tensor(torch.zeros(3, 5, dtype=torch.int32)),
        )
        assert out.shape == (3, 32, 512) and out.dtype == torch.bfloat16 and lse.shape == (3, 32)


@pytest.mark.parametrize("device", DEVICES)
def test_both_reader_ops_default_to_float32(device):
    _, _, cache, slots = written("fp8_ds_mla", 8, device)
    i32 = {"dtype": torch.int32, "device": device}
    kv, pe = ops.gather_records("fp8_ds_mla", cache, slots)
    paged = ops.gather_records_paged(
        "fp8_ds_mla", cache, torch.tensor([[0]], **i32), torch.tensor([8], **i32), torch.tensor([0, 8], **i32), 8
    )
    assert kv.dtype == pe.dtype == paged.dtype == torch.float32
    assert torch.equal(paged, torch.cat([kv, pe], dim=1))


def pipeline(fmt: str):
    def run(kv_c, k_pe, cache, slots, q, idx):
        ops.concat_and_cache_mla(kv_c, k_pe, cache, slots, fmt, None)
        kv, pe = ops.gather_records(fmt, cache, slots, dtype=torch.bfloat16)
        out, lse = ops.sparse_mla_decode(fmt, q, cache, idx)
        merged, merged_lse = ops.merge_attention_states(out, lse, out, lse)
        return kv + 1, pe * 2, merged, merged_lse

    return run


def pipeline_args(fmt: str, device: str, tokens: int = 8):
    kv_c, k_pe = inputs(fmt, tokens, device, seed=5)
    g = torch.Generator().manual_seed(6)
    q = torch.randn(2, 16, 576, generator=g).to(torch.bfloat16).to(device)
    idx = torch.tensor([[0, 1, tokens - 1, -1], [3, -1, 5, 2]], dtype=torch.int32, device=device)
    return kv_c, k_pe, cache_for(fmt, 2, device), torch.arange(tokens, device=device), q, idx


@pytest.mark.parametrize("device", DEVICES)
def test_pipeline_compiles_whole_with_no_graph_break(device):
    fmt = "nvfp4_ds_mla_fp8_rope"
    run = pipeline(fmt)
    explanation = torch._dynamo.explain(run)(*pipeline_args(fmt, device))
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1, explanation.break_reasons
    eager_args, compiled_args = pipeline_args(fmt, device), pipeline_args(fmt, device)
    want = run(*eager_args)
    backend = "inductor" if device == "cuda" else "aot_eager"
    got = torch.compile(run, fullgraph=True, dynamic=True, backend=backend)(*compiled_args)
    assert torch.equal(compiled_args[2], eager_args[2]), "the compiled write gives the eager bytes"
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.parametrize("device", DEVICES)
def test_vllm_seam_compiles_with_no_graph_break_at_the_write(device):
    from mlakv.integrations.vllm import MlaKvCacheWriter

    writer = MlaKvCacheWriter("nvfp4_ds_mla", fp8_rope=True)
    kv_c, k_pe = inputs("nvfp4_ds_mla_fp8_rope", 8, device, seed=8)
    slots = torch.arange(8, device=device)[:, None]

    def forward(kv_c, k_pe, cache, slots):
        writer.update(kv_c, k_pe, cache, slots, "nvfp4_ds_mla", None)
        return kv_c * 2

    cache = torch.zeros(1, 64, 368, dtype=torch.uint8, device=device)
    explanation = torch._dynamo.explain(forward)(kv_c, k_pe, cache, slots)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.zeros_like(cache)
    torch.compile(forward, fullgraph=True, backend="aot_eager")(kv_c, k_pe, compiled, slots)
    want = torch.zeros_like(cache)
    ops.concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, want, slots)
    assert torch.equal(compiled, want) and want.any()


# --- drop-in for vLLM's concat_and_cache_mla ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_auto_takes_the_model_dtype_cache_vllm_allocates(dtype):
    fmt = "bf16" if dtype == torch.bfloat16 else "fp16"
    kv_c, k_pe = inputs(fmt, 8, "cpu")
    slots = torch.arange(8)
    typed = torch.zeros(2, 64, 576, dtype=dtype)  # vLLM's auto cache: [num_blocks, block_size, 576], model dtype
    ops.concat_and_cache_mla(kv_c, k_pe, typed, slots, "auto", None)
    assert torch.equal(typed[0, :8, :512], kv_c) and torch.equal(typed[0, :8, 512:], k_pe[:, 0])
    as_bytes = torch.zeros(2, 64, 1152, dtype=torch.uint8)
    ops.concat_and_cache_mla(kv_c, k_pe, as_bytes, slots, "auto", None)
    assert torch.equal(typed.view(torch.uint8), as_bytes)


@pytest.mark.parametrize("cache_dtype", [torch.uint8, torch.float8_e4m3fn])
def test_fp8_takes_the_uint8_or_float8_cache_vllm_allocates(cache_dtype):
    kv_c, k_pe = inputs("fp8_e4m3", 8, "cpu")
    scale = torch.tensor([0.5])
    cache = torch.zeros(2, 64, 576, dtype=cache_dtype)
    ops.concat_and_cache_mla(kv_c, k_pe, cache, torch.arange(8), "fp8", scale)
    want = torch.zeros(2, 64, 576, dtype=torch.uint8)
    mlakv.concat_and_cache_mla(kv_c, k_pe, want, torch.arange(8), "fp8_e4m3", scale)
    assert torch.equal(cache.view(torch.uint8), want) and want.any()


def test_fp8_e5m2_is_refused_naming_the_supported_set():
    kv_c, k_pe = inputs("fp8_e4m3", 2, "cpu")
    with pytest.raises(
        ValueError, match=r"kv_cache_dtype: must be an engine name \(auto, fp8, fp8_e4m3, .*got 'fp8_e5m2'"
    ):
        ops.concat_and_cache_mla(
            kv_c, k_pe, torch.zeros(1, 64, 576, dtype=torch.uint8), torch.arange(2), "fp8_e5m2", torch.ones(1)
        )


def test_float32_inputs_are_refused_naming_the_accepted_dtypes():
    kv_c, k_pe = inputs("bf16", 2, "cpu")
    with pytest.raises(TypeError, match=r"kv_c: dtype must be bf16 or fp16, got float32$"):
        ops.concat_and_cache_mla(
            kv_c.float(), k_pe.float(), torch.zeros(1, 64, 656, dtype=torch.uint8), torch.arange(2), "fp8_ds_mla", None
        )


def test_both_writers_take_k_pe_t_1_64_and_a_slot_column():
    kv_c, k_pe = inputs("nvfp4_ds_mla_fp8_rope", 8, "cpu")
    flat = torch.zeros(1, 64, 368, dtype=torch.uint8)
    ops.concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe[:, 0], flat, torch.arange(8), None, False)
    for op, extra in (
        (ops.concat_and_cache_nvfp4_mla_fp8_rope, (None, False)),
        (ops.concat_and_cache_mla, ("nvfp4_ds_mla_fp8_rope", None)),
    ):
        viewed = torch.zeros_like(flat)
        op(kv_c, k_pe, viewed, torch.arange(8)[:, None], *extra)
        assert torch.equal(viewed, flat)


# --- CUDA graphs (device) ------------------------------------------------------------------------------------------


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_pipeline_is_captured_and_replayed_in_a_cuda_graph():
    fmt = "nvfp4_ds_mla_fp8_rope"
    run = pipeline(fmt)
    args = pipeline_args(fmt, "cuda")
    want = run(*pipeline_args(fmt, "cuda"))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run(*args)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    args[2].zero_()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = run(*args)
    args[2].zero_()
    graph.replay()
    torch.cuda.synchronize()
    for g, w in zip(got, want):
        assert torch.equal(g, w)
