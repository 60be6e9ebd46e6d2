# SPDX-License-Identifier: Apache-2.0
"""One sequence sharded over N ranks in vLLM's interleaved layout, for the
context-parallel tests: the whole cache (slot = position) and every rank's
shard, placed by an independent rule (a rank stores the tokens it owns
densely, in position order, through a reversed block table), plus the
per-process worker of the torch.distributed tests (gloo on CPUs, NCCL with
one process per GPU)."""

from __future__ import annotations

import numpy as np

import mlakv
from conftest import BF16

BLOCK = 64
ENGINE = {"bf16": "auto", "fp16": "auto", "fp8_e4m3": "fp8_e4m3"}


def write(fmt: str, kv_c, k_pe, cache, slots) -> None:
    if fmt.startswith("nvfp4_ds_mla_fp8_rope"):
        from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

        concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, slots, per_token_scale=fmt.endswith("pts"))
    else:
        mlakv.concat_and_cache_mla(kv_c, k_pe, cache, slots, ENGINE.get(fmt, fmt), 1.0)


class Sharded:
    def __init__(self, fmt: str, tokens: int, world: int, interleave: int = 1, seed: int = 0) -> None:
        self.fmt, self.tokens, self.world, self.interleave = fmt, tokens, world, interleave
        record = next(f["record_bytes"] for f in mlakv.formats() if f["id"] == fmt)
        dtype = np.float16 if fmt == "fp16" else BF16
        rng = np.random.default_rng(seed)
        kv_c = (rng.standard_normal((tokens, 512)) * 0.5).astype(np.float32).astype(dtype)
        k_pe = rng.standard_normal((tokens, 64)).astype(np.float32).astype(dtype)
        self.max_abs_value = float(np.abs(kv_c.astype(np.float32)).max())  # the scale of a GPU decode's error
        blocks = -(-tokens // BLOCK)
        self.whole = np.zeros((blocks, BLOCK, record), np.uint8)
        write(fmt, kv_c, k_pe, self.whole, np.arange(tokens, dtype=np.int64))
        self.width = -(-tokens // (BLOCK * world))
        self.owner = np.zeros(tokens, np.int64)
        self.local = np.zeros(tokens, np.int64)
        stored = [0] * world
        for t in range(tokens):
            j = (t % (BLOCK * world)) // interleave % world
            k = stored[j]
            stored[j] += 1
            self.owner[t] = j
            self.local[t] = (self.width - 1 - k // BLOCK) * BLOCK + k % BLOCK
        self.tables, self.shards = [], []
        for j in range(world):
            table = np.zeros((2, self.width), np.int32)
            table[1] = np.arange(self.width)[::-1]
            self.tables.append(table)
            shard = np.zeros((self.width + 1, BLOCK, record), np.uint8)
            write(fmt, kv_c, k_pe, shard, np.where(self.owner == j, self.local, -1))
            self.shards.append(shard)

    def slots(self, rank: int, positions: np.ndarray) -> np.ndarray:
        req = np.ones(positions.shape[0], np.int32)
        return mlakv.context_parallel.dcp_local_slots(
            positions,
            req,
            self.tables[rank],
            world_size=self.world,
            rank=rank,
            block_size=BLOCK,
            interleave=self.interleave,
        )

    def partial(self, rank: int, q, positions: np.ndarray):
        return mlakv.sparse_mla_decode(self.fmt, q, self.shards[rank], self.slots(rank, positions), scale=1.0)


def worker(rank: int, world: int, store: str, backend: str, failures) -> None:
    """One rank of the torch.distributed tests: its partial decode, then the collectives,
    against the same computation done locally for all ranks (and, on GPUs, a graph replay)."""
    import torch
    import torch.distributed as dist

    import mlakv.distributed as mdist

    try:
        dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world)
        cuda = backend == "nccl"
        device = torch.device("cuda", rank) if cuda else torch.device("cpu")
        if cuda:
            torch.cuda.set_device(device)
        s = Sharded("nvfp4_ds_mla_fp8_rope", 2048, world, seed=5)
        rng = np.random.default_rng(9)
        heads = 4 * world
        q = rng.standard_normal((3, heads, 576)).astype(np.float32).astype(BF16)
        positions = rng.integers(0, s.tokens, size=(3, 256)).astype(np.int32)
        positions[2] = -1  # no rank owns anything of row 2
        # Every rank's partial, computed here on the CPU: the expected results.
        partials = [s.partial(j, q, positions) for j in range(world)]
        outs = np.stack([p[0] for p in partials])
        lses = np.stack([p[1] for p in partials])
        want_out, want_lse = mlakv.context_parallel.merge_attention_states(outs, lses)

        def t(x):
            arr = torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16) if x.dtype == BF16 else torch.from_numpy(x)
            return arr.to(device)

        q_t = t(q)
        cache_t = t(s.shards[rank])
        slots_t = t(s.slots(rank, positions))

        def step():
            out, lse = mlakv.sparse_mla_decode(s.fmt, q_t, cache_t, slots_t, scale=torch.ones(1, device=device))
            return mdist.merge_across_ranks(out, lse), mdist.merge_across_ranks_sharded(out, lse)

        (got_out, got_lse), (shard_out, shard_lse) = step()
        want_out_t = torch.from_numpy(want_out.view(np.uint16)).view(torch.bfloat16).float()
        # docs/context_parallel.md's rule against the CPU's partials; a GPU decode adds its own
        # tolerance (2^-8 of the largest |value| and of the output, docs/attention.md).
        tol = 2.0**-7 * want_out_t.abs() + 2.0**-8 * float(np.abs(outs.astype(np.float32)).max()) + 1e-6
        lse_tol = 1e-5
        if cuda:
            tol = tol + 2.0**-8 * want_out_t.abs() + 2.0**-8 * s.max_abs_value
            lse_tol = 1e-3
        assert bool(((got_out.cpu().float() - want_out_t).abs() <= tol).all()), "merge_across_ranks: out"
        assert np.allclose(got_lse.cpu().numpy(), want_lse, rtol=lse_tol, atol=lse_tol), "merge_across_ranks: lse"
        per = heads // world
        mine = slice(rank * per, (rank + 1) * per)
        assert bool(((shard_out.cpu().float() - want_out_t[:, mine]).abs() <= tol[:, mine]).all()), "sharded: out"
        assert np.allclose(shard_lse.cpu().numpy(), want_lse[:, mine], rtol=lse_tol, atol=lse_tol), "sharded: lse"
        # The compact-record all-gather: every position's record decoded as from the whole cache.
        every = torch.arange(s.tokens, dtype=torch.int32)
        kv, pe = mdist.all_gather_records(
            s.fmt, cache_t, every, 1, t(s.tables[rank]), block_size=BLOCK, scale=torch.ones(1, device=device)
        )
        whole_kv, whole_pe = mlakv.gather_records(s.fmt, s.whole, np.arange(s.tokens), scale=1.0)
        assert np.array_equal(kv.cpu().numpy(), whole_kv) and np.array_equal(pe.cpu().numpy(), whole_pe), "records"
        if cuda:  # the whole step (decode + both collectives + merges) captured and replayed
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                (g_out, g_lse), (g_shard, _) = step()
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(g_out, got_out) and torch.equal(g_lse, got_lse), "graph replay: merge_across_ranks"
            assert torch.equal(g_shard, shard_out), "graph replay: sharded"
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as e:  # reported to the parent, which fails the test with it
        failures.put(f"rank {rank}: {type(e).__name__}: {e}")
        raise
