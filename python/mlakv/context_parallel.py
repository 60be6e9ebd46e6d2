# SPDX-License-Identifier: Apache-2.0
"""Context-parallel decode (vLLM's decode context parallel, DCP), the per-rank
steps: this rank's slots of each row's top-k positions, and the N-way merge of
the ranks' partial results. The collectives over a ``torch.distributed`` group
are in ``mlakv.distributed``. See ``include/mlakv/context_parallel.h`` and
``docs/context_parallel.md``."""

from __future__ import annotations

from typing import Any

from . import _mlakv
from ._arrays import empty, export, stream_handle, tagged
from ._checks import Call
from ._torch_route import torch_ops


def dcp_local_slots(
    indices: Any,
    req_id: Any,
    block_table: Any,
    *,
    world_size: int,
    rank: int,
    block_size: int,
    interleave: int = 1,
    out: Any = None,
    stream: Any = None,
) -> Any:
    """This rank's flat cache slots of each row's top-k token positions, -1 where another rank owns the token.

    indices: ``[R, K]`` int32 positions in the row's sequence (-1: none), as an indexer selects them.
    req_id: ``[R]`` int32, the block-table row of each query row.
    block_table: ``[num_reqs, max_blocks]`` int32, this rank's block ids (vLLM's DCP-local block table).
    Token ``p`` lives on rank ``(p % (block_size * world_size)) // interleave % world_size`` (vLLM's
    ``cp_kv_cache_interleave_size`` = ``interleave``); the result feeds ``sparse_mla_decode`` unchanged.
    Returns ``out`` (``[R, K]`` int32, allocated on indices' device when None).
    """
    call = Call("dcp_local_slots")
    indices = call.array("indices", indices)
    req_id = call.array("req_id", req_id)
    block_table = call.array("block_table", block_table)
    out = call.optional_array("out", out, writable=True)
    layout = [call.integer(f"layout.{n}", v) for n, v in (("world_size", world_size), ("rank", rank))]
    layout += [call.integer("layout.interleave", interleave), call.integer("layout.block_size", block_size)]
    stream = call.stream("stream", stream)
    ops = torch_ops(stream, indices, req_id, block_table) if out is None else None
    if ops is not None:
        world_size, rank, interleave, block_size = layout
        return ops.dcp_local_slots(
            indices, req_id, block_table, world_size=world_size, rank=rank, block_size=block_size, interleave=interleave
        )
    handle = stream_handle(stream, indices)
    if out is None:
        shape = tuple(int(d) for d in getattr(indices, "shape", ()))
        out = call.allocate("indices", lambda: _empty_int32(indices, shape), shape, "int32")
    world_size, rank, interleave, block_size = layout
    _mlakv.dcp_local_slots(
        export(indices),
        export(req_id),
        export(block_table),
        world_size=world_size,
        rank=rank,
        block_size=block_size,
        interleave=interleave,
        local_slots=export(out),
        stream=handle,
    )
    return out


def _empty_int32(like: Any, shape: tuple[int, ...]) -> Any:
    import sys

    import numpy as np

    from ._arrays import _is_cupy, _is_torch

    if _is_torch(like):
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=torch.int32, device=like.device)
    if _is_cupy(like):
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype=cupy.int32)
    return np.empty(shape, dtype=np.int32)


def merge_attention_states(
    outs: Any, lses: Any, out: Any = None, lse: Any = None, stream: Any = None
) -> tuple[Any, Any]:
    """Merge N partial results over disjoint key sets (one per rank): ``(out [R, H, D], lse [R, H])``.

    outs: ``[N, R, H, D]`` bf16 or float32; lses: ``[N, R, H]`` float32.
    ``out = sum_n e^lse_n out_n / sum_n e^lse_n``, ``lse = log sum_n e^lse_n``; a partial with
    ``lse = -inf`` contributes nothing (all -inf: zeros and -inf). ``out``/``lse`` must not
    overlap the inputs. (The two-partial form is ``mlakv.merge_attention_states``.)
    """
    call = Call("merge_attention_states")
    outs, lses = call.array("outs", outs), call.array("lses", lses)
    out = call.optional_array("out", out, writable=True)
    lse = call.optional_array("lse", lse, writable=True)
    stream = call.stream("stream", stream)
    ops = torch_ops(stream, outs, lses) if out is None and lse is None else None
    if ops is not None:
        return ops.merge_attention_states_stacked(outs, lses)
    handle = stream_handle(stream, outs)
    shape = tuple(int(d) for d in getattr(outs, "shape", ()))
    if out is None:
        dtype = "float32" if str(getattr(outs, "dtype", "")).endswith("float32") else "bfloat16"
        out = call.allocate("outs", lambda: empty(outs, shape[1:], dtype), shape[1:], dtype)
    if lse is None:
        lse = call.allocate("outs", lambda: empty(outs, shape[1:3], "float32"), shape[1:3], "float32")
    _mlakv.merge_attention_states_stacked(tagged(outs), export(lses), out=tagged(out), lse=export(lse), stream=handle)
    return out, lse


def record_all_gather_bytes(format: str, tokens: int, world_size: int) -> dict[str, int]:
    """Bytes one rank receives when every rank all-gathers the ``tokens`` records a request
    needs (each rank contributes the ceil(tokens / N) it owns): as compact records of
    ``format``, and as the bf16 [576] rows a gather-then-send design moves."""
    call = Call("record_all_gather_bytes", format)
    call.string("format", format, "must be a str (a format id of mlakv.formats())")
    tokens, world_size = call.count("tokens", tokens), call.count("world_size", world_size)
    if world_size < 1:
        call.value_error("world_size", "must be >= 1", str(world_size))
    info = next((f for f in _mlakv.formats() if f["id"] == format), None)
    if info is None:
        call.value_error("format", "must be a format id of mlakv.formats()", repr(format))
    per_rank = -(-tokens // world_size)
    received = (world_size - 1) * per_rank
    return {"compact": received * int(info["record_bytes"]), "bf16": received * _mlakv.QUERY_DIM * 2}
