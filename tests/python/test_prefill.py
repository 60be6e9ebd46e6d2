# SPDX-License-Identifier: Apache-2.0
"""mlakv.sparse_mla_prefill and torch.ops.mlakv.sparse_mla_prefill (issue 42's names): the decode's
semantics over many rows, so the same bytes as sparse_mla_decode, on the V3.2-era records and the
DeepSeek V4 family (with a sink); errors named as the decode's. CPU; the torch part skips without torch."""

from __future__ import annotations

import numpy as np
import pytest

import mlakv
from conftest import BF16
from test_attention import make_cache
from test_v4_decode import as_torch, decode_case


def assert_same(got, want):
    np.testing.assert_array_equal(np.asarray(got[0]).view(np.uint16), np.asarray(want[0]).view(np.uint16))
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("fmt", ["bf16", "fp8_ds_mla", "nvfp4_ds_mla_fp8_rope"])
def test_prefill_gives_the_decodes_bytes(fmt):
    rng = np.random.default_rng(12)
    cache = make_cache(fmt)
    q = rng.standard_normal((9, 16, 576)).astype(np.float32).astype(BF16)
    indices = rng.integers(-1, 300, size=(9, 33)).astype(np.int32)
    topk_len = rng.integers(-2, 40, size=9).astype(np.int32)
    args = (fmt, q, cache, indices, topk_len, 0.07)
    assert_same(mlakv.sparse_mla_prefill(*args, scale=1.0), mlakv.sparse_mla_decode(*args, scale=1.0))


def test_prefill_of_the_v4_family_takes_a_sink():
    fmt = "nvfp4_ds_mla_v41"
    c = decode_case(fmt, fmt, seed=13)
    got = mlakv.sparse_mla_prefill(fmt, c["q"], c["cache"], c["indices"], c["topk_len"], None, c["attn_sink"])
    want = mlakv.sparse_mla_decode(fmt, c["q"], c["cache"], c["indices"], c["topk_len"], attn_sink=c["attn_sink"])
    assert_same(got, want)
    out, lse = np.zeros((3, 16, 512), BF16), np.zeros((3, 16), np.float32)
    assert mlakv.sparse_mla_prefill(fmt, c["q"], c["cache"], c["indices"], out=out, lse=lse)[0] is out


def test_bad_prefill_arguments_are_named():
    cache, q = make_cache("bf16"), np.zeros((2, 16, 576), BF16)
    with pytest.raises(TypeError, match=r"^mlakv::sparse_mla_prefill\(bf16\): indices: dtype must be int32"):
        mlakv.sparse_mla_prefill("bf16", q, cache, np.zeros((2, 4), np.int64))
    with pytest.raises(ValueError, match=r"^mlakv::sparse_mla_prefill\(bf16\): q: shape must be \(R, H, 576\)"):
        mlakv.sparse_mla_prefill("bf16", q[..., :512], cache, np.zeros((2, 4), np.int32))
    with pytest.raises(TypeError, match=r"^mlakv::sparse_mla_prefill\(bf16\): sm_scale: must be a float"):
        mlakv.sparse_mla_prefill("bf16", q, cache, np.zeros((2, 4), np.int32), sm_scale="big")


def test_torch_op_prefill_is_the_python_functions_and_its_fake_has_its_shapes():
    torch = pytest.importorskip("torch")
    pytest.importorskip("mlakv.torch")
    from torch._subclasses.fake_tensor import FakeTensorMode

    ops = torch.ops.mlakv
    fmt = "fp8_ds_mla_v41"
    t = as_torch(torch, decode_case(fmt, fmt, seed=14))
    args = (fmt, t["q"], t["cache"], t["indices"], t["topk_len"], 0.05, t["attn_sink"])
    out, lse = ops.sparse_mla_prefill(*args)
    want = mlakv.sparse_mla_prefill(*args, stream=0)  # the DLPack path
    assert torch.equal(out, want[0]) and torch.equal(lse, want[1])
    torch.library.opcheck(
        ops.sparse_mla_prefill, args, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
    )
    with FakeTensorMode() as mode:
        fake_out, fake_lse = ops.sparse_mla_prefill(
            fmt, *(mode.from_tensor(x) for x in (t["q"], t["cache"], t["indices"]))
        )
        assert fake_out.shape == (3, 16, 512) and fake_lse.shape == (3, 16) and fake_out.dtype == torch.bfloat16
