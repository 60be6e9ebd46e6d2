# SPDX-License-Identifier: Apache-2.0
"""Context-parallel decode from Python: N ranks simulated in one process (CPU),
per-rank dcp_local_slots + sparse_mla_decode + the N-way merge against one
decode over the whole cache for every format; then the torch.distributed
collectives (mlakv.distributed) with one process per rank, over gloo on the
CPU and NCCL with one process per GPU (skipped with fewer than 2 GPUs)."""

from __future__ import annotations

import importlib.util
import os
import tempfile

import numpy as np
import pytest

import mlakv
import mlakv.context_parallel as cp
from conftest import BF16
from context_parallel_ranks import BLOCK, Sharded, worker

FORMATS = [f["id"] for f in mlakv.formats() if f["geometry"]["nope_dims"] == 512]  # the decode reads these


def _f32(x):
    return x.astype(np.float32)


@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("fmt", FORMATS)
def test_per_rank_decode_and_merge_equals_the_whole_cache(fmt, world):
    s = Sharded(fmt, 1024, world, interleave=2 if world == 3 else 1, seed=world)
    rng = np.random.default_rng(2)
    q = rng.standard_normal((2, 16, 576)).astype(np.float32).astype(BF16)
    positions = rng.integers(0, s.tokens, size=(2, 64)).astype(np.int32)
    whole_out, whole_lse = mlakv.sparse_mla_decode(fmt, q, s.whole, positions, scale=1.0)
    partials = [s.partial(j, q, positions) for j in range(world)]
    outs = np.stack([p[0] for p in partials])
    out, lse = cp.merge_attention_states(outs, np.stack([p[1] for p in partials]))
    # docs/context_parallel.md: |merged - whole| <= 2^-7 |whole| + 2^-8 max_j |partial_j| per element.
    tol = 2.0**-7 * np.abs(_f32(whole_out)) + 2.0**-8 * np.abs(_f32(outs)).max(axis=0)
    assert (np.abs(_f32(out) - _f32(whole_out)) <= tol).all()
    np.testing.assert_allclose(lse, whole_lse, rtol=1e-5, atol=1e-5)


def test_a_row_all_on_one_rank_passes_through_the_merge_bit_exactly():
    s = Sharded("nvfp4_fp8_ds_mla", 2048, 4, seed=1)
    positions = np.flatnonzero(s.owner == 2)[:64].astype(np.int32).reshape(1, 64)
    q = np.random.default_rng(3).standard_normal((1, 16, 576)).astype(np.float32).astype(BF16)
    whole = mlakv.sparse_mla_decode(s.fmt, q, s.whole, positions, scale=1.0)
    partials = [s.partial(j, q, positions) for j in range(4)]
    for j in (0, 1, 3):
        assert np.all(partials[j][1] == -np.inf) and not np.any(_f32(partials[j][0]))
    out, lse = cp.merge_attention_states(np.stack([p[0] for p in partials]), np.stack([p[1] for p in partials]))
    assert np.array_equal(out.view(np.uint16), whole[0].view(np.uint16)) and np.array_equal(lse, whole[1])


def test_dcp_local_slots_places_every_position_on_one_rank_at_vllms_slot():
    for world, interleave in [(1, 1), (2, 1), (3, 4), (4, 16), (8, 64)]:
        s = Sharded("fp8_e4m3", 1000, world, interleave)
        positions = np.arange(s.tokens, dtype=np.int32).reshape(1, -1)
        slots = np.stack([s.slots(j, positions)[0] for j in range(world)])
        assert ((slots >= 0).sum(axis=0) == 1).all()
        assert np.array_equal(slots[s.owner, np.arange(s.tokens)], s.local)


def test_minus_infinity_partials_contribute_nothing_even_when_their_out_is_nan():
    outs = np.full((3, 1, 2, 4), np.nan, np.float32)
    outs[1, 0, 0] = [1, 2, 3, 4]
    lses = np.full((3, 1, 2), -np.inf, np.float32)
    lses[1, 0, 0] = 0.5
    out, lse = cp.merge_attention_states(outs, lses)
    assert out[0, 0].tolist() == [1, 2, 3, 4] and lse[0, 0] == 0.5
    assert out[0, 1].tolist() == [0, 0, 0, 0] and lse[0, 1] == -np.inf


def test_bad_arguments_raise_naming_them_and_write_nothing():
    positions = np.zeros((2, 4), np.int32)
    out = np.full((2, 4), 77, np.int32)
    table = np.zeros((1, 4), np.int32)
    with pytest.raises(
        ValueError, match=r"^mlakv::dcp_local_slots: layout.rank: must be in \[0, world_size = 2\), got 2$"
    ):
        cp.dcp_local_slots(positions, np.zeros(2, np.int32), table, world_size=2, rank=2, block_size=BLOCK, out=out)
    with pytest.raises(ValueError, match=r"layout.interleave: must be >= 1 and divide block_size = 64, got 5"):
        cp.dcp_local_slots(
            positions, np.zeros(2, np.int32), table, world_size=2, rank=0, block_size=BLOCK, interleave=5, out=out
        )
    with pytest.raises(TypeError, match=r"^mlakv::dcp_local_slots: layout.world_size: must be an int, got float$"):
        cp.dcp_local_slots(positions, np.zeros(2, np.int32), table, world_size=2.0, rank=0, block_size=BLOCK)
    assert (out == 77).all()
    merged = np.full((1, 2, 4), 9.0, np.float32)
    with pytest.raises(ValueError, match=r"lses: shape must be \(N, R, H\) = \(3, 1, 2\), got \(2, 1, 2\)"):
        cp.merge_attention_states(np.zeros((3, 1, 2, 4), np.float32), np.zeros((2, 1, 2), np.float32), out=merged)
    assert (merged == 9.0).all()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_distributed_functions_reject_non_tensors_in_one_line():
    import mlakv.distributed as mdist

    with pytest.raises(TypeError, match=r"^mlakv::merge_across_ranks: out: out and lse must be torch tensors, got"):
        mdist.merge_across_ranks(np.zeros((1, 1, 4), np.float32), np.zeros((1, 1), np.float32))
    with pytest.raises(
        TypeError, match=r"^mlakv::all_gather_records\(bf16\): positions: must be a torch tensor, got list"
    ):
        mdist.all_gather_records("bf16", __import__("torch").zeros((1, 64, 1152)), [0, 1], 0, None, block_size=64)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.parametrize("fmt", [f["id"] for f in mlakv.formats() if f["page"]["kind"] != "token_major"])
def test_all_gather_records_refuses_block_planar_pages_naming_the_format(fmt):
    import torch

    import mlakv.distributed as mdist

    record = next(f["record_bytes"] for f in mlakv.formats() if f["id"] == fmt)
    with pytest.raises(ValueError, match=rf"^mlakv::all_gather_records\({fmt}\): format: must be a token-major format"):
        mdist.all_gather_records(
            fmt, torch.zeros((1, 64, record), dtype=torch.uint8), torch.arange(2), 0, None, block_size=64
        )


def test_record_all_gather_bytes_counts_compact_records_against_bf16_rows():
    got = cp.record_all_gather_bytes("nvfp4_fp8_ds_mla", 1 << 20, 4)
    assert got == {"compact": 3 * (1 << 18) * 352, "bf16": 3 * (1 << 18) * 1152}
    assert cp.record_all_gather_bytes("bf16", 100, 1) == {"compact": 0, "bf16": 0}


def _spawn(world: int, backend: str) -> None:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    failures = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as d:
        try:
            mp.spawn(worker, args=(world, os.path.join(d, "store"), backend, failures), nprocs=world)
        except Exception:
            messages = []
            while not failures.empty():
                messages.append(failures.get())
            pytest.fail("; ".join(messages) or "a rank failed")


needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


@needs_torch
@pytest.mark.parametrize("world", [2, 3])
def test_collectives_over_gloo_equal_the_local_merge(world):
    _spawn(world, "gloo")


def _gpu_count() -> int:
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif(_gpu_count() < 1, reason="needs a CUDA device")
def test_simulated_ranks_on_one_gpu_match_the_cpu_through_torch_tensors():
    import torch

    s = Sharded("nvfp4_ds_mla_fp8_rope", 4096, 4, seed=3)
    rng = np.random.default_rng(4)
    q = rng.standard_normal((8, 16, 576)).astype(np.float32).astype(BF16)
    positions = rng.integers(0, s.tokens, size=(8, 512)).astype(np.int32)
    positions[5] = -1  # a row no rank owns
    cpu = [s.partial(j, q, positions) for j in range(4)]
    want_out, want_lse = cp.merge_attention_states(np.stack([p[0] for p in cpu]), np.stack([p[1] for p in cpu]))

    def dev(x):
        t = torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16) if x.dtype == BF16 else torch.from_numpy(x)
        return t.cuda()

    q_t, pos_t, req_t = dev(q), dev(positions), torch.ones(8, dtype=torch.int32, device="cuda")
    outs, lses = [], []
    for j in range(4):
        slots = cp.dcp_local_slots(pos_t, req_t, dev(s.tables[j]), world_size=4, rank=j, block_size=BLOCK)
        assert np.array_equal(slots.cpu().numpy(), s.slots(j, positions))
        out, lse = mlakv.sparse_mla_decode(s.fmt, q_t, dev(s.shards[j]), slots)
        outs.append(out)
        lses.append(lse)
    out, lse = cp.merge_attention_states(torch.stack(outs), torch.stack(lses))
    torch.cuda.synchronize()
    got = out.float().cpu().numpy()
    want = _f32(want_out)
    # The GPU decode's tolerance (docs/attention.md) over the CPU's.
    tol = 2.0**-7 * np.abs(want) + 2.0**-8 * s.max_abs_value
    assert (np.abs(got - want) <= tol).all()
    np.testing.assert_allclose(lse.cpu().numpy(), want_lse, rtol=1e-3, atol=1e-3)
    assert np.all(lse.cpu().numpy()[5] == -np.inf)


@pytest.mark.skipif(_gpu_count() < 2, reason="needs 2 or more CUDA devices (one NCCL rank per GPU)")
@pytest.mark.parametrize("world", [2, 4])
def test_collectives_over_nccl_equal_one_gpu_and_replay_in_a_graph(world):
    if _gpu_count() < world:
        pytest.skip(f"needs {world} CUDA devices, found {_gpu_count()}")
    _spawn(world, "nccl")
