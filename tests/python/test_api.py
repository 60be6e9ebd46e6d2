# SPDX-License-Identifier: Apache-2.0
"""The Python surface: metadata, entry points, scale forms, the reader, the installed command."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

import mlakv
from conftest import BF16, random_inputs
from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

RECORD_BYTES = {
    "bf16": 1152,
    "fp16": 1152,
    "fp8_e4m3": 576,
    "fp8_ds_mla": 656,
    "nvfp4_ds_mla": 432,
    "nvfp4_ds_mla_fp8_rope": 368,
    "nvfp4_ds_mla_fp8_rope_pts": 368,
    "nvfp4_fp8_ds_mla": 352,
}
# The DeepSeek V4 family (448 NoPE + 64 RoPE values): V4's block-planar page,
# V4.1's token-major records and block-planar pages, test_fp8_ds_mla_v4_* and test_v41_* below.
V4_RECORD_BYTES = {
    "fp8_ds_mla_v4": 584,
    "fp8_ds_mla_v41": 528,
    "nvfp4_ds_mla_v41": 288,
    "fp8_ds_mla_v41_planar": 528,
    "nvfp4_ds_mla_v41_planar": 288,
}


def test_formats_lists_the_abi_formats_with_fields_geometry_and_page():
    fmts = mlakv.formats()
    assert {f["id"]: f["record_bytes"] for f in fmts} == RECORD_BYTES | V4_RECORD_BYTES
    for f in fmts:
        assert sum(field["bytes"] for field in f["fields"]) == f["record_bytes"]
        assert f["cache_alignment"] == 16
        page = f["page"]
        assert page["data_row_bytes"] + page["scale_row_bytes"] == f["record_bytes"]
        if f["id"] in RECORD_BYTES:
            assert page == {
                "kind": "token_major",
                "data_row_bytes": f["record_bytes"],
                "scale_row_bytes": 0,
                "page_multiple": 1,
            }
            assert f["geometry"] == {"nope_dims": 512, "rope_dims": 64, "v_includes_rope": False}
            assert {field["region"] for field in f["fields"]} == {"data"}
    v4 = next(f for f in fmts if f["id"] == "fp8_ds_mla_v4")
    assert v4["page"] == {"kind": "block_planar", "data_row_bytes": 576, "scale_row_bytes": 8, "page_multiple": 576}
    assert v4["geometry"] == {"nope_dims": 448, "rope_dims": 64, "v_includes_rope": True}
    assert [(x["name"], x["region"], x["element"], x["group"]) for x in v4["fields"]] == [
        ("nope", "data", "E4M3", 64),
        ("rope", "data", "bf16", 0),
        ("tile_scales", "scale", "UE8M0", 64),
        ("scale_pad", "scale", "zero", 0),
    ]
    for fid, code_element, tile in (("fp8_ds_mla_v41", "E4M3", 32), ("nvfp4_ds_mla_v41", "E2M1x2", 16)):
        v41 = next(f for f in fmts if f["id"] == fid)
        assert v41["page"] == {
            "kind": "token_major",
            "data_row_bytes": v41["record_bytes"],
            "scale_row_bytes": 0,
            "page_multiple": 1,
        }
        assert v41["geometry"] == {"nope_dims": 448, "rope_dims": 64, "v_includes_rope": True}
        scale_element = "UE8M0" if fid == "fp8_ds_mla_v41" else "E4M3"
        assert [(x["name"], x["region"], x["element"], x["group"]) for x in v41["fields"]] == [
            ("codes", "data", code_element, tile),
            ("tile_scales", "data", scale_element, tile),
        ]
        planar = next(f for f in fmts if f["id"] == fid + "_planar")
        code_row, scale_row = (512, 16) if fid == "fp8_ds_mla_v41" else (256, 32)
        assert planar["page"] == {
            "kind": "block_planar",
            "data_row_bytes": code_row,
            "scale_row_bytes": scale_row,
            "page_multiple": 512,
        }
        assert planar["geometry"] == v41["geometry"]
        assert [(x["name"], x["region"], x["element"], x["group"]) for x in planar["fields"]] == [
            ("codes", "data", code_element, tile),
            ("tile_scales", "scale", scale_element, tile),
        ]


def test_fp8_ds_mla_v4_round_trips_through_the_engines_view_of_a_page():
    rng = np.random.default_rng(4)
    row = rng.standard_normal((5, 512)).astype(BF16)  # an engine's [T, 512]: 448 NoPE + 64 RoPE
    pages = np.zeros((3, 37440), np.uint8)  # 64-token pages, padded to 65 x 576
    view = np.lib.stride_tricks.as_strided(pages, shape=(3, 64, 584), strides=(37440, 584, 1))
    slots = np.array([0, 63, 64, 130, -1])
    mlakv.concat_and_cache_mla(row[:, :448], row[:, 448:], view, slots, "fp8_ds_mla")  # 584 B: the V4 page
    assert not pages[:, 64 * 584 :].any()  # the page padding is never written
    nope, rope = mlakv.gather_records("fp8_ds_mla_v4", view, slots)
    assert nope.shape == (5, 448) and rope.shape == (5, 64)
    np.testing.assert_array_equal(rope[:4], row[:4, 448:].astype(np.float32))
    np.testing.assert_allclose(nope[:4], row[:4, :448].astype(np.float32), rtol=1 / 16, atol=2.0**-10)
    assert not nope[4].any() and not rope[4].any()
    assert mlakv.resolve_format("fp8_ds_mla", 584) == "fp8_ds_mla_v4"


@pytest.mark.parametrize(
    ("name", "record_bytes", "fid"),
    [("fp8_ds_mla_v41", 528, "fp8_ds_mla_v41"), ("nvfp4_ds_mla_v41", 288, "nvfp4_ds_mla_v41")],
)
def test_v41_records_round_trip_through_a_token_major_cache(name, record_bytes, fid):
    rng = np.random.default_rng(5)
    row = rng.standard_normal((5, 512)).astype(BF16)  # an engine's [T, 512]: 448 NoPE + 64 RoPE
    cache = np.full((3, 64, record_bytes), 0xAB, np.uint8)
    slots = np.array([0, 63, 64, 130, -1])
    mlakv.concat_and_cache_mla(row[:, :448], row[:, 448:], cache, slots, name)
    written = np.zeros(3 * 64, bool)
    written[slots[:4]] = True
    assert (cache.reshape(3 * 64, -1)[~written] == 0xAB).all()  # other records untouched
    nope, rope = mlakv.gather_records(fid, cache, slots)
    assert nope.shape == (5, 448) and rope.shape == (5, 64)
    got = np.concatenate([nope[:4], rope[:4]], axis=1)
    want = row[:4].astype(np.float32)
    if fid == "fp8_ds_mla_v41":
        np.testing.assert_allclose(got, want, rtol=1 / 16, atol=2.0**-10)
    else:  # E2M1: within half a step (a quarter of the value's binade) or one tile scale
        tile_amax = np.abs(want).reshape(4, 32, 16).max(axis=2).repeat(16, axis=1)
        assert (np.abs(got - want) <= np.maximum(np.abs(want) / 4, tile_amax / 6 * 1.07)).all()
    assert not nope[4].any() and not rope[4].any()
    assert mlakv.resolve_format(name, record_bytes) == fid


@pytest.mark.parametrize(("name", "record_bytes", "code_row"), [("fp8_ds_mla", 528, 512), ("nvfp4_ds_mla", 288, 256)])
def test_v41_planar_pages_round_trip_through_vllms_view_and_match_the_token_major_rows(name, record_bytes, code_row):
    rng = np.random.default_rng(6)
    row = rng.standard_normal((4, 512)).astype(BF16)
    fid = mlakv.resolve_format(name, record_bytes)  # vLLM's name at the V4.1 width: the block-planar page
    pages = np.full((3, 5 * record_bytes + 512), 0xAB, np.uint8)  # 5-token pages, block stride past the padding
    view = np.lib.stride_tricks.as_strided(pages, shape=(3, 5, record_bytes), strides=(pages.shape[1], record_bytes, 1))
    slots = np.array([0, 4, 7, 14])
    mlakv.concat_and_cache_mla(row[:, :448], row[:, 448:], view, slots, name)
    records = np.zeros((1, 4, record_bytes), np.uint8)  # the same tokens as FlashMLA's token-major records
    mlakv.concat_and_cache_mla(row[:, :448], row[:, 448:], records, np.arange(4), fid.removesuffix("_planar"))
    for k, slot in enumerate(slots):
        page, t = divmod(int(slot), 5)
        np.testing.assert_array_equal(pages[page, t * code_row : (t + 1) * code_row], records[0, k, :code_row])
        scale = 5 * code_row + t * (record_bytes - code_row)
        np.testing.assert_array_equal(pages[page, scale : scale + record_bytes - code_row], records[0, k, code_row:])
    assert (pages[:, 5 * record_bytes :] == 0xAB).all()  # the page padding is never written
    nope, rope = mlakv.gather_records(fid, view, slots)
    want_nope, want_rope = mlakv.gather_records(fid.removesuffix("_planar"), records, np.arange(4))
    np.testing.assert_array_equal(nope, want_nope)
    np.testing.assert_array_equal(rope, want_rope)


def test_formats_state_each_formats_policy():
    policy = {f["id"]: f["policy"] for f in mlakv.formats()}
    assert {fmt for fmt, p in policy.items() if p["needs_k_scale"]} == {"fp8_e4m3"}
    assert {fmt: p["input_dtype"] for fmt, p in policy.items() if p["input_dtype"]} == {"bf16": "bf16", "fp16": "fp16"}


def test_capabilities_cover_every_format_on_the_cpu():
    caps = mlakv.capabilities()
    cpu = {c["format"] for c in caps if c["backend"] == "cpu" and c["writer"] and c["reader"]}
    assert cpu == set(RECORD_BYTES) | set(V4_RECORD_BYTES)
    decode = {c["format"] for c in caps if c["backend"] == "cpu" and c["decode"]}
    assert decode == set(RECORD_BYTES) | set(V4_RECORD_BYTES)  # the V4 family too (d_qk 512): test_v4_decode.py


def test_version_is_a_string():
    assert isinstance(mlakv.__version__, str) and mlakv.__version__.count(".") == 2


def test_import_mlakv_does_not_import_the_compact_writer_module():
    code = "import sys, mlakv; mlakv.concat_and_cache_mla; print('mlakv.kv_cache' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def write(fmt: str, kv_c, k_pe, slots, scale=None, blocks=1, block_size=None) -> np.ndarray:
    block_size = block_size or len(slots)
    cache = np.zeros((blocks, block_size, RECORD_BYTES[fmt]), dtype=np.uint8)
    if fmt.startswith("nvfp4_ds_mla_fp8_rope"):
        concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, slots, scale, per_token_scale=fmt.endswith("pts"))
    else:
        mlakv.concat_and_cache_mla(kv_c, k_pe, cache, slots, fmt if fmt not in ("bf16", "fp16") else "auto", scale)
    return cache


def test_scale_accepts_float_numpy_scalar_and_one_element_array(bf16_inputs):
    kv_c, k_pe = bf16_inputs
    slots = np.arange(8, dtype=np.int64)
    records = [
        write("fp8_e4m3", kv_c, k_pe, slots, s)
        for s in (0.5, np.float32(0.5), np.array([0.5], dtype=np.float32), np.array(0.5, dtype=np.float32))
    ]
    for r in records[1:]:
        np.testing.assert_array_equal(r, records[0])
    assert not np.array_equal(records[0], write("fp8_e4m3", kv_c, k_pe, slots, 1.0))


def test_stock_entry_point_squeezes_k_pe_and_flattens_slot_column(bf16_inputs):
    kv_c, k_pe = bf16_inputs
    slots = np.arange(8, dtype=np.int64)[::-1].copy()
    flat = write("nvfp4_ds_mla", kv_c, k_pe, slots)
    viewed = write("nvfp4_ds_mla", kv_c, k_pe[:, None, :], slots[:, None])
    np.testing.assert_array_equal(flat, viewed)


def test_slot_list_is_accepted_and_out_of_range_slots_are_skipped(bf16_inputs):
    kv_c, k_pe = bf16_inputs
    cache = np.full((2, 4, 368), 7, dtype=np.uint8)
    slots = [0, -1, 8, 5, 2**40 + 1, 7, -5, 3]
    concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, slots)
    written = {0, 5, 7, 3}
    for s in range(8):
        touched = not (cache.reshape(8, 368)[s] == 7).all()
        assert touched == (s in written), s


def test_per_token_scale_writes_the_pts_record(bf16_inputs):
    kv_c, k_pe = bf16_inputs
    slots = np.arange(8, dtype=np.int64)
    static = write("nvfp4_ds_mla_fp8_rope", kv_c, k_pe, slots).reshape(8, 368)
    pts = write("nvfp4_ds_mla_fp8_rope_pts", kv_c, k_pe, slots).reshape(8, 368)
    assert (static[:, 292:296] == 0).all()
    assert (pts[:, 292:296] != 0).any(axis=1).all()
    np.testing.assert_array_equal(static[:, 304:], pts[:, 304:])


@pytest.mark.parametrize("fmt", sorted(RECORD_BYTES))
def test_gather_records_round_trips_and_zeros_negative_slots(fmt):
    dtype = np.float16 if fmt == "fp16" else BF16
    kv_c, k_pe = random_inputs(16, dtype, seed=3)
    cache = write(fmt, kv_c, k_pe, np.arange(16, dtype=np.int64), 1.0, block_size=16)
    slots = np.array([3, -1, 15, 16], dtype=np.int64)
    kwargs = {"scale": 1.0} if fmt == "fp8_e4m3" else {}
    kv_out, pe_out = mlakv.gather_records(fmt, cache, slots, rope_dtype="fp16" if fmt == "fp16" else "bf16", **kwargs)
    assert kv_out.shape == (4, 512) and pe_out.shape == (4, 64) and kv_out.dtype == np.float32
    assert not kv_out[[1, 3]].any() and not pe_out[[1, 3]].any()
    ref_kv = kv_c.astype(np.float32)[[3, 15]]
    ref_pe = k_pe.astype(np.float32)[[3, 15]]
    rel = np.sqrt(((kv_out[[0, 2]] - ref_kv) ** 2).sum() / (ref_kv**2).sum())
    tolerance = {"bf16": 0, "fp16": 0}.get(fmt, 0.2 if "nvfp4" in fmt else 0.05)
    assert rel <= tolerance
    assert np.sqrt(((pe_out[[0, 2]] - ref_pe) ** 2).sum() / (ref_pe**2).sum()) <= max(tolerance, 0.05)


def test_both_readers_default_to_float32_and_give_bf16_on_request(bf16_inputs):
    kv_c, k_pe = bf16_inputs
    cache = write("fp8_ds_mla", kv_c, k_pe, np.arange(len(kv_c), dtype=np.int64), block_size=16)
    table, lens, cu = np.array([[0]], np.int32), np.array([3], np.int32), np.array([0, 3], np.int32)
    kv_out, pe_out = mlakv.gather_records("fp8_ds_mla", cache, np.arange(3))
    paged = mlakv.gather_records_paged("fp8_ds_mla", cache, table, lens, cu)
    assert kv_out.dtype == pe_out.dtype == paged.dtype == np.float32
    np.testing.assert_array_equal(paged, np.concatenate([kv_out, pe_out], axis=1))
    kv_bf16, _ = mlakv.gather_records("fp8_ds_mla", cache, np.arange(3), dtype="bf16")
    assert kv_bf16.dtype == mlakv.gather_records_paged("fp8_ds_mla", cache, table, lens, cu, dtype="bf16").dtype == BF16


def test_fp16_inputs_are_accepted(bf16_inputs):
    kv_c, k_pe = random_inputs(4, np.float16, seed=5)
    cache = write("nvfp4_ds_mla_fp8_rope", kv_c, k_pe, np.arange(4, dtype=np.int64))
    assert cache.any()


def test_torch_cpu_tensors_give_the_same_bytes_as_numpy(bf16_inputs):
    torch = pytest.importorskip("torch")
    kv_c, k_pe = bf16_inputs
    slots = np.arange(8, dtype=np.int64)
    want = write("nvfp4_ds_mla_fp8_rope", kv_c, k_pe, slots)
    t_kv = torch.from_numpy(kv_c.view(np.int16)).view(torch.bfloat16)
    t_pe = torch.from_numpy(k_pe.view(np.int16)).view(torch.bfloat16)
    cache = torch.zeros((1, 8, 368), dtype=torch.uint8)
    concat_and_cache_nvfp4_mla_fp8_rope(t_kv, t_pe, cache, torch.arange(8), torch.tensor([1.0]))
    np.testing.assert_array_equal(cache.numpy(), want)


def test_mlakv_command_is_installed_and_prints_formats():
    exe = shutil.which("mlakv")
    assert exe is not None, "pip install must put the mlakv command on the PATH"
    out = subprocess.run([exe, "formats"], capture_output=True, text=True, check=True).stdout
    for fmt, size in RECORD_BYTES.items():
        assert any(line.split()[:2] == [fmt, str(size)] for line in out.splitlines()), fmt


def test_mlakv_command_exits_2_on_bad_arguments():
    exe = shutil.which("mlakv")
    assert exe is not None
    result = subprocess.run([exe, "roundtrip", "--tokens", "zero"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "--tokens" in result.stderr
