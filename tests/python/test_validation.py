# SPDX-License-Identifier: Apache-2.0
"""Every validation rule through the Python API: the exception type, the exact text, and no byte written."""

from __future__ import annotations

import numpy as np
import pytest

import mlakv
from conftest import BF16, random_inputs
from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

T = 4
COMPACT = "mlakv::concat_and_cache_nvfp4_mla_fp8_rope(nvfp4_ds_mla_fp8_rope): "


def aligned(shape, dtype=np.uint8, offset=0) -> np.ndarray:
    """A zeroed array whose data starts `offset` bytes past a 64-byte boundary."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buf = np.zeros(nbytes + 128, dtype=np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    return buf[start : start + nbytes].view(dtype).reshape(shape)


@pytest.fixture
def args():
    kv_c, k_pe = random_inputs(T, BF16, seed=9)
    return {
        "kv_c": kv_c,
        "k_pe": k_pe,
        "kv_cache": aligned((2, 16, 368)),
        "slot_mapping": np.arange(T, dtype=np.int64),
    }


def expect_rejected(args, exc, text, **changes):
    args = {**args, **changes}
    cache = args["kv_cache"]
    before = np.array(cache, copy=True) if isinstance(cache, np.ndarray) else None
    with pytest.raises(exc) as info:
        concat_and_cache_nvfp4_mla_fp8_rope(**args)
    assert str(info.value) == text
    if before is not None:
        np.testing.assert_array_equal(cache, before)


def test_fixture_arguments_are_accepted(args):
    concat_and_cache_nvfp4_mla_fp8_rope(**args)
    assert args["kv_cache"].any()


def test_kv_c_of_wrong_width(args):
    expect_rejected(
        args, ValueError, COMPACT + "kv_c: shape must be (T, 512), got (4, 256)", kv_c=args["kv_c"][:, :256]
    )


def test_k_pe_of_wrong_width(args):
    expect_rejected(args, ValueError, COMPACT + "k_pe: shape must be (T, 64), got (4, 32)", k_pe=args["k_pe"][:, :32])


def test_compact_writer_squeezes_only_a_unit_middle_dim_of_k_pe(args):
    expect_rejected(
        args, ValueError, COMPACT + "k_pe: shape must be (T, 64), got (2, 2, 64)", k_pe=args["k_pe"].reshape(2, 2, 64)
    )


def test_kv_c_dtype_not_16_bit_float(args):
    expect_rejected(
        args, TypeError, COMPACT + "kv_c: dtype must be bf16 or fp16, got float32", kv_c=args["kv_c"].astype(np.float32)
    )


def test_k_pe_dtype_differs_from_kv_c(args):
    expect_rejected(
        args, TypeError, COMPACT + "k_pe: dtype must match kv_c (bf16), got fp16", k_pe=args["k_pe"].astype(np.float16)
    )


def test_cache_last_dim_not_record_bytes(args):
    expect_rejected(
        args,
        ValueError,
        COMPACT + "kv_cache: last dim must be 368 (record bytes), got 432",
        kv_cache=aligned((2, 16, 432)),
    )


def test_cache_dtype_not_uint8(args):
    expect_rejected(
        args, TypeError, COMPACT + "kv_cache: dtype must be uint8, got int32", kv_cache=aligned((2, 16, 368), np.int32)
    )


def test_zero_num_blocks(args):
    expect_rejected(
        args, ValueError, COMPACT + "kv_cache: num_blocks must be > 0, got (0, 16, 368)", kv_cache=aligned((0, 16, 368))
    )


def test_zero_block_size(args):
    expect_rejected(
        args, ValueError, COMPACT + "kv_cache: block_size must be > 0, got (2, 0, 368)", kv_cache=aligned((2, 0, 368))
    )


def test_slot_mapping_not_int64(args):
    expect_rejected(
        args,
        TypeError,
        COMPACT + "slot_mapping: dtype must be int64, got int32",
        slot_mapping=np.arange(T, dtype=np.int32),
    )


def test_slot_mapping_not_one_dimensional(args):
    expect_rejected(
        args,
        ValueError,
        COMPACT + "slot_mapping: shape must be (T,), got (2, 2)",
        slot_mapping=np.arange(T, dtype=np.int64).reshape(2, 2),
    )


def test_slot_mapping_not_contiguous(args):
    expect_rejected(
        args,
        ValueError,
        COMPACT + "slot_mapping: must be contiguous (stride 1), got stride 2",
        slot_mapping=np.arange(2 * T, dtype=np.int64)[::2],
    )


def test_kv_c_fewer_rows_than_slots(args):
    expect_rejected(
        args,
        ValueError,
        COMPACT + "kv_c: must have at least T = len(slot_mapping) = 4 rows, got (3, 512)",
        kv_c=args["kv_c"][:3],
    )


def test_k_pe_fewer_rows_than_slots(args):
    expect_rejected(
        args,
        ValueError,
        COMPACT + "k_pe: must have at least T = len(slot_mapping) = 4 rows, got (2, 64)",
        k_pe=args["k_pe"][:2],
    )


def test_kv_c_not_innermost_contiguous(args):
    wide = np.repeat(args["kv_c"], 2, axis=1)
    expect_rejected(
        args,
        ValueError,
        COMPACT + "kv_c: rows must be innermost-contiguous (stride 1), got stride 2",
        kv_c=wide[:, ::2],
    )


def test_cache_not_innermost_contiguous(args):
    cache = aligned((2, 16, 736))[:, :, ::2]
    expect_rejected(
        args,
        ValueError,
        COMPACT + "kv_cache: records must be innermost-contiguous (stride 1), got stride 2",
        kv_cache=cache,
    )


def test_kv_c_base_not_4_byte_aligned(args):
    kv_c = aligned((T, 512), np.uint16, offset=2)
    kv_c[...] = args["kv_c"].view(np.uint16)
    expect_rejected(
        args, ValueError, COMPACT + "kv_c: base must be 4-byte aligned, got address % 4 = 2", kv_c=kv_c.view(BF16)
    )


def test_k_pe_row_stride_odd(args):
    k_pe = aligned((T, 65), np.uint16)[:, :64].view(BF16)
    expect_rejected(
        args,
        ValueError,
        COMPACT + "k_pe: row stride must be a multiple of 4 bytes (an even element count), got 65 elements",
        k_pe=k_pe,
    )


def test_cache_base_not_16_byte_aligned(args):
    expect_rejected(
        args,
        ValueError,
        COMPACT + "kv_cache: base must be 16-byte aligned, got address % 16 = 8",
        kv_cache=aligned((2, 16, 368), offset=8),
    )


def test_cache_record_stride_not_16_byte_aligned(args):
    cache = aligned((2, 16, 376))[:, :, :368]
    expect_rejected(
        args,
        ValueError,
        COMPACT + "kv_cache: block and slot strides must be multiples of 16 bytes, got (6016, 376)",
        kv_cache=cache,
    )


def test_tensors_on_different_devices(args):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    cache = torch.zeros((2, 16, 368), dtype=torch.uint8, device="cuda")
    expect_rejected(
        args, ValueError, COMPACT + "kv_cache: must be on the same device as kv_c (cpu), got cuda:0", kv_cache=cache
    )


def test_cache_extent_not_fitting_the_index_type(args):
    # A strided view whose last block would start 2^63 bytes in: only validation may look at it.
    owned = aligned((1, 8, 368))
    huge = np.lib.stride_tricks.as_strided(owned, shape=(3, 8, 368), strides=(2**62, 368, 1))
    with pytest.raises(ValueError) as info:
        concat_and_cache_nvfp4_mla_fp8_rope(**{**args, "kv_cache": huge})
    assert str(info.value) == (
        COMPACT + "kv_cache: slot capacity and byte extent must fit int64 (the writer's index type), got (3, 8, 368)"
    )
    assert not owned.any()


def test_unknown_kv_cache_dtype_lists_accepted_ones(args):
    with pytest.raises(ValueError) as info:
        mlakv.concat_and_cache_mla(args["kv_c"], args["k_pe"], aligned((2, 16, 656)), args["slot_mapping"], "fp4")
    assert str(info.value) == (
        "mlakv::concat_and_cache_mla(fp4): kv_cache_dtype: must be an engine name (auto, fp8, fp8_e4m3, fp8_ds_mla, "
        "nvfp4_ds_mla, v4, v41, v41_fp4) or an mlakv format id (bf16, fp16, fp8_e4m3, fp8_ds_mla, nvfp4_ds_mla, "
        "nvfp4_ds_mla_fp8_rope, nvfp4_ds_mla_fp8_rope_pts, nvfp4_fp8_ds_mla, fp8_ds_mla_v4, fp8_ds_mla_v41, "
        "nvfp4_ds_mla_v41, fp8_ds_mla_v41_planar, nvfp4_ds_mla_v41_planar), got 'fp4'"
    )


def test_fp8_requires_scale(args):
    cache = aligned((2, 16, 576))
    with pytest.raises(ValueError, match=r"scale: this format requires k_scale, a 1-element float32, got none"):
        mlakv.concat_and_cache_mla(args["kv_c"], args["k_pe"], cache, args["slot_mapping"], "fp8")
    assert not cache.any()


def test_scale_of_wrong_dtype(args):
    with pytest.raises(TypeError, match=r"scale: dtype must be float32, got float64"):
        mlakv.concat_and_cache_mla(
            args["kv_c"], args["k_pe"], aligned((2, 16, 576)), args["slot_mapping"], "fp8", np.array([1.0])
        )


def test_empty_slot_mapping_is_a_no_op(args):
    concat_and_cache_nvfp4_mla_fp8_rope(args["kv_c"], args["k_pe"], args["kv_cache"], np.zeros(0, dtype=np.int64))
    assert not args["kv_cache"].any()


def test_gather_rejects_unknown_format():
    with pytest.raises(ValueError, match=r"mlakv::parse_format: format: unknown id 'nvfp5'"):
        mlakv.gather_records("nvfp5", aligned((1, 1, 368)), [0])


def test_gather_rejects_bad_rope_dtype():
    with pytest.raises(ValueError, match=r"rope_dtype: must be bf16 or fp16, got 'fp32'"):
        mlakv.gather_records("fp8_ds_mla", aligned((1, 1, 656)), [0], rope_dtype="fp32")
