# SPDX-License-Identifier: Apache-2.0
"""Context-parallel collectives over a ``torch.distributed`` process group (NCCL
on GPUs): each rank's partial ``(out, lse)`` merged across the group, whole or
sharded by heads, and a request's records gathered from every rank as compact
bytes before they are decoded. Nothing here communicates by itself: the moves
are ``torch.distributed`` collectives, the arithmetic mlakv's kernels.
``docs/context_parallel.md`` has a worked example. Importing this module
imports torch."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

import mlakv

from . import gather_records
from ._checks import Call
from .context_parallel import dcp_local_slots, merge_attention_states


def _group_shape(group: Any) -> tuple[int, int]:
    return dist.get_world_size(group), dist.get_rank(group)


def merge_across_ranks(out: torch.Tensor, lse: torch.Tensor, group: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """All-gather every rank's partial ``out [R, H, D]`` and ``lse [R, H]`` (over this rank's
    share of the keys), then merge the N partials: every rank gets ``(out, lse)`` over all keys
    for all H heads. Launches only (two all-gathers and one merge on the current stream): no host
    synchronization, so a CUDA graph may capture it."""
    call = Call("merge_across_ranks")
    _check_partial(call, out, lse)
    world, _ = _group_shape(group)
    if world == 1:
        return out, lse
    rows = int(out.shape[0])
    outs = out.new_empty((world * rows, *out.shape[1:]))  # rank-major: [N R, H, D] is [N, R, H, D]
    lses = lse.new_empty((world * rows, *lse.shape[1:]))
    dist.all_gather_into_tensor(outs, out.contiguous(), group=group)
    dist.all_gather_into_tensor(lses, lse.contiguous(), group=group)
    return merge_attention_states(outs.view(world, *out.shape), lses.view(world, *lse.shape))


def merge_across_ranks_sharded(
    out: torch.Tensor, lse: torch.Tensor, group: Any = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The head-sharded variant (vLLM's ``cp_lse_ag_out_rs`` when every rank decoded all
    ``H = N * H_rank`` heads over its share of the keys): rank j receives every rank's partial of
    heads ``[j H_rank, (j + 1) H_rank)`` and merges them, returning ``(out [R, H_rank, D],
    lse [R, H_rank])``. An all-to-all moves the same bytes as vLLM's reduce-scatter of rescaled
    outputs, and the merge then rounds once instead of summing N rounded partials. No host
    synchronization."""
    call = Call("merge_across_ranks_sharded")
    _check_partial(call, out, lse)
    world, _ = _group_shape(group)
    rows, heads, width = (int(d) for d in out.shape)
    if heads % world != 0:
        call.value_error("out", f"heads (dim 1) must be a multiple of the group size {world}", str(heads))
    if world == 1:
        return out, lse
    per = heads // world
    # [R, N, H/N, D] -> [N, R, H/N, D]: rank j's heads first for j = 0..N-1, as all_to_all_single splits dim 0.
    send = out.reshape(rows, world, per, width).transpose(0, 1).contiguous()
    send_lse = lse.reshape(rows, world, per).transpose(0, 1).contiguous()
    outs = torch.empty_like(send)
    lses = torch.empty_like(send_lse)
    dist.all_to_all_single(outs, send, group=group)
    dist.all_to_all_single(lses, send_lse, group=group)
    return merge_attention_states(outs, lses)


def _check_partial(call: Call, out: Any, lse: Any) -> None:
    if not isinstance(out, torch.Tensor) or not isinstance(lse, torch.Tensor):
        call.type_error("out", "out and lse must be torch tensors", f"{type(out).__name__}, {type(lse).__name__}")
    if out.dim() != 3 or lse.shape != out.shape[:2]:
        call.value_error(
            "lse", f"shapes must be out (R, H, D) and lse (R, H); out is {tuple(out.shape)}", str(tuple(lse.shape))
        )
    if lse.dtype != torch.float32:
        call.type_error("lse", "dtype must be float32", str(lse.dtype))


def all_gather_records(
    format: str,
    kv_cache: torch.Tensor,
    positions: torch.Tensor,
    req: int,
    block_table: torch.Tensor,
    *,
    block_size: int,
    interleave: int = 1,
    group: Any = None,
    **gather_options: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The records of one request's ``positions`` ``[P]`` gathered from every rank as compact bytes,
    then decoded here: ``gather_records``' ``(kv_c [P, 512], k_pe [P, 64])`` over the whole
    sequence, as if one cache held it (prefill and chunked context under DCP).

    Each rank sends the records it owns ((N-1)/N of them cross the link, ``record_bytes`` each
    instead of a bf16 row's 1152: ``context_parallel.record_all_gather_bytes``). ``kv_cache`` is
    this rank's ``[num_blocks, block_size, record_bytes]`` cache of a token-major format,
    ``block_table`` its ``[num_reqs, max_blocks]`` int32 table and ``req`` the request's row.
    ``gather_options`` go to ``gather_records`` (``dtype``, ``scale``, ``rope_dtype``, ``out``).
    Reads how many records each rank owns on the host: not for a captured graph.
    """
    call = Call("all_gather_records", format)
    call.string("format", format, "must be a str (a format id of mlakv.formats())")
    page = next((f["page"]["kind"] for f in mlakv.formats() if f["id"] == format), None)
    if page != "token_major":
        call.value_error(
            "format", "must be a token-major format of mlakv.formats() (one record per slot)", repr(format)
        )
    for name, x in (("kv_cache", kv_cache), ("positions", positions), ("block_table", block_table)):
        if not isinstance(x, torch.Tensor):
            call.type_error(name, "must be a torch tensor", type(x).__name__)
    if isinstance(req, bool) or not isinstance(req, int):
        call.type_error("req", "must be an int (the request's block-table row)", type(req).__name__)
    world, rank = _group_shape(group)
    if positions.dim() != 1:
        call.value_error("positions", "shape must be (P,)", str(tuple(positions.shape)))
    if kv_cache.dim() != 3:
        call.value_error("kv_cache", "shape must be (num_blocks, block_size, record_bytes)", str(tuple(kv_cache.shape)))
    record = int(kv_cache.shape[2])
    count = int(positions.shape[0])
    device = kv_cache.device
    pos = positions.to(device=device, dtype=torch.int32).view(1, count)
    req_id = torch.full((1,), int(req), dtype=torch.int32, device=device)
    # Who owns each position: dcp_local_slots (the one definition of the layout) over a table of zeros.
    width = int(block_table.shape[1])
    zeros = torch.zeros((1, width), dtype=torch.int32, device=device)
    owner = torch.full((count,), -1, dtype=torch.int64, device=device)
    for j in range(world):
        owned = dcp_local_slots(
            pos, torch.zeros_like(req_id), zeros, world_size=world, rank=j, block_size=block_size, interleave=interleave
        )[0]
        owner[owned >= 0] = j
    if bool((owner < 0).any()):
        call.value_error(
            "positions",
            f"must lie in [0, {width} * block_size * {world}) (the block table's reach)",
            "a position outside",
        )
    onehot = torch.nn.functional.one_hot(owner, world)
    order = (onehot.cumsum(0) - 1).gather(1, owner.view(-1, 1)).view(-1)  # index among the same owner's positions
    per_rank = int(onehot.sum(0).max())
    slots = dcp_local_slots(
        pos, req_id, block_table, world_size=world, rank=rank, block_size=block_size, interleave=interleave
    )[0]
    mine = slots[owner == rank].to(torch.int64)
    send = torch.zeros((per_rank, record), dtype=torch.uint8, device=device)
    send[: mine.shape[0]] = kv_cache[mine // block_size, mine % block_size]
    gathered = torch.empty((world * per_rank, record), dtype=torch.uint8, device=device)
    dist.all_gather_into_tensor(gathered, send, group=group)
    compact = gathered[owner * per_rank + order].view(count, 1, record)
    return gather_records(format, compact, torch.arange(count, device=device), **gather_options)
