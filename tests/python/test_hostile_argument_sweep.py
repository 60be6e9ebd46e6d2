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


def _calls(zeros, values):
    """(function, valid keyword arguments, the array it writes or None) of every public function, on
    fresh arrays of one framework: ``zeros(shape, dtype name)``, ``values(list, dtype name)``."""
    kv_c, k_pe = zeros((2, 512), "bfloat16"), zeros((2, 64), "bfloat16")
    c656, c368 = zeros((1, 64, 656), "uint8"), zeros((1, 64, 368), "uint8")
    q, idx, table = zeros((1, 16, 576), "bfloat16"), zeros((1, 4), "int32"), zeros((1, 4), "int32")
    out, lse = zeros((1, 16, 512), "float32"), zeros((1, 16), "float32")
    slots, writer = values([0, 1], "int64"), MlaKvCacheWriter("fp8_ds_mla", fp8_rope=False)
    writes = {"kv_c": kv_c, "k_pe": k_pe, "slot_mapping": slots, "scale": None}
    reads = {"scale": None, "rope_dtype": "bf16", "stream": None}
    attention = {"q": q, "indices": idx, "topk_len": None, "sm_scale": None, "attn_sink": None, "out": None}
    paged = {"block_table": table[:, :1], "seq_lens": values([1], "int32"), "cu_seq_lens": values([0, 1], "int32")}
    return [
        (
            mlakv.concat_and_cache_mla,
            {**writes, "kv_cache": c656, "kv_cache_dtype": "fp8_ds_mla", "stream": None},
            c656,
        ),
        (
            concat_and_cache_nvfp4_mla_fp8_rope,
            {**writes, "kv_cache": c368, "per_token_scale": False, "stream": None},
            c368,
        ),
        (
            mlakv.gather_records,
            {"format": "fp8_ds_mla", "kv_cache": c656, "slots": slots, "dtype": "float32", **reads},
            None,
        ),
        (
            mlakv.gather_records_paged,
            {"format": "fp8_ds_mla", "kv_cache": c656, **paged, "num_rows": None, **reads},
            None,
        ),
        (
            mlakv.sparse_mla_decode,
            {
                "format": "nvfp4_ds_mla_fp8_rope",
                "kv_cache": c368,
                **attention,
                "lse": None,
                "workspace": None,
                "extra_format": None,
                "extra_kv_cache": None,
                "extra_indices": None,
                **reads,
            },
            None,
        ),
        (
            mlakv.sparse_mla_prefill,
            {"format": "nvfp4_ds_mla_fp8_rope", "kv_cache": c368, **attention, "lse": None, **reads},
            None,
        ),
        (mlakv.merge_attention_states, {"out_a": out, "lse_a": lse, "out_b": out, "lse_b": lse, "stream": None}, None),
        (mlakv.sparse_mla_decode_workspace_size, {"rows": 1, "heads": 16, "topk": 4, "like": q}, None),
        (mlakv.sparse_mla_workspace, {"q": q, "indices": idx, "extra_indices": None}, None),
        (mlakv.page_bytes, {"format": "fp8_ds_mla", "block_size": 64}, None),
        (
            mlakv.resolve_format,
            {
                "kv_cache_dtype": "fp8",
                "record_bytes": 0,
                "fp8_rope": False,
                "per_token_scale": False,
                "input_dtype": None,
            },
            None,
        ),
        (
            context_parallel.dcp_local_slots,
            {
                "indices": idx,
                "req_id": values([0], "int32"),
                "block_table": table,
                "world_size": 2,
                "rank": 0,
                "block_size": 64,
                "interleave": 1,
                "out": None,
                "stream": None,
            },
            None,
        ),
        (
            context_parallel.merge_attention_states,
            {"outs": zeros((2, 1, 16, 512), "float32"), "lses": zeros((2, 1, 16), "float32"), "stream": None},
            None,
        ),
        (context_parallel.record_all_gather_bytes, {"format": "fp8_ds_mla", "tokens": 10, "world_size": 2}, None),
        (MlaKvCacheWriter, {"kv_cache_dtype": "fp8_ds_mla", "fp8_rope": False, "per_token_scale": False}, None),
        (
            writer.update,
            {
                "kv_c": kv_c,
                "k_pe": k_pe,
                "kv_cache": c656,
                "slot_mapping": slots,
                "kv_cache_dtype": "fp8_ds_mla",
                "k_scale": None,
            },
            c656,
        ),
    ]


def _numpy_calls():
    dtypes = {"bfloat16": BF16}
    return _calls(
        lambda shape, dtype: np.zeros(shape, dtypes.get(dtype, dtype)), lambda items, dtype: np.array(items, dtype)
    )


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
        return _calls(
            lambda shape, dtype: torch.zeros(shape, dtype=getattr(torch, dtype)),
            lambda items, dtype: torch.tensor(items, dtype=getattr(torch, dtype)),
        )

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
