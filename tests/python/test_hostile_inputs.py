# SPDX-License-Identifier: Apache-2.0
"""Hostile arguments through every public function: overflowing shapes, overlapping
inputs and outputs, empty arrays, meaningless k_scales, wrong Python types. Each
is a one-line TypeError/ValueError in the library's words, and no byte changes."""

from __future__ import annotations

import numpy as np
import pytest

import mlakv
from conftest import BF16, random_inputs
from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

FP8_DS_MLA = "mlakv::concat_and_cache_mla(fp8_ds_mla): "
GATHER = "mlakv::gather_records(fp8_ds_mla): "
PAGED = "mlakv::gather_records_paged(fp8_ds_mla): "
NOT_AN_ARRAY = "must be an array (numpy, torch, CuPy or another DLPack producer), got "
OVERLAP = "must not share memory with kv_cache (inputs and outputs must not overlap), got overlapping byte ranges"


def aligned(shape, dtype=np.uint8) -> np.ndarray:
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buf = np.zeros(nbytes + 128, dtype=np.uint8)
    start = (-buf.ctypes.data) % 64
    return buf[start : start + nbytes].view(dtype).reshape(shape)


def one_line(exc_info, exc_type, text: str) -> None:
    assert type(exc_info.value) is exc_type, f"{type(exc_info.value).__name__}: {exc_info.value}"
    assert str(exc_info.value) == text
    assert "\n" not in str(exc_info.value)


@pytest.fixture
def writer_args():
    kv_c, k_pe = random_inputs(4, BF16, seed=3)
    return {"kv_c": kv_c, "k_pe": k_pe, "kv_cache": aligned((2, 16, 656)), "slot_mapping": np.arange(4)}


def write_rejected(args, exc_type, text, **changes):
    args = {**args, **changes}
    cache = args["kv_cache"]
    before = np.array(cache, copy=True)
    with pytest.raises((TypeError, ValueError)) as info:
        mlakv.concat_and_cache_mla(args["kv_c"], args["k_pe"], cache, args["slot_mapping"], "fp8_ds_mla", args["scale"])
    one_line(info, exc_type, text)
    np.testing.assert_array_equal(cache, before)


# --- overflow-checked sizes ---------------------------------------------------


def test_kv_c_whose_byte_extent_overflows_int64_is_refused_before_any_read(writer_args):
    # numpy allows 2^60 bytes of elements; strides of 2^20 bytes make the span 2^70
    huge = np.lib.stride_tricks.as_strided(writer_args["kv_c"], shape=(2**50, 512), strides=(2**20, 2))
    write_rejected(
        {**writer_args, "scale": None},
        ValueError,
        FP8_DS_MLA
        + "kv_c: the bytes its shape and strides span must fit int64, got (1125899906842624, 512) with strides "
        "(524288, 1)",
        kv_c=huge,
    )


# --- overlap --------------------------------------------------------------------


def test_kv_c_that_is_a_view_of_the_cache_is_refused(writer_args):
    cache = aligned((2, 16, 1152))
    kv_c = cache.reshape(-1)[: 4 * 1024].view(BF16).reshape(4, 512)
    before = cache.copy()
    with pytest.raises(ValueError) as info:
        mlakv.concat_and_cache_mla(kv_c, writer_args["k_pe"], cache, np.arange(4), "auto")
    one_line(info, ValueError, "mlakv::concat_and_cache_mla(bf16): kv_c: " + OVERLAP)
    np.testing.assert_array_equal(cache, before)


def test_k_pe_that_is_a_view_of_the_cache_is_refused(writer_args):
    k_pe = writer_args["kv_cache"].reshape(-1)[: 4 * 128].view(BF16).reshape(4, 64)
    write_rejected({**writer_args, "scale": None}, ValueError, FP8_DS_MLA + "k_pe: " + OVERLAP, k_pe=k_pe)


def test_gather_into_a_view_of_the_cache_is_refused():
    cache = aligned((2, 16, 656))
    cache[:] = 7
    out = cache.reshape(-1)[: 2 * 576 * 4].view(np.float32).reshape(2, 576)
    with pytest.raises(ValueError) as info:
        mlakv.gather_records("fp8_ds_mla", cache, [0, 1], out=out)
    one_line(info, ValueError, GATHER + "kv_c_out: " + OVERLAP)
    assert (cache == 7).all()


# --- empty arrays ---------------------------------------------------------------


def test_empty_arrays_are_a_no_op_whatever_their_strides():
    cache = aligned((2, 16, 368))
    kv_c, k_pe = np.zeros((0, 512), BF16), np.zeros((0, 64), BF16)
    assert kv_c.strides == (0, 0) or kv_c.size == 0  # numpy 2 gives (0, 0)
    concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, np.zeros(0, np.int64))
    assert not cache.any()
    kv, pe = mlakv.gather_records("nvfp4_ds_mla_fp8_rope", cache, [])
    assert kv.shape == (0, 512) and pe.shape == (0, 64)
    kv, pe = mlakv.gather_records("nvfp4_ds_mla_fp8_rope", cache, np.zeros(0, np.int64), dtype="bfloat16")
    assert kv.shape == (0, 512)


@pytest.mark.parametrize("rows,heads", [(0, 16), (2, 0)])
def test_sparse_decode_with_no_rows_or_no_heads_is_a_no_op(rows, heads):
    cache = aligned((1, 64, 368))
    q = np.zeros((rows, heads, 576), BF16)
    out, lse = mlakv.sparse_mla_decode("nvfp4_ds_mla_fp8_rope", q, cache, np.zeros((rows, 4), np.int32))
    assert out.shape == (rows, heads, 512) and lse.shape == (rows, heads)


# --- k_scale ------------------------------------------------------------------------

SCALE_RULE = (
    "scale: must be a positive normal float32 with 448 * scale finite (1.17549435e-38 <= scale <= 7.59558809e+35), got "
)


@pytest.mark.parametrize(
    "scale,shown",
    [(0.0, "0"), (-0.0, "-0"), (-1.0, "-1"), (float("nan"), "nan"), (float("inf"), "inf"), (1e38, "9.99999968e+37")],
)
def test_meaningless_k_scale_values_are_refused(writer_args, scale, shown):
    write_rejected({**writer_args, "scale": scale}, ValueError, FP8_DS_MLA + SCALE_RULE + shown)


def test_k_scale_of_shape_1_by_1_is_refused(writer_args):
    write_rejected(
        {**writer_args, "scale": np.ones((1, 1), np.float32)},
        ValueError,
        FP8_DS_MLA + "scale: shape must be (1,) or () (one k_scale), got (1, 1)",
    )


def test_k_scale_bool_is_refused(writer_args):
    write_rejected(
        {**writer_args, "scale": True},
        TypeError,
        FP8_DS_MLA + "scale: must be a float or a 1-element float32 array, got bool",
    )


def test_k_scale_in_the_documented_range_is_accepted(writer_args):
    for scale in (1.0, 0.37, np.float32(2.0), np.array(1.5, np.float32), np.array([3.0], np.float32)):
        mlakv.concat_and_cache_mla(
            writer_args["kv_c"], writer_args["k_pe"], writer_args["kv_cache"], np.arange(4), "fp8_ds_mla", scale
        )


def test_inspect_style_k_scale_is_checked_by_the_reader_too():
    with pytest.raises(ValueError) as info:
        mlakv.gather_records("fp8_e4m3", aligned((1, 16, 576)), [0], scale=0.0)
    one_line(info, ValueError, "mlakv::gather_records(fp8_e4m3): " + SCALE_RULE + "0")


# --- output dtype ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "int8", "garbage", "float64"])
def test_gather_output_dtype_other_than_the_documented_spellings_is_refused(dtype):
    with pytest.raises(ValueError) as info:
        mlakv.gather_records("fp8_ds_mla", aligned((1, 16, 656)), [0], dtype=dtype)
    one_line(info, ValueError, GATHER + f"dtype: must be one of 'float32', 'bfloat16', 'bf16', got {dtype!r}")
    args = (aligned((1, 16, 656)), np.zeros((1, 1), np.int32), np.ones(1, np.int32), np.array([0, 1], np.int32))
    with pytest.raises(ValueError) as info:
        mlakv.gather_records_paged("fp8_ds_mla", *args, dtype=dtype)
    one_line(info, ValueError, PAGED + f"dtype: must be one of 'float32', 'bfloat16', 'bf16', got {dtype!r}")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "bf16"])
def test_gather_output_dtype_accepts_the_documented_spellings(dtype):
    kv, pe = mlakv.gather_records("fp8_ds_mla", aligned((1, 16, 656)), [0], dtype=dtype)
    assert kv.dtype == (np.float32 if dtype == "float32" else BF16)


# --- Python types and one-line errors -------------------------------------------------


def test_read_only_cache_is_a_one_line_error(writer_args):
    cache = writer_args["kv_cache"]
    cache.flags.writeable = False
    with pytest.raises(ValueError) as info:
        mlakv.concat_and_cache_mla(writer_args["kv_c"], writer_args["k_pe"], cache, np.arange(4), "fp8_ds_mla")
    one_line(
        info, ValueError, FP8_DS_MLA + "kv_cache: must be writable (it is written in place), got a read-only array"
    )


def test_read_only_out_is_a_one_line_error():
    out = np.zeros((1, 576), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError) as info:
        mlakv.gather_records("fp8_ds_mla", aligned((1, 16, 656)), [0], out=out)
    one_line(info, ValueError, GATHER + "out: must be writable (it is written in place), got a read-only array")


def _hostile_calls():
    kv_c, k_pe = random_inputs(2, BF16, seed=5)
    cache = aligned((1, 16, 656))
    paged = (cache, np.zeros((1, 1), np.int32), np.ones(1, np.int32))
    q = np.zeros((1, 16, 576), BF16)
    idx = np.zeros((1, 4), np.int32)
    w = mlakv.concat_and_cache_mla
    g = mlakv.gather_records
    gp = mlakv.gather_records_paged
    return {
        "kv_c None": (
            lambda: w(None, k_pe, cache, [0, 1], "fp8_ds_mla"),
            TypeError,
            FP8_DS_MLA + "kv_c: must be an array (numpy, torch, CuPy or another DLPack producer), got NoneType",
        ),
        "nested list slots": (
            lambda: w(kv_c, k_pe, cache, [[0], [1, 2]], "fp8_ds_mla"),
            TypeError,
            FP8_DS_MLA + "slot_mapping: a list of slots must hold Python ints, got an element of type list",
        ),
        "int slots": (
            lambda: w(kv_c, k_pe, cache, 3, "fp8_ds_mla"),
            TypeError,
            FP8_DS_MLA + "slot_mapping: must be an array (numpy, torch, CuPy or another DLPack producer), got int",
        ),
        "str scale": (
            lambda: w(kv_c, k_pe, cache, [0, 1], "fp8_ds_mla", "1.0"),
            TypeError,
            FP8_DS_MLA + "scale: must be an array (numpy, torch, CuPy or another DLPack producer), got str",
        ),
        "str stream": (
            lambda: w(kv_c, k_pe, cache, [0, 1], "fp8_ds_mla", None, "abc"),
            TypeError,
            FP8_DS_MLA + "stream: must be an int cudaStream_t or a torch/CuPy stream, got str",
        ),
        "dtype not a str": (
            lambda: w(kv_c, k_pe, cache, [0, 1], 7),
            TypeError,
            "mlakv::concat_and_cache_mla: kv_cache_dtype: must be a str (auto, fp8, fp8_e4m3, fp8_ds_mla, ...), "
            "got int",
        ),
        "object array": (
            lambda: w(np.array([None]), k_pe, cache, [0, 1], "fp8_ds_mla"),
            TypeError,
            FP8_DS_MLA + "kv_c: must be an array of a numeric dtype, got dtype object",
        ),
        "format not a str": (
            lambda: g(None, cache, [0]),
            TypeError,
            "mlakv::gather_records: format: must be a str (a format id of mlakv.formats()), got NoneType",
        ),
        "1-D out": (
            lambda: g("fp8_ds_mla", cache, [0], out=np.zeros(576, np.float32)),
            ValueError,
            GATHER + "out: shape must be (N, 576) with N = 1, got (576,)",
        ),
        "float slots": (
            lambda: g("fp8_ds_mla", cache, [0.5]),
            TypeError,
            GATHER + "slots: a list of slots must hold Python ints, got an element of type float",
        ),
        "negative cu_seq_lens[-1]": (
            lambda: gp("fp8_ds_mla", *paged, np.array([0, -5], np.int32)),
            ValueError,
            PAGED + "cu_seq_lens: cu_seq_lens[-1] (the row count) must be >= 0, got -5",
        ),
        "num_rows 2**40": (
            lambda: gp("fp8_ds_mla", *paged, np.array([0, 1], np.int32), num_rows=2**40),
            ValueError,
            None,
        ),
        "num_rows str": (
            lambda: gp("fp8_ds_mla", *paged, np.array([0, 1], np.int32), num_rows="3"),
            TypeError,
            PAGED + "num_rows: must be an int, got str",
        ),
        "decode q list": (
            lambda: mlakv.sparse_mla_decode("fp8_ds_mla", [[1.0]], cache, idx),
            TypeError,
            "mlakv::sparse_mla_decode(fp8_ds_mla): q: " + NOT_AN_ARRAY + "list",
        ),
        "decode sm_scale str": (
            lambda: mlakv.sparse_mla_decode("fp8_ds_mla", q, cache, idx, sm_scale="x"),
            TypeError,
            "mlakv::sparse_mla_decode(fp8_ds_mla): sm_scale: must be a float (None: 1/sqrt(576)), got str",
        ),
        "merge None": (
            lambda: mlakv.merge_attention_states(None, None, None, None),
            TypeError,
            "mlakv::merge_attention_states: out_a: " + NOT_AN_ARRAY + "NoneType",
        ),
        "workspace size negative": (
            lambda: mlakv.sparse_mla_decode_workspace_size(-1, 16, 64),
            ValueError,
            "mlakv::sparse_mla_decode_workspace_size: rows: must be >= 0, got -1",
        ),
        "resolve_format None": (
            lambda: mlakv.resolve_format(None),
            TypeError,
            "mlakv::resolve_format: kv_cache_dtype: must be a str (an engine's kv_cache_dtype or a format id), "
            "got NoneType",
        ),
        "resolve_format record_bytes str": (
            lambda: mlakv.resolve_format("fp8", record_bytes="656"),
            TypeError,
            "mlakv::resolve_format(fp8): record_bytes: must be an int, got str",
        ),
        "resolve_format record_bytes huge": (
            lambda: mlakv.resolve_format("fp8", record_bytes=2**40),
            ValueError,
            "mlakv::resolve_format(fp8): record_bytes: must be < 2^31, got 1099511627776",
        ),
        "resolve_format fp8_rope int": (
            lambda: mlakv.resolve_format("nvfp4_ds_mla", 368, fp8_rope=2),
            TypeError,
            "mlakv::resolve_format(nvfp4_ds_mla): fp8_rope: must be a bool, got int",
        ),
        "compact per_token_scale str": (
            lambda: concat_and_cache_nvfp4_mla_fp8_rope(
                kv_c, k_pe, aligned((1, 16, 368)), [0, 1], per_token_scale="yes"
            ),
            TypeError,
            "mlakv::concat_and_cache_nvfp4_mla_fp8_rope(nvfp4_ds_mla_fp8_rope): per_token_scale: must be a bool, "
            "got str",
        ),
    }


@pytest.mark.parametrize("case", list(_hostile_calls()))
def test_public_functions_check_their_arguments_with_one_line_errors(case):
    call, exc_type, text = _hostile_calls()[case]
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert type(info.value) is exc_type, f"{type(info.value).__name__}: {info.value}"
    message = str(info.value)
    assert "\n" not in message and message.startswith("mlakv::"), message
    assert "incompatible function arguments" not in message
    if text is not None:
        assert message == text
    else:
        assert "num_rows: cannot allocate" in message
