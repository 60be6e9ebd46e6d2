# SPDX-License-Identifier: Apache-2.0
"""Every argument of every public function, in turn, given each of a list of hostile values (a str
that is no text, ints and reals beyond the library's types, arrays DLPack cannot carry, a meta
tensor, objects of the wrong kind): the call succeeds, or raises a one-line TypeError, ValueError
or NotImplementedError in the library's words (``mlakv::...``), and writes nothing. The named
cases, with their exact texts, are in test_hostile_inputs.py."""

from __future__ import annotations

import numpy as np
import pytest

import mlakv
from conftest import BF16, BrokenExporter, DLPackOnly
from mlakv import context_parallel
from mlakv.integrations.vllm import MlaKvCacheWriter
from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope


def _read_only() -> np.ndarray:
    array = np.zeros((1, 16, 656), np.uint8)
    array.flags.writeable = False
    return array


HOSTILE = {
    "None": None,
    "lone surrogate": "\ud800",
    "NUL": "fp8\0",
    "2**63": 2**63,
    "-2**63 - 1": -(2**63) - 1,
    "10**400": 10**400,
    "10**5000": 10**5000,
    "nan": float("nan"),
    "True": True,
    "1.5": 1.5,
    "bytes": b"fp8",
    "list": [],
    "object": object(),
    "big-endian array": np.zeros((2, 4), ">f4"),
    "read-only DLPack producer": DLPackOnly(_read_only()),
    "failing DLPack producer": BrokenExporter(),
    "0-d array": np.array(1.0, np.float32),
    "complex array": np.zeros(2, np.complex64),
    "bool array": np.array([True, False]),
}


def _numpy_calls():
    """(function, valid keyword arguments, the array it writes or None), fresh arrays each time."""
    kv_c, k_pe = np.zeros((2, 512), BF16), np.zeros((2, 64), BF16)
    c656, c368 = np.zeros((1, 16, 656), np.uint8), np.zeros((1, 64, 368), np.uint8)
    q, idx = np.zeros((1, 16, 576), BF16), np.zeros((1, 4), np.int32)
    out, lse = np.zeros((1, 16, 512), np.float32), np.zeros((1, 16), np.float32)
    table, i32 = np.zeros((1, 4), np.int32), np.int32
    writer = MlaKvCacheWriter("fp8_ds_mla", fp8_rope=False)
    common = {"scale": None, "rope_dtype": "bf16", "stream": None}
    decode_v4 = {"attn_sink": None, "extra_format": None, "extra_kv_cache": None, "extra_indices": None}
    return [
        (
            mlakv.concat_and_cache_mla,
            dict(
                kv_c=kv_c,
                k_pe=k_pe,
                kv_cache=c656,
                slot_mapping=[0, 1],
                kv_cache_dtype="fp8_ds_mla",
                scale=None,
                stream=None,
            ),
            c656,
        ),
        (
            concat_and_cache_nvfp4_mla_fp8_rope,
            dict(
                kv_c=kv_c, k_pe=k_pe, kv_cache=c368, slot_mapping=[0, 1], scale=None, per_token_scale=False, stream=None
            ),
            c368,
        ),
        (
            mlakv.gather_records,
            dict(format="fp8_ds_mla", kv_cache=c656, slots=[0], dtype="float32", out=None, **common),
            None,
        ),
        (
            mlakv.gather_records_paged,
            dict(
                format="fp8_ds_mla",
                kv_cache=c656,
                block_table=table[:, :1],
                seq_lens=np.ones(1, i32),
                cu_seq_lens=np.array([0, 1], i32),
                num_rows=None,
                dtype="float32",
                out=None,
                **common,
            ),
            None,
        ),
        (
            mlakv.sparse_mla_decode,
            dict(
                format="nvfp4_ds_mla_fp8_rope",
                q=q,
                kv_cache=c368,
                indices=idx,
                topk_len=None,
                sm_scale=None,
                out=None,
                lse=None,
                workspace=None,
                extra_topk_len=None,
                **decode_v4,
                **common,
            ),
            None,
        ),
        (
            mlakv.sparse_mla_prefill,
            dict(
                format="nvfp4_ds_mla_fp8_rope",
                q=q,
                kv_cache=c368,
                indices=idx,
                topk_len=None,
                sm_scale=None,
                attn_sink=None,
                out=None,
                lse=None,
                **common,
            ),
            None,
        ),
        (
            mlakv.merge_attention_states,
            dict(out_a=out, lse_a=lse, out_b=out, lse_b=lse, out=None, lse=None, stream=None),
            None,
        ),
        (mlakv.sparse_mla_decode_workspace_size, dict(rows=1, heads=16, topk=4, like=None), None),
        (mlakv.sparse_mla_workspace, dict(q=q, indices=idx, extra_indices=None), None),
        (mlakv.page_bytes, dict(format="fp8_ds_mla", block_size=64), None),
        (
            mlakv.resolve_format,
            dict(kv_cache_dtype="fp8", record_bytes=0, fp8_rope=False, per_token_scale=False, input_dtype=None),
            None,
        ),
        (
            context_parallel.dcp_local_slots,
            dict(
                indices=idx,
                req_id=np.zeros(1, i32),
                block_table=table,
                world_size=2,
                rank=0,
                block_size=64,
                interleave=1,
                out=None,
                stream=None,
            ),
            None,
        ),
        (
            context_parallel.merge_attention_states,
            dict(outs=np.stack([out, out]), lses=np.stack([lse, lse]), out=None, lse=None, stream=None),
            None,
        ),
        (context_parallel.record_all_gather_bytes, dict(format="fp8_ds_mla", tokens=10, world_size=2), None),
        (MlaKvCacheWriter, dict(kv_cache_dtype="fp8_ds_mla", fp8_rope=False, per_token_scale=False), None),
        (
            writer.update,
            dict(kv_c=kv_c, k_pe=k_pe, kv_cache=c656, slot_mapping=[0, 1], kv_cache_dtype="fp8_ds_mla", k_scale=None),
            c656,
        ),
    ]


def _sweep(calls, hostile, copy, equal) -> list[str]:
    """Runs each call with each argument replaced by each hostile value; returns what fell short."""
    failures = []
    for i, (function, arguments, _) in enumerate(calls()):
        function(**arguments)  # valid as it is
        for name in arguments:
            for label, value in hostile.items():
                function, arguments, written = calls()[i]
                before = None if written is None else copy(written)
                try:
                    function(**{**arguments, name: value})
                    continue
                except (TypeError, ValueError, NotImplementedError) as e:
                    message = str(e)
                    if not message.startswith("mlakv::") or "\n" in message:
                        failures.append(f"{function.__qualname__}({name}={label}): {type(e).__name__}: {message}")
                except Exception as e:  # noqa: BLE001  (any other type is what the test finds)
                    failures.append(f"{function.__qualname__}({name}={label}): {type(e).__name__}: {e}")
                if written is not None and not equal(written, before):
                    failures.append(f"{function.__qualname__}({name}={label}): wrote before refusing")
    return failures


def test_every_public_argument_refuses_hostile_values_in_the_library_words():
    failures = _sweep(_numpy_calls, HOSTILE, np.copy, np.array_equal)
    assert not failures, "\n".join(failures)


def test_every_public_argument_on_torch_tensors_refuses_hostile_values_in_the_library_words():
    """The same through torch.ops.mlakv (torch tensors route there), with a meta tensor among the values."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("mlakv.torch")

    def calls():
        kv_c, k_pe = torch.zeros(2, 512).bfloat16(), torch.zeros(2, 64).bfloat16()
        c656, c368 = (torch.zeros(1, 64, n, dtype=torch.uint8) for n in (656, 368))
        q, idx = torch.zeros(1, 16, 576).bfloat16(), torch.zeros(1, 4, dtype=torch.int32)
        out, lse, i32 = torch.zeros(1, 16, 512), torch.zeros(1, 16), {"dtype": torch.int32}
        slots = torch.arange(2)
        writer = MlaKvCacheWriter("fp8_ds_mla", fp8_rope=False)
        return [
            (
                mlakv.concat_and_cache_mla,
                dict(kv_c=kv_c, k_pe=k_pe, kv_cache=c656, slot_mapping=slots, kv_cache_dtype="fp8_ds_mla", scale=None),
                c656,
            ),
            (
                concat_and_cache_nvfp4_mla_fp8_rope,
                dict(kv_c=kv_c, k_pe=k_pe, kv_cache=c368, slot_mapping=slots, scale=None, per_token_scale=False),
                c368,
            ),
            (
                mlakv.gather_records,
                dict(format="fp8_ds_mla", kv_cache=c656, slots=slots, scale=None, rope_dtype="bf16", dtype="float32"),
                None,
            ),
            (
                mlakv.gather_records_paged,
                dict(
                    format="fp8_ds_mla",
                    kv_cache=c656,
                    block_table=torch.zeros(1, 1, **i32),
                    seq_lens=torch.ones(1, **i32),
                    cu_seq_lens=torch.tensor([0, 1], **i32),
                    num_rows=None,
                    scale=None,
                    rope_dtype="bf16",
                    dtype="float32",
                ),
                None,
            ),
            (
                mlakv.sparse_mla_decode,
                dict(
                    format="nvfp4_ds_mla_fp8_rope",
                    q=q,
                    kv_cache=c368,
                    indices=idx,
                    topk_len=None,
                    sm_scale=None,
                    scale=None,
                    rope_dtype="bf16",
                    workspace=None,
                    attn_sink=None,
                ),
                None,
            ),
            (
                mlakv.sparse_mla_prefill,
                dict(
                    format="nvfp4_ds_mla_fp8_rope",
                    q=q,
                    kv_cache=c368,
                    indices=idx,
                    topk_len=None,
                    sm_scale=None,
                    attn_sink=None,
                ),
                None,
            ),
            (mlakv.merge_attention_states, dict(out_a=out, lse_a=lse, out_b=out, lse_b=lse), None),
            (
                context_parallel.dcp_local_slots,
                dict(
                    indices=idx,
                    req_id=torch.zeros(1, **i32),
                    block_table=torch.zeros(1, 4, **i32),
                    world_size=2,
                    rank=0,
                    block_size=64,
                    interleave=1,
                ),
                None,
            ),
            (
                context_parallel.merge_attention_states,
                dict(outs=torch.stack([out, out]), lses=torch.stack([lse, lse])),
                None,
            ),
            (
                writer.update,
                dict(
                    kv_c=kv_c, k_pe=k_pe, kv_cache=c656, slot_mapping=slots, kv_cache_dtype="fp8_ds_mla", k_scale=None
                ),
                c656,
            ),
        ]

    hostile = {k: HOSTILE[k] for k in ("None", "lone surrogate", "NUL", "2**63", "10**400", "nan", "True", "object")}
    hostile |= {
        "meta tensor": torch.zeros(2, device="meta"),
        "meta int32 tensor": torch.zeros(1, 4, dtype=torch.int32, device="meta"),
        "0-d tensor": torch.tensor(1.0),
        "complex tensor": torch.zeros(2, dtype=torch.complex64),
        "int8 tensor": torch.zeros(2, dtype=torch.int8),
    }
    failures = _sweep(calls, hostile, torch.clone, torch.equal)
    assert not failures, "\n".join(failures)
