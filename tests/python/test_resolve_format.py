# SPDX-License-Identifier: Apache-2.0
"""resolve_format: engine kv_cache_dtype strings to records, by name, record width and switches."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import mlakv
from conftest import BF16

VECTORS = Path(__file__).parents[1] / "data" / "vectors"


@pytest.mark.parametrize(
    ("name", "record_bytes", "fp8_rope", "per_token_scale", "want"),
    [
        ("nvfp4_ds_mla", 352, False, False, "nvfp4_fp8_ds_mla"),
        ("nvfp4_ds_mla", 432, False, False, "nvfp4_ds_mla"),
        ("nvfp4_ds_mla", 368, True, False, "nvfp4_ds_mla_fp8_rope"),
        ("nvfp4_ds_mla", 368, True, True, "nvfp4_ds_mla_fp8_rope_pts"),
        ("nvfp4_ds_mla", 0, True, False, "nvfp4_ds_mla_fp8_rope"),
        ("fp8", 576, False, False, "fp8_e4m3"),
        ("fp8_e4m3", 576, False, False, "fp8_e4m3"),
        ("fp8_ds_mla", 656, False, False, "fp8_ds_mla"),
        ("fp8_ds_mla", 656, True, True, "fp8_ds_mla"),
        ("fp8_ds_mla", 584, False, False, "fp8_ds_mla_v4"),
        ("fp8_ds_mla", 528, False, False, "fp8_ds_mla_v41_planar"),
        ("nvfp4_ds_mla", 528, False, False, "fp8_ds_mla_v41_planar"),
        ("nvfp4_ds_mla", 288, False, False, "nvfp4_ds_mla_v41_planar"),
        ("v4", 584, False, False, "fp8_ds_mla_v4"),
        ("v41", 528, False, False, "fp8_ds_mla_v41_planar"),
        ("v41_fp4", 0, False, False, "nvfp4_ds_mla_v41_planar"),
    ],
)
def test_engine_names_resolve_by_width_and_switches(name, record_bytes, fp8_rope, per_token_scale, want):
    assert mlakv.resolve_format(name, record_bytes, fp8_rope, per_token_scale) == want


@pytest.mark.parametrize(("name", "record_bytes"), [("fp8_ds_mla", 528), ("nvfp4_ds_mla", 528), ("nvfp4_ds_mla", 288)])
def test_engine_names_at_deepseek_v41_widths_are_the_block_planar_pages(name, record_bytes):
    # vLLM (b3ae0bb) and SGLang (2005a30) page their V4.1 caches block-planar, never as FlashMLA's token-major records.
    fid = mlakv.resolve_format(name, record_bytes)
    assert fid.endswith("_v41_planar")
    info = next(f for f in mlakv.formats() if f["id"] == fid)
    assert info["page"]["kind"] == "block_planar" and info["page"]["page_multiple"] == 512


@pytest.mark.parametrize("info", mlakv.formats(), ids=lambda f: f["id"])
def test_every_format_id_and_engine_name_resolves_to_its_format(info):
    assert mlakv.resolve_format(info["id"], info["record_bytes"], input_dtype="fp16" if info["id"] == "fp16" else None)
    for n in info["engine_names"]:
        dtype = "fp16" if info["id"] == "fp16" else "bf16"
        switches = (n["fp8_rope"], n["per_token_scale"])
        assert mlakv.resolve_format(n["kv_cache_dtype"], info["record_bytes"], *switches, dtype) == info["id"]


def test_auto_follows_the_input_dtype():
    assert mlakv.resolve_format("auto", 1152, input_dtype="bf16") == "bf16"
    assert mlakv.resolve_format("auto", 1152, input_dtype="fp16") == "fp16"
    with pytest.raises(ValueError, match=r"names several records of 1152 bytes: bf16 .*, fp16 "):
        mlakv.resolve_format("auto", 1152)
    with pytest.raises(ValueError, match=r"^mlakv::resolve_format\(auto\): input_dtype: must be bf16, fp16 or None"):
        mlakv.resolve_format("auto", 1152, input_dtype="float32")


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        (
            {"kv_cache_dtype": 352},
            TypeError,
            "kv_cache_dtype: must be a str (an engine's kv_cache_dtype or a format id), got int",
        ),
        ({"record_bytes": -1}, ValueError, "record_bytes: must be >= 0, got -1"),
        ({"record_bytes": 2**31}, ValueError, "record_bytes: must be < 2^31, got 2147483648"),
        ({"record_bytes": 352.0}, TypeError, "record_bytes: must be an int, got float"),
        ({"fp8_rope": 1}, TypeError, "fp8_rope: must be a bool, got int"),
        ({"per_token_scale": "yes"}, TypeError, "per_token_scale: must be a bool, got str"),
        ({"input_dtype": "float16"}, ValueError, "input_dtype: must be bf16, fp16 or None, got 'float16'"),
    ],
)
def test_arguments_are_checked_first(kwargs, error, text):
    args = {"kv_cache_dtype": "nvfp4_ds_mla", "record_bytes": 352, **kwargs}
    with pytest.raises(error) as info:
        mlakv.resolve_format(**args)
    assert str(info.value).endswith(text)


def test_ambiguous_name_without_width_raises_naming_the_candidates():
    with pytest.raises(ValueError) as info:
        mlakv.resolve_format("nvfp4_ds_mla")
    assert str(info.value) == (
        "mlakv::resolve_format(nvfp4_ds_mla): kv_cache_dtype: names several records, the cache's record width picks "
        "one of nvfp4_ds_mla (432 B, B12X backend, KV_FP8_ROPE=0), nvfp4_fp8_ds_mla (352 B, upstream vLLM), "
        "fp8_ds_mla_v41_planar (528 B, vLLM, DeepSeek V4.1 sliding-window cache), nvfp4_ds_mla_v41_planar (288 B, "
        "vLLM, DeepSeek V4.1 compressed cache), got 'nvfp4_ds_mla' without a record width"
    )


def test_width_of_no_candidate_raises_naming_the_candidates():
    with pytest.raises(ValueError, match=r"record_bytes: record bytes must be those of one of .* got 368$"):
        mlakv.resolve_format("nvfp4_ds_mla", 368)
    with pytest.raises(ValueError, match=r"record_bytes: must be 368 \(nvfp4_ds_mla_fp8_rope\), got 352$"):
        mlakv.resolve_format("nvfp4_ds_mla", 352, fp8_rope=True)


def test_formats_list_engine_names():
    names = {f["id"]: [(n["kv_cache_dtype"], n["engine"]) for n in f["engine_names"]] for f in mlakv.formats()}
    assert names["nvfp4_fp8_ds_mla"] == [("nvfp4_ds_mla", "upstream vLLM")]
    assert names["nvfp4_ds_mla"] == [("nvfp4_ds_mla", "B12X backend, KV_FP8_ROPE=0")]
    assert names["nvfp4_ds_mla_fp8_rope_pts"] == [("nvfp4_ds_mla", "B12X backend, KV_FP8_ROPE=1, per-token scale")]


@pytest.mark.parametrize("fmt", ["nvfp4_fp8_ds_mla", "nvfp4_ds_mla"])
def test_concat_and_cache_mla_nvfp4_ds_mla_writes_the_record_of_the_cache_width(fmt):
    vec = json.loads((VECTORS / f"{fmt}.bf16.json").read_text())
    kv_c = np.array(vec["kv_c_bits"], dtype=np.uint16).view(BF16)
    k_pe = np.array(vec["k_pe_bits"], dtype=np.uint16).view(BF16)
    want = [bytes.fromhex(h) for h in vec["records_hex"]]
    cache = np.zeros((1, len(want), len(want[0])), dtype=np.uint8)
    mlakv.concat_and_cache_mla(kv_c, k_pe, cache, np.arange(len(want), dtype=np.int64), "nvfp4_ds_mla")
    assert [cache[0, t].tobytes() for t in range(len(want))] == want


def test_concat_and_cache_mla_nvfp4_ds_mla_of_another_width_writes_nothing():
    kv_c = np.ones((2, 512), BF16)
    k_pe = np.ones((2, 64), BF16)
    cache = np.full((1, 2, 368), 0xAB, dtype=np.uint8)
    with pytest.raises(ValueError, match=r"^mlakv::concat_and_cache_mla\(nvfp4_ds_mla\): kv_cache: record bytes"):
        mlakv.concat_and_cache_mla(kv_c, k_pe, cache, np.arange(2, dtype=np.int64), "nvfp4_ds_mla")
    assert (cache == 0xAB).all()


EXE = shutil.which("mlakv")


@pytest.mark.skipif(EXE is None, reason="the mlakv command is not on the PATH")
def test_mlakv_formats_shows_each_formats_engine_names():
    lines = subprocess.run([EXE, "formats"], capture_output=True, text=True, check=True).stdout.splitlines()
    for f in mlakv.formats():
        row = next(i for i, line in enumerate(lines) if line.split(" ")[0] == f["id"])
        names = "; ".join(f"{n['kv_cache_dtype']} ({n['engine']})" for n in f["engine_names"]) or "-"  # none: "-"
        assert lines[row + 1] == f"    engine names: {names}"
    assert "    engine names: nvfp4_ds_mla (upstream vLLM)" in lines


@pytest.mark.skipif(EXE is None, reason="the mlakv command is not on the PATH")
def test_mlakv_inspect_resolves_an_engine_name_with_the_record_width(tmp_path):
    kv_c = np.ones((4, 512), BF16)
    k_pe = np.full((4, 64), 0.5, BF16)
    cache = np.zeros((1, 4, 352), np.uint8)
    mlakv.concat_and_cache_mla(kv_c, k_pe, cache, np.arange(4, dtype=np.int64), "nvfp4_ds_mla")
    cache.tofile(tmp_path / "cache.bin")
    base = [EXE, "inspect", "--format", "nvfp4_ds_mla", "--cache", str(tmp_path / "cache.bin"), "--block-size", "4"]
    out = subprocess.run([*base, "--slot", "1", "--record-bytes", "352"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("nvfp4_fp8_ds_mla: slot 1")
    assert "decoded kv_c[0:8] = 1.03125, 1.03125" in out.stdout  # 6 * 0.171875
    # Without the width, nvfp4_ds_mla is the mlakv id outright (the 432-byte record): 4 slots do not fit the dump.
    as_id = subprocess.run([*base, "--slot", "1"], capture_output=True, text=True)
    assert as_id.returncode == 2
    assert "--block-size: 4 slots of 432 bytes do not fit" in as_id.stderr
