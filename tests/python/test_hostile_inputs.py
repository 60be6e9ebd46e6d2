# SPDX-License-Identifier: Apache-2.0
"""Hostile arguments through every public function: overflowing shapes, overlapping
inputs and outputs, empty arrays, meaningless k_scales, wrong Python types. Each
is a one-line TypeError/ValueError in the library's words, and no byte changes."""

from __future__ import annotations

import numpy as np
import pytest

import mlakv
from conftest import BF16, BrokenExporter, DLPackOnly, random_inputs
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
        "writer seam fp8_rope array": (
            lambda: __import__("mlakv.integrations.vllm").integrations.vllm.MlaKvCacheWriter(
                "fp8", fp8_rope=np.array([1, 2])
            ),
            TypeError,
            "mlakv::MlaKvCacheWriter(fp8): fp8_rope: must be a bool, got ndarray",
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


# --- str arguments that are no text ----------------------------------------------------

SURROGATE, WITH_NUL = "\ud800", "fp8_ds_mla\0x"
NO_TEXT = {
    SURROGATE: "must be valid Unicode (a lone surrogate has no UTF-8 encoding), got '\\ud800'",
    WITH_NUL: "must not contain a NUL character, got 'fp8_ds_mla\\x00x'",
}


def _str_argument_calls(text: str):
    """(call, function, argument) for every public function's str argument, `text` in it; the writers' cache."""
    from mlakv.integrations.vllm import MlaKvCacheWriter

    kv_c, k_pe = random_inputs(2, BF16, seed=5)
    cache = aligned((1, 16, 656))
    paged = (cache, np.zeros((1, 1), np.int32), np.ones(1, np.int32), np.array([0, 1], np.int32))
    q, idx = np.zeros((1, 16, 512), BF16), np.zeros((1, 4), np.int32)
    v4_cache = aligned((1, 64, 584))
    writer = MlaKvCacheWriter("fp8_ds_mla", fp8_rope=False)
    calls = [
        (lambda: mlakv.concat_and_cache_mla(kv_c, k_pe, cache, [0, 1], text), "concat_and_cache_mla", "kv_cache_dtype"),
        (lambda: mlakv.gather_records(text, cache, [0]), "gather_records", "format"),
        (lambda: mlakv.gather_records_paged(text, *paged), "gather_records_paged", "format"),
        (lambda: mlakv.sparse_mla_decode(text, q, v4_cache, idx), "sparse_mla_decode", "format"),
        (lambda: mlakv.sparse_mla_prefill(text, q, v4_cache, idx), "sparse_mla_prefill", "format"),
        (
            lambda: mlakv.sparse_mla_decode("fp8_ds_mla_v4", q, v4_cache, idx, extra_format=text),
            "sparse_mla_decode(fp8_ds_mla_v4)",
            "extra_format",
        ),
        (lambda: mlakv.page_bytes(text, 64), "page_bytes", "format"),
        (lambda: mlakv.resolve_format(text), "resolve_format", "kv_cache_dtype"),
        (lambda: MlaKvCacheWriter(text), "MlaKvCacheWriter", "kv_cache_dtype"),
        (lambda: writer.update(kv_c, k_pe, cache, [0, 1], text, None), "MlaKvCacheWriter.update", "kv_cache_dtype"),
    ]
    return calls, cache


@pytest.mark.parametrize("text", list(NO_TEXT), ids=["lone_surrogate", "embedded_nul"])
def test_str_arguments_that_are_no_text_are_refused_naming_them(text):
    """A NUL would cut the library's message short (a C string) and a lone surrogate has no UTF-8: both are
    refused naming the argument, and the text stays out of the ``mlakv::function(format)`` prefix."""
    calls, cache = _str_argument_calls(text)
    for call, function, name in calls:
        with pytest.raises(ValueError) as info:
            call()
        one_line(info, ValueError, f"mlakv::{function}: {name}: {NO_TEXT[text]}")
    assert not cache.any()


def test_op_functions_refuse_str_arguments_that_are_no_text_naming_them():
    """The extension's own functions (what the package calls) refuse them too, never with std::bad_cast."""
    cache = aligned((1, 16, 656))
    kv_c, k_pe = (x.view(np.uint16) for x in random_inputs(2, BF16, seed=5))
    for text, rule in NO_TEXT.items():
        with pytest.raises(ValueError) as info:
            mlakv._mlakv.gather_records(
                text,
                cache,
                np.zeros(1, np.int64),
                kv_c=np.zeros((1, 512), np.float32),
                k_pe=np.zeros((1, 64), np.float32),
            )
        one_line(info, ValueError, f"mlakv::gather_records: format: {rule}")
        with pytest.raises(ValueError) as info:
            mlakv._mlakv.concat_and_cache_mla((kv_c, "bf16"), (k_pe, "bf16"), cache, np.arange(2), text, None)
        one_line(info, ValueError, f"mlakv::concat_and_cache_mla: kv_cache_dtype: {rule}")
    assert not cache.any()


# --- arrays DLPack cannot carry as they are -------------------------------------------


def test_numpy_arrays_in_the_other_byte_order_are_refused_naming_them(writer_args):
    """DLPack has no byte order: a big-endian array's bytes would be read swapped."""
    swapped = {
        "kv_c": writer_args["kv_c"].view(np.uint16).astype(">f2"),
        "slot_mapping": np.arange(4, dtype=">i8"),
        "kv_cache": aligned((2, 16, 328), ">u2"),
    }
    rule = "must be in the machine's byte order (DLPack has no other), got dtype "
    for name, array in swapped.items():
        write_rejected(
            {**writer_args, "scale": None}, TypeError, FP8_DS_MLA + f"{name}: {rule}{array.dtype}", **{name: array}
        )
    with pytest.raises(TypeError) as info:
        mlakv.gather_records("fp8_ds_mla", aligned((1, 16, 656)), np.zeros(1, ">i8"))
    one_line(info, TypeError, GATHER + "slots: " + rule + ">i8")
    lse = np.zeros((1, 2), ">f4")
    with pytest.raises(TypeError) as info:
        mlakv.merge_attention_states(np.zeros((1, 2, 4), np.float32), lse, np.zeros((1, 2, 4), np.float32), lse)
    one_line(info, TypeError, "mlakv::merge_attention_states: lse_a: " + rule + ">f4")


def read_only(shape, dtype=np.uint8) -> np.ndarray:
    array = aligned(shape, dtype)
    array.flags.writeable = False
    return array


def test_read_only_dlpack_producer_as_cache_or_output_is_refused_naming_it(writer_args):
    cache = read_only((2, 16, 656))
    with pytest.raises(ValueError) as info:
        mlakv.concat_and_cache_mla(
            writer_args["kv_c"], writer_args["k_pe"], DLPackOnly(cache), np.arange(4), "fp8_ds_mla"
        )
    writable = "must be writable (it is written in place), got a read-only array"
    one_line(info, ValueError, FP8_DS_MLA + "kv_cache: " + writable)
    with pytest.raises(ValueError) as info:
        mlakv.gather_records("fp8_ds_mla", aligned((1, 16, 656)), [0], out=DLPackOnly(read_only((1, 576), np.float32)))
    one_line(info, ValueError, "mlakv::gather_records_out(fp8_ds_mla): out: " + writable)
    q, idx = np.zeros((1, 16, 576), BF16), np.zeros((1, 4), np.int32)
    out, lse = DLPackOnly(read_only((1, 16, 512), np.uint16)), np.zeros((1, 16), np.float32)
    with pytest.raises(ValueError) as info:
        mlakv.sparse_mla_decode("fp8_ds_mla", q, aligned((1, 16, 656)), idx, out=out, lse=lse)
    one_line(info, ValueError, "mlakv::sparse_mla_decode(fp8_ds_mla): out: " + writable)
    from mlakv.integrations.vllm import MlaKvCacheWriter

    with pytest.raises(ValueError) as info:
        MlaKvCacheWriter("fp8_ds_mla", fp8_rope=False).update(
            writer_args["kv_c"], writer_args["k_pe"], DLPackOnly(cache), np.arange(4), "fp8_ds_mla", None
        )
    one_line(info, ValueError, "mlakv::MlaKvCacheWriter.update(fp8_ds_mla): kv_cache: " + writable)


def test_dlpack_producer_that_cannot_export_is_refused_with_its_reason(writer_args):
    write_rejected(
        {**writer_args, "scale": None},
        TypeError,
        FP8_DS_MLA + "kv_c: must be an array its producer can export through DLPack, got BrokenExporter "
        "(BufferError: this producer exports nothing)",
        kv_c=BrokenExporter(),
    )


# --- numbers beyond the library's types -------------------------------------------------


def test_update_with_kv_cache_dtype_none_is_refused_naming_it(writer_args):
    from mlakv.integrations.vllm import MlaKvCacheWriter

    writer = MlaKvCacheWriter("fp8_ds_mla", fp8_rope=False)
    cache = writer_args["kv_cache"]
    with pytest.raises(TypeError) as info:
        writer.update(writer_args["kv_c"], writer_args["k_pe"], cache, np.arange(4), None, None)
    one_line(
        info,
        TypeError,
        "mlakv::MlaKvCacheWriter.update: kv_cache_dtype: must be a str (the engine's kv_cache_dtype), got NoneType",
    )
    assert not cache.any()


def test_ints_beyond_int64_are_refused_naming_them():
    from mlakv.context_parallel import dcp_local_slots

    idx, req, table = np.zeros((1, 4), np.int32), np.zeros(1, np.int32), np.zeros((1, 4), np.int32)
    layout = {"world_size": 2, "rank": 0, "block_size": 64}
    for name, value, shown in (
        ("world_size", 2**63, "9223372036854775808"),
        ("rank", -(2**63) - 1, "-9223372036854775809"),
        ("block_size", 10**5000, "an int of 16610 bits"),  # too many digits for str()
    ):
        with pytest.raises(ValueError) as info:
            dcp_local_slots(idx, req, table, **{**layout, name: value})
        one_line(
            info, ValueError, f"mlakv::dcp_local_slots: layout.{name}: must fit int64 (in [-2^63, 2^63)), got {shown}"
        )
    paged = (aligned((1, 16, 656)), np.zeros((1, 1), np.int32), np.ones(1, np.int32), np.array([0, 1], np.int32))
    with pytest.raises(ValueError) as info:
        mlakv.gather_records_paged("fp8_ds_mla", *paged, num_rows=2**64)
    one_line(info, ValueError, PAGED + "num_rows: must be < 2^63, got 18446744073709551616")
    with pytest.raises(ValueError) as info:
        mlakv.page_bytes("fp8_ds_mla", 2**63)
    one_line(info, ValueError, "mlakv::page_bytes(fp8_ds_mla): block_size: must be < 2^63, got 9223372036854775808")
    with pytest.raises(ValueError) as info:
        mlakv._mlakv.dcp_local_slots(idx, req, table, world_size=2**63, rank=0, block_size=64, local_slots=idx.copy())
    one_line(
        info,
        ValueError,
        "mlakv::dcp_local_slots: world_size: must fit int64 (in [-2^63, 2^63)), got 9223372036854775808",
    )


@pytest.mark.parametrize("value,shown", [(10**400, "inf"), (-(10**400), "-inf")])
def test_scales_beyond_the_float_range_are_refused_by_the_library_rule(writer_args, value, shown):
    """An int too large for a float is +-inf, as a float too large for float32 is: the library's own
    rule refuses it, naming the argument (never a raw OverflowError)."""
    write_rejected({**writer_args, "scale": value}, ValueError, FP8_DS_MLA + SCALE_RULE + shown)
    q, idx = np.zeros((1, 16, 576), BF16), np.zeros((1, 4), np.int32)
    with pytest.raises(ValueError) as info:
        mlakv.sparse_mla_decode("fp8_ds_mla", q, aligned((1, 16, 656)), idx, sm_scale=value)
    one_line(
        info,
        ValueError,
        f"mlakv::sparse_mla_decode(fp8_ds_mla): sm_scale: must be finite (0: 1/sqrt(576)), got {shown}",
    )


def test_op_functions_refuse_none_and_wrong_types_naming_the_argument():
    """None for a required argument, a bool for an int: named errors, not std::bad_variant_access."""
    cache = aligned((1, 16, 656))
    outputs = {"kv_c": np.zeros((1, 512), np.float32), "k_pe": np.zeros((1, 64), np.float32)}
    with pytest.raises(TypeError) as info:
        mlakv._mlakv.gather_records(None, cache, np.zeros(1, np.int64), **outputs)
    one_line(info, TypeError, "mlakv::gather_records: format: must be a str, got NoneType")
    with pytest.raises(TypeError) as info:
        mlakv._mlakv.gather_records("fp8_ds_mla", cache, None, **outputs)
    one_line(info, TypeError, GATHER + "slots: " + NOT_AN_ARRAY + "NoneType")
    with pytest.raises(TypeError) as info:
        mlakv._mlakv.gather_records("fp8_ds_mla", cache, np.zeros(1, np.int64), rope_dtype=None, **outputs)
    one_line(info, TypeError, GATHER + "rope_dtype: must be a str, got NoneType")
    with pytest.raises(ValueError) as info:
        mlakv._mlakv.gather_records("fp8_ds_mla", cache, np.zeros(1, np.int64), stream=-1, **outputs)
    one_line(info, ValueError, GATHER + "stream: must be a cudaStream_t in [0, 2^64), got -1")
    with pytest.raises(TypeError) as info:
        mlakv._mlakv.sparse_mla_decode_workspace_size(True, 16, 64, (False, 0))
    one_line(info, TypeError, "mlakv::sparse_mla_decode_workspace_size: rows: must be an int, got bool")


# --- torch ops: devices, allocation, text ---------------------------------------------------


@pytest.fixture
def torch_ops():
    torch = pytest.importorskip("torch")
    mlakv_torch = pytest.importorskip("mlakv.torch")
    return torch, mlakv_torch


def _valid_op_calls(torch):
    """One valid CPU call of every op with a tensor argument: (op, positional args, keyword args)."""
    g = torch.Generator().manual_seed(7)
    kv_c, k_pe = torch.randn(2, 512, generator=g).bfloat16(), torch.randn(2, 64, generator=g).bfloat16()
    slots, i32 = torch.arange(2), {"dtype": torch.int32}
    cache, compact, e4m3 = (torch.zeros(1, 64, n, dtype=torch.uint8) for n in (656, 368, 576))
    q, idx = torch.zeros(1, 16, 576).bfloat16(), torch.zeros(1, 4, **i32)
    out, lse = torch.zeros(1, 16, 512), torch.zeros(1, 16)
    table = torch.zeros(1, 4, **i32)
    return [
        ("concat_and_cache_mla", (kv_c, k_pe, cache, slots, "fp8_ds_mla", None), {}),
        ("concat_and_cache_mla", (kv_c, k_pe, e4m3, slots, "fp8", torch.ones(1)), {}),
        ("concat_and_cache_nvfp4_mla_fp8_rope", (kv_c, k_pe, compact, slots, None, False), {}),
        (
            "mla_kv_cache_writer_update",
            (kv_c, k_pe, compact, slots, "nvfp4_ds_mla", None, "nvfp4_ds_mla", True, False),
            {},
        ),
        ("gather_records", ("fp8_ds_mla", cache, slots), {}),
        ("gather_records_out", ("fp8_ds_mla", cache, slots, torch.zeros(2, 576)), {}),
        (
            "gather_records_paged",
            ("fp8_ds_mla", cache, table, torch.ones(1, **i32), torch.tensor([0, 1], **i32), 2),
            {},
        ),
        ("sparse_mla_decode", ("nvfp4_ds_mla_fp8_rope", q, compact, idx), {}),
        ("sparse_mla_prefill", ("nvfp4_ds_mla_fp8_rope", q, compact, idx), {}),
        ("merge_attention_states", (out, lse, out, lse), {}),
        ("dcp_local_slots", (idx, torch.zeros(1, **i32), table), {"world_size": 2, "rank": 0, "block_size": 64}),
        ("merge_attention_states_stacked", (torch.stack([out, out]), torch.stack([lse, lse])), {}),
    ]


def test_torch_ops_refuse_a_meta_tensor_among_cpu_tensors_naming_it(torch_ops):
    """A meta tensor among CPU ones sends the call to the fake implementation, which returned outputs
    nobody wrote (uninitialised CPU memory) and wrote nothing; a meta k_scale crashed. Every op refuses
    it, naming the tensor, and writes nothing."""
    torch, mlakv_torch = torch_ops
    for name, args, kwargs in _valid_op_calls(torch):
        getattr(torch.ops.mlakv, name)(*args, **kwargs)  # valid as it is
        arguments = next(op["arguments"] for op in mlakv_torch._TABLE if op["name"] == name)
        tensors = [(i, a["name"]) for i, a in enumerate(arguments[: len(args)]) if isinstance(args[i], torch.Tensor)]
        first = tensors[0][1]
        for i, moved in tensors:
            cpu = [a for a in args if isinstance(a, torch.Tensor)]
            before = [t.clone() for t in cpu]
            changed = list(args)
            changed[i] = args[i].to("meta")
            with pytest.raises(ValueError) as info:
                getattr(torch.ops.mlakv, name)(*changed, **kwargs)
            message = str(info.value)
            if moved == first:
                assert f": must be on the same device as {first} (meta), got cpu" in message, message
            elif moved == "scale":
                assert message.endswith("scale: must be on the CPU or on the tensors' device (cpu), got meta"), message
            else:
                assert message.endswith(f": {moved}: must be on the same device as {first} (cpu), got meta"), message
            assert message.startswith(f"mlakv::{name}"), message
            for t, b in zip(cpu, before):
                assert torch.equal(t, b), f"{name}: {moved} on meta changed a CPU tensor"


def test_torch_ops_on_meta_tensors_alone_still_give_the_output_shapes(torch_ops):
    torch, _ = torch_ops
    for name, args, kwargs in _valid_op_calls(torch):
        meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
        getattr(torch.ops.mlakv, name)(*meta, **kwargs)


def test_torch_op_output_too_large_to_allocate_is_refused_naming_its_size_argument(torch_ops):
    """gather_records_paged's num_rows = 2**40 (2.5 PB): the op names num_rows, as the Python function does,
    under either registration, and so does the public function on torch tensors (which routes to the op)."""
    torch, _ = torch_ops
    i32 = {"dtype": torch.int32}
    args = ("fp8_ds_mla", torch.zeros(1, 16, 656, dtype=torch.uint8), torch.zeros(1, 1, **i32), torch.ones(1, **i32))
    args += (torch.tensor([0, 1], **i32),)
    prefix = PAGED + "num_rows: cannot allocate a (1099511627776, 576) torch.float32 output, got "
    for call in (
        lambda: torch.ops.mlakv.gather_records_paged(*args, 2**40),
        lambda: mlakv.gather_records_paged(*args, num_rows=2**40),
    ):
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value).startswith(prefix) and "\n" not in str(info.value), str(info.value)


def test_torch_ops_refuse_a_str_with_a_nul_naming_it(torch_ops):
    torch, _ = torch_ops
    cache = torch.zeros(1, 16, 656, dtype=torch.uint8)
    kv_c, k_pe = torch.zeros(2, 512).bfloat16(), torch.zeros(2, 64).bfloat16()
    with pytest.raises(ValueError) as info:
        torch.ops.mlakv.concat_and_cache_mla(kv_c, k_pe, cache, torch.arange(2), WITH_NUL, None)
    one_line(info, ValueError, "mlakv::concat_and_cache_mla: kv_cache_dtype: " + NO_TEXT[WITH_NUL])
    with pytest.raises(ValueError) as info:
        torch.ops.mlakv.gather_records("fp8_ds_mla", cache, torch.arange(2), rope_dtype="bf16\0")
    one_line(info, ValueError, GATHER + "rope_dtype: must not contain a NUL character, got 'bf16\\x00'")
    assert not cache.any()


def test_writer_seam_on_torch_tensors_checks_what_the_op_schema_would_refuse(torch_ops):
    """MlaKvCacheWriter.update on torch tensors with a kv_cache_dtype that is no str, or a float k_scale:
    the checked path, naming the argument (torch's schema would answer with its own text)."""
    torch, _ = torch_ops
    from mlakv.integrations.vllm import MlaKvCacheWriter

    writer = MlaKvCacheWriter("fp8", fp8_rope=False)
    kv_c, k_pe = torch.randn(2, 512).bfloat16(), torch.randn(2, 64).bfloat16()
    cache = torch.zeros(1, 16, 576, dtype=torch.uint8)
    with pytest.raises(TypeError) as info:
        writer.update(kv_c, k_pe, cache, torch.arange(2), None, torch.ones(1))
    one_line(
        info,
        TypeError,
        "mlakv::MlaKvCacheWriter.update: kv_cache_dtype: must be a str (the engine's kv_cache_dtype), got NoneType",
    )
    assert not cache.any()
    writer.update(kv_c, k_pe, cache, torch.arange(2), "fp8", 1.0)  # a float k_scale is taken as 1.0
    reference = torch.zeros_like(cache)
    torch.ops.mlakv.concat_and_cache_mla(kv_c, k_pe, reference, torch.arange(2), "fp8", torch.ones(1))
    assert torch.equal(cache, reference)
