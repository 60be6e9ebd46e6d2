# SPDX-License-Identifier: Apache-2.0
"""Context-parallel decode step on N GPUs (run on purpose; results in bench/results/): per
rank, ``sparse_mla_decode`` over this rank's shard (H = 16 heads per rank, so the group decodes
16 N query heads of R rows, K = 2048 top-k positions each), then the collective
(``merge_across_ranks``: all-gather + merge; ``--sharded``: all-to-all by heads + merge).
Each (format, R) is captured in one CUDA graph per variant (decode only, collective only, the
whole step) and timed by replays; the collective's share of the step is the point
(goal: < 15 % at R >= 64). Also: tokens of context one GPU holds per format and what the group
holds, for ``--gpu-memory`` of cache per GPU.

    torchrun --nproc-per-node 4 bench/python/dcp_step.py --json bench/results/h200x4-dcp.json

One process per GPU; with one process N = 1 (the decode alone). Exits with a message when
fewer GPUs than processes are visible.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

import mlakv
import mlakv.context_parallel as cp
import mlakv.distributed as mdist

FORMATS = ["fp8_ds_mla", "nvfp4_ds_mla", "nvfp4_ds_mla_fp8_rope", "nvfp4_fp8_ds_mla"]
BLOCK = 64


def replay_us(graph: torch.cuda.CUDAGraph, replays: int) -> float:
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dist.barrier()
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / replays


def capture(fn) -> torch.cuda.CUDAGraph:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def time_case(args, fmt, record, cache, table, rows, heads, world, rank, device) -> dict:
    """Decode, collective and whole-step times of one (format, R), each a replayed CUDA graph."""
    gen = torch.Generator(device=device).manual_seed(1)
    q = (torch.randn((rows, heads, 576), generator=gen, device=device) * 0.1).to(torch.bfloat16)
    positions = torch.randint(0, args.context, (rows, args.topk), generator=gen, device=device, dtype=torch.int32)
    req = torch.zeros(rows, dtype=torch.int32, device=device)
    workspace = mlakv.sparse_mla_workspace(q, positions)
    scale = torch.ones(1, device=device)
    state = {}

    def decode():
        slots = cp.dcp_local_slots(positions, req, table, world_size=world, rank=rank, block_size=BLOCK)
        state["partial"] = mlakv.sparse_mla_decode(fmt, q, cache, slots, scale=scale, workspace=workspace)

    decode()
    partial = state["partial"]
    merge = mdist.merge_across_ranks_sharded if args.sharded else mdist.merge_across_ranks

    def collective():
        merge(*partial)

    def step():
        decode()
        merge(*state["partial"])

    t_decode = replay_us(capture(decode), args.replays)
    t_coll = replay_us(capture(collective), args.replays)
    t_step = replay_us(capture(step), args.replays)
    entry = {
        "format": fmt,
        "record_bytes": record,
        "N": world,
        "R": rows,
        "H_per_rank": args.heads_per_rank,
        "H_decoded": heads,
        "K": args.topk,
        "context": args.context,
        "sharded": args.sharded,
        "decode_us": round(t_decode, 2),
        "collective_us": round(t_coll, 2),
        "step_us": round(t_step, 2),
        "collective_share": round(t_coll / t_step, 3),
    }
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[16, 64, 128])
    parser.add_argument("--topk", type=int, default=2048)
    parser.add_argument("--heads-per-rank", type=int, default=16)
    parser.add_argument("--context", type=int, default=131072, help="tokens per sequence (over the whole group)")
    parser.add_argument("--formats", nargs="+", default=FORMATS)
    parser.add_argument("--sharded", action="store_true", help="the head-sharded collective (all-to-all)")
    parser.add_argument("--gpu-memory", type=float, default=100.0, help="GiB of cache per GPU, for the capacity table")
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--json", help="write the results here (rank 0)")
    args = parser.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if not torch.cuda.is_available() or torch.cuda.device_count() < world:
        sys.exit(
            f"dcp_step: needs {world} CUDA devices (one per process), found "
            f"{torch.cuda.device_count() if torch.cuda.is_available() else 0}"
        )
    dist.init_process_group(
        "nccl" if world > 1 else "gloo",
        world_size=world,
        rank=int(os.environ.get("RANK", "0")),
        init_method=None if "MASTER_ADDR" in os.environ else "tcp://127.0.0.1:29511",
    )
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    heads = args.heads_per_rank * world if args.sharded else args.heads_per_rank
    tokens_here = -(-args.context // world)
    blocks = -(-tokens_here // BLOCK)
    results = []
    for fmt in args.formats:
        record = next(f["record_bytes"] for f in mlakv.formats() if f["id"] == fmt)
        cache = torch.randint(0, 256, (blocks, BLOCK, record), dtype=torch.uint8, device=device)
        if fmt.startswith("nvfp4"):  # finite scales: random bytes may hold NaN scale codes
            cache.bitwise_and_(0x77)
        table = torch.randperm(blocks, dtype=torch.int32, device=device).view(1, -1)
        for rows in args.rows:
            entry = time_case(args, fmt, record, cache, table, rows, heads, world, rank, device)
            results.append(entry)
            if rank == 0:
                print(json.dumps(entry), flush=True)
    if rank == 0:
        per_gpu = int(args.gpu_memory * 2**30)
        capacity = {
            f["id"]: {
                "tokens_per_gpu": per_gpu // f["record_bytes"],
                "tokens_per_group": world * (per_gpu // f["record_bytes"]),
                "prefill_all_gather": cp.record_all_gather_bytes(f["id"], args.context, world),
            }
            for f in mlakv.formats()
            if f["page"]["kind"] == "token_major"
        }
        print(json.dumps({"capacity": capacity}), flush=True)
        if args.json:
            with open(args.json, "w") as out:
                json.dump(
                    {"device": torch.cuda.get_device_name(device), "N": world, "steps": results, "capacity": capacity},
                    out,
                    indent=1,
                )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
