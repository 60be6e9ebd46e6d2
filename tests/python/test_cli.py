# SPDX-License-Identifier: Apache-2.0
"""The `mlakv` command (installed by pip): report, capacity, inspect and their errors."""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import signal
import subprocess
import xml.etree.ElementTree as ElementTree

import ml_dtypes
import numpy as np
import pytest

import mlakv

EXE = shutil.which("mlakv")
pytestmark = pytest.mark.skipif(EXE is None, reason="the mlakv command is not on the PATH")
FORMATS = {f["id"]: f["record_bytes"] for f in mlakv.formats() if f["geometry"]["nope_dims"] == 512}  # V3-family models
FAST = ["--tokens", "512", "--queries", "2", "--quiet"]


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], capture_output=True, text=True, check=check)


def test_mlakv_command_report_prints_a_table_with_every_format_and_a_recommendation():
    out = run("report", "--model", "deepseek-v3", *FAST).stdout
    header = next(line for line in out.splitlines() if line.strip().startswith("format"))
    for column in (
        "bytes",
        "KiB/token",
        "tokens",
        "128k seqs",
        "latent %",
        "rope %",
        "attn %",
        "write GB/s",
        "read GB/s",
        "write Mtok/s",
        "read Mtok/s",
    ):
        assert column in header
    rows = [line for line in out.splitlines() if line[2:].split(" ")[0] in FORMATS]
    assert sorted(line[2:].split()[0] for line in rows) == sorted(FORMATS)
    assert sum(line.startswith("*") for line in rows) == 1
    assert "* recommended: " in out


def test_mlakv_command_report_json_has_every_format_and_exact_capacity():
    report = json.loads(run("report", "--json", "--model", "glm-5", "--kv-memory", "96GB", *FAST).stdout)
    assert report["model"] == {"id": "glm-5", "name": "GLM-5", "layers": 78, "heads": 64}
    assert report["kv_memory"] == 96 * 10**9
    assert sorted(f["format"] for f in report["formats"]) == sorted(FORMATS)
    assert report["recommended"] in FORMATS
    for f in report["formats"]:
        assert f["bytes_per_token"] == 78 * FORMATS[f["format"]]
        assert f["tokens"] == 96 * 10**9 // (78 * FORMATS[f["format"]])
        assert f["sequences_128k"] == f["tokens"] // 131072
        for key in ("latent_rel_rms", "rope_rel_rms", "attention_rel_rms", "write_gbps", "read_gbps"):
            assert f[key] >= 0.0
    by_id = {f["format"]: f for f in report["formats"]}
    assert by_id["bf16"]["attention_rel_rms"] == 0.0  # the reference is the bf16 record
    assert by_id["nvfp4_ds_mla_fp8_rope"]["attention_rel_rms"] > by_id["fp8_ds_mla"]["attention_rel_rms"]


def test_mlakv_command_recommendation_follows_the_error_limit():
    strict = json.loads(run("report", "--json", "--max-attention-error", "0", *FAST).stdout)
    assert strict["recommended"] == "bf16"
    loose = json.loads(run("report", "--json", "--max-attention-error", "1", *FAST).stdout)
    assert loose["recommended"] == "nvfp4_fp8_ds_mla"  # the fewest bytes


def test_mlakv_command_capacity_is_bytes_arithmetic():
    report = json.loads(
        run(
            "capacity", "--json", "--model", "kimi-k2", "--dp", "4", "--gpu-memory", "96GiB", "--kv-fraction", "0.5"
        ).stdout
    )
    budget = int(4 * 96 * 2**30 * 0.5)
    assert report["kv_memory"] == budget
    assert report["parallelism"] == {"gpus": 4, "tp": 1, "dp": 4, "gpu_memory": 96 * 2**30, "kv_fraction": 0.5}
    for f in report["formats"]:
        assert f["tokens"] == budget // (61 * FORMATS[f["format"]])
    table = run("capacity", "--kv-memory", "1.5TiB", "--layers", "10").stdout
    tokens = int(next(line for line in table.splitlines() if line.startswith("nvfp4_fp8_ds_mla ")).split()[3])
    assert tokens == int(1.5 * 2**40) // (10 * 352)


# DeepSeek-V4-Flash's config.json: 43 layers, sliding_window 128, compress_ratios (its 44th entry,
# the MTP layer, left out as the other presets leave it out).
V4_FLASH_RATIOS = [0, 0] + [4, 128] * 20 + [4]
V4_ENTRY_BYTES = {  # bytes of one cached entry per layer, page padding included (64-token pages)
    "fp8_ds_mla_v4": 37440 / 64,
    "fp8_ds_mla_v41": 528,
    "nvfp4_ds_mla_v41": 288,
    "fp8_ds_mla_v41_planar": 528,
    "nvfp4_ds_mla_v41_planar": 288,
}


def test_mlakv_command_capacity_of_deepseek_v4_counts_windows_and_compressed_entries_not_tokens_x_layers():
    report = json.loads(run("capacity", "--json", "--model", "deepseek-v4-flash", "--kv-memory", "80GiB").stdout)
    assert report["model"]["layers"] == 43 and report["model"]["sliding_window"] == 128
    assert report["model"]["compress_ratios"] == V4_FLASH_RATIOS
    memory = 80 * 2**30
    assert [f["format"] for f in report["formats"]] == list(V4_ENTRY_BYTES)
    for f in report["formats"]:
        entry = V4_ENTRY_BYTES[f["format"]]
        per_token = sum(entry / r for r in V4_FLASH_RATIOS if r)
        window = 43 * 128 * entry
        assert f["window_bytes_per_sequence"] == math.ceil(window)
        assert f["bytes_per_token"] == math.floor(per_token + 0.5)  # rounded half away from zero
        assert f["tokens"] == math.floor((memory - window) / per_token)
        sequence = window + sum(131072 // r * entry for r in V4_FLASH_RATIOS if r)
        assert f["sequences_128k"] == math.floor(memory / sequence)
        assert f["bytes_per_token"] < 43 * f["record_bytes"] / 7  # far below tokens x layers x bytes
    table = run("capacity", "--model", "deepseek-v4-flash").stdout
    assert "2 window-only, 21 ratio-4, 20 ratio-128" in table
    assert "Not counted: the ratio-4 layers' indexer keys" in table


def test_mlakv_command_deepseek_v4_refuses_layers():
    one_line_exit_2(run("capacity", "--model", "deepseek-v4-flash", "--layers", "10", check=False), "--layers")
    one_line_exit_2(run("report", "--model", "deepseek-v4-flash", "--layers", "10", check=False), "--layers")


V4_FP8 = ("fp8_ds_mla_v4", "fp8_ds_mla_v41", "fp8_ds_mla_v41_planar")
V4_FP4 = ("nvfp4_ds_mla_v41", "nvfp4_ds_mla_v41_planar")


def test_mlakv_command_report_of_deepseek_v4_gives_capacitys_rows_and_accuracy_without_attention():
    budget = ("--model", "deepseek-v4-flash", "--kv-memory", "96GB")
    report = json.loads(run("report", "--json", *budget, *FAST).stdout)
    capacity = json.loads(run("capacity", "--json", *budget).stdout)
    assert report["model"] == capacity["model"]  # sliding_window and compress_ratios included
    assert report["kv_memory"] == capacity["kv_memory"] == 96 * 10**9
    assert report["attention"]["available"] is False
    assert "448 + 64" in report["attention"]["reason"] and "docs/attention.md" in report["attention"]["reason"]
    assert report["recommended"] is None and "sparse-attention error" in report["reason"]
    assert [f["format"] for f in report["formats"]] == [f["format"] for f in capacity["formats"]]
    assert sorted(V4_FP8 + V4_FP4) == sorted(f["format"] for f in report["formats"]) == sorted(V4_ENTRY_BYTES)
    for row, capacity_row in zip(report["formats"], capacity["formats"]):
        for key, value in capacity_row.items():
            assert row[key] == value, (row["format"], key)
        for key in ("latent_rel_rms", "latent_max_abs", "rope_rel_rms", "rope_max_abs"):
            assert math.isfinite(row[key]), (row["format"], key)
        assert row["latent_nonfinite"] == 0 and row["rope_nonfinite"] == 0
        assert row["attention_rel_rms"] is None and row["attention_max_abs"] is None
        assert row["attention_nonfinite"] is None
        assert row["write_gbps"] > 0.0 and row["read_gbps"] > 0.0
    by_id = {f["format"]: f for f in report["formats"]}
    for fp8 in V4_FP8:  # E4M3 codes: about 2.6 % of the 448 NoPE values
        assert 0.005 < by_id[fp8]["latent_rel_rms"] < 0.04
        for fp4 in V4_FP4:  # E2M1 codes: about 9 %
            assert 2.5 * by_id[fp8]["latent_rel_rms"] < by_id[fp4]["latent_rel_rms"] < 0.15
    assert by_id["fp8_ds_mla_v4"]["rope_rel_rms"] == 0.0  # its RoPE is stored as bf16
    assert 0.0 < by_id["fp8_ds_mla_v41"]["rope_rel_rms"] < by_id["nvfp4_ds_mla_v41"]["rope_rel_rms"]
    for token_major in ("fp8_ds_mla_v41", "nvfp4_ds_mla_v41"):  # the same codes, placed block-planar
        planar = by_id[token_major + "_planar"]
        for key in ("latent_rel_rms", "latent_max_abs", "rope_rel_rms", "rope_max_abs"):
            assert planar[key] == by_id[token_major][key]


def test_mlakv_command_report_of_deepseek_v4_prints_attention_as_not_available(tmp_path):
    out = run("report", "--model", "deepseek-v4-flash", *FAST).stdout
    assert "mlakv report: DeepSeek-V4-Flash (43 layers, 64 heads)" in out
    assert "2 window-only, 21 ratio-4, 20 ratio-128" in out  # what capacity's numbers count
    assert "sparse attention: not available: the sparse-attention check decodes 576-value queries over records" in out
    assert "DeepSeek-V4-Flash's formats store 448 + 64 values" in out
    rows = [line for line in out.splitlines() if line[2:].split(" ")[0] in V4_ENTRY_BYTES]
    assert sorted(line[2:].split()[0] for line in rows) == sorted(V4_ENTRY_BYTES)
    for line in rows:
        assert not line.startswith("*")
        assert line.split()[8] == "n/a"  # the attn % column
    assert "no recommendation: " in out
    one_line_exit_2(
        run("report", "--model", "deepseek-v4-flash", "--plot", str(tmp_path / "plot.svg"), *FAST, check=False),
        "--plot",
        "sparse-attention error",
    )


def test_mlakv_command_plot_is_svg_with_one_mark_per_format(tmp_path):
    path = tmp_path / "plot.svg"
    run("report", "--plot", str(path), *FAST)
    root = ElementTree.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    marks = [c for c in root.iter("{http://www.w3.org/2000/svg}circle") if c.get("class") == "mark"]
    assert sorted(m.get("data-format") for m in marks) == sorted(FORMATS)


def test_mlakv_command_report_reads_the_users_activations(tmp_path):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "kv_c.npy", (0.1 * rng.standard_normal((300, 512))).astype(np.float32))
    np.save(tmp_path / "k_pe.npy", rng.standard_normal((300, 64)).astype(np.float16))
    np.save(tmp_path / "q.npy", rng.standard_normal((3, 8, 576)).astype(np.float32))
    report = json.loads(run("report", "--json", "--quiet", "--activations", str(tmp_path)).stdout)
    assert report["attention"]["rows"] == 3 and report["attention"]["heads"] == 8
    assert report["attention"]["topk"] == 300
    assert "300 tokens of" in report["source"]


def test_mlakv_command_progress_goes_to_stderr_and_quiet_silences_it():
    quiet = run("report", *FAST)
    assert quiet.stderr == ""
    loud = run("report", "--tokens", "4096")  # takes over a second on any machine
    assert "mlakv: [" in loud.stderr and "speed of nvfp4_fp8_ds_mla" in loud.stderr


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["report", "--model", "llama"], "--model"),
        (["report", "--kv-memory", "80GX"], "--kv-memory"),
        (["capacity", "--tp", "2"], "--gpu-memory"),
        (["capacity", "--gpu-memory", "80GiB", "--kv-fraction", "1.5"], "--kv-fraction"),
        (["report", "--activations", "/nonexistent"], "--activations"),
        (["report", "--tokens", "many"], "--tokens"),
        (["inspect", "--format", "nvfp4", "--cache", "x", "--block-size", "1", "--slot", "0"], "--format"),
    ],
)
def test_mlakv_command_errors_exit_2_naming_the_flag(args, flag):
    result = run(*args, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("mlakv: error: ") and flag in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_mlakv_command_report_device_cuda_without_a_gpu_exits_2():
    auto = json.loads(run("report", "--device", "auto", "--json", *FAST).stdout)
    if auto["device"] == "cuda":
        pytest.skip("a GPU is present")
    result = run("report", "--device", "cuda", check=False)
    assert result.returncode == 2 and "--device" in result.stderr


def compact_cache_dump(tmp_path, seed: int) -> np.ndarray:
    """Eight random tokens in a [2, 4, 368] nvfp4_ds_mla_fp8_rope cache, dumped to tmp_path / "cache.bin"."""
    from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

    rng = np.random.default_rng(seed)
    kv = rng.standard_normal((8, 512)).astype(ml_dtypes.bfloat16)
    pe = rng.standard_normal((8, 64)).astype(ml_dtypes.bfloat16)
    cache = np.zeros((2, 4, 368), np.uint8)
    concat_and_cache_nvfp4_mla_fp8_rope(kv, pe, cache, np.arange(8))
    cache.tofile(tmp_path / "cache.bin")
    return cache


def test_mlakv_command_inspect_decodes_one_record(tmp_path):
    cache = compact_cache_dump(tmp_path, 1)
    inspect = ["inspect", "--format", "nvfp4_ds_mla_fp8_rope", "--cache", str(tmp_path / "cache.bin")]
    out = run(*inspect, "--block-size", "4", "--slot", "6", "--values", "4").stdout
    assert "slot 6 = block 1, position 2" in out
    assert "page [   736,    992)  record    [   0,  256)  latent_codes" in out  # 2 x 368 into the page
    assert "all zero (ok)" in out  # the pad check
    for name in ("latent_codes", "group_scales", "rope_scale", "rope"):
        assert name in out
    decoded_kv, decoded_pe = mlakv.gather_records("nvfp4_ds_mla_fp8_rope", cache, [6])
    line = next(line for line in out.splitlines() if line.startswith("decoded kv_c"))
    values = [float(v) for v in line.split("=")[1].split("(")[0].split(",")]
    np.testing.assert_allclose(values, decoded_kv[0, :4], rtol=1e-5)
    assert run(*inspect, "--block-size", "4", "--slot", "8", check=False).returncode == 2


def test_mlakv_command_inspect_reads_a_token_of_a_block_planar_v4_page(tmp_path):
    rng = np.random.default_rng(2)
    row = rng.standard_normal((2, 512)).astype(ml_dtypes.bfloat16)
    pages = np.zeros((2, 37440), np.uint8)  # 64-token pages padded to 65 x 576
    view = np.lib.stride_tricks.as_strided(pages, shape=(2, 64, 584), strides=(37440, 584, 1))
    mlakv.concat_and_cache_mla(row[:, :448], row[:, 448:], view, np.array([5, 65]), "fp8_ds_mla")
    pages.tofile(tmp_path / "cache.bin")
    inspect = ["inspect", "--format", "fp8_ds_mla", "--record-bytes", "584", "--cache", str(tmp_path / "cache.bin")]
    out = run(*inspect, "--block-size", "64", "--slot", "65", "--values", "4").stdout
    assert "slot 65 = block 1, position 1; page at byte 37440" in out
    assert "page [   576,   1024)  data row  [   0,  448)  nope" in out  # token 1's data row
    assert f"page [ {64 * 576 + 8},  {64 * 576 + 15})  scale row [   0,    7)  tile_scales" in out  # after 64 data rows
    assert "UE8M0" in out and "all zero (ok)" in out  # the scale pad
    decoded_kv, _ = mlakv.gather_records("fp8_ds_mla_v4", view, [65])
    line = next(line for line in out.splitlines() if line.startswith("decoded kv_c"))
    values = [float(v) for v in line.split("=")[1].split("(")[0].split(",")]
    np.testing.assert_allclose(values, decoded_kv[0, :4], rtol=1e-5)
    # A dump that is not whole padded pages is refused.
    (tmp_path / "short.bin").write_bytes(bytes(64 * 584))
    short = ["inspect", "--format", "fp8_ds_mla_v4", "--cache", str(tmp_path / "short.bin"), "--block-size", "64"]
    one_line_exit_2(run(*short, "--slot", "0", check=False), "--cache", "37440")


def test_mlakv_command_inspect_reads_a_v41_fp4_record_by_its_id(tmp_path):
    rng = np.random.default_rng(3)
    row = rng.standard_normal((2, 512)).astype(ml_dtypes.bfloat16)
    cache = np.zeros((2, 64, 288), np.uint8)
    mlakv.concat_and_cache_mla(row[:, :448], row[:, 448:], cache, np.array([5, 65]), "nvfp4_ds_mla_v41")
    cache.tofile(tmp_path / "cache.bin")
    inspect = ["inspect", "--format", "nvfp4_ds_mla_v41", "--cache", str(tmp_path / "cache.bin")]
    out = run(*inspect, "--block-size", "64", "--slot", "65", "--values", "4").stdout
    assert out.startswith("nvfp4_ds_mla_v41: slot 65 = block 1, position 1; page at byte 18432")
    # Token 1's fields: their bytes in the page, then the same bytes in the record (not added to each other).
    assert "page [   288,    544)  record    [   0,  256)  codes" in out
    assert "page [   544,    576)  record    [ 256,  288)  tile_scales" in out
    decoded_kv, _ = mlakv.gather_records("nvfp4_ds_mla_v41", cache, [65])
    line = next(line for line in out.splitlines() if line.startswith("decoded kv_c"))
    values = [float(v) for v in line.split("=")[1].split("(")[0].split(",")]
    np.testing.assert_allclose(values, decoded_kv[0, :4], rtol=1e-5)


def test_mlakv_command_inspect_reads_a_token_of_vllms_block_planar_v41_fp4_page(tmp_path):
    rng = np.random.default_rng(3)
    row = rng.standard_normal((2, 512)).astype(ml_dtypes.bfloat16)
    pages = np.zeros((2, 64 * 288), np.uint8)  # 64-token pages: 18432 B, a multiple of 512
    view = np.lib.stride_tricks.as_strided(pages, shape=(2, 64, 288), strides=(64 * 288, 288, 1))
    mlakv.concat_and_cache_mla(row[:, :448], row[:, 448:], view, np.array([5, 65]), "nvfp4_ds_mla")  # vLLM's name
    pages.tofile(tmp_path / "cache.bin")
    inspect = ["inspect", "--format", "nvfp4_ds_mla", "--record-bytes", "288", "--cache", str(tmp_path / "cache.bin")]
    out = run(*inspect, "--block-size", "64", "--slot", "65", "--values", "4").stdout
    assert out.startswith("nvfp4_ds_mla_v41_planar: slot 65 = block 1, position 1; page at byte 18432")
    assert "page [   256,    512)  data row  [   0,  256)  codes" in out  # token 1's code row
    # Its scale row, after the page's 64 code rows.
    assert f"page [ {64 * 256 + 32},  {64 * 256 + 64})  scale row [   0,   32)  tile_scales" in out
    decoded_kv, _ = mlakv.gather_records("nvfp4_ds_mla_v41_planar", view, [65])
    line = next(line for line in out.splitlines() if line.startswith("decoded kv_c"))
    values = [float(v) for v in line.split("=")[1].split("(")[0].split(",")]
    np.testing.assert_allclose(values, decoded_kv[0, :4], rtol=1e-5)


def one_line_exit_2(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("mlakv: error: ") and len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in words:
        assert word in result.stderr


@pytest.mark.parametrize(
    ("format", "block_size", "slot"),
    [
        ("fp8_ds_mla", 4611686018427387904, 0),  # block_size * 656 wrapped to 0: SIGFPE
        ("fp8_ds_mla", 288230376151711745, 1048576),  # wrapped to a small block: read past the buffer
        ("bf16", 144115188075855873, 1048576),
    ],
)
def test_mlakv_command_inspect_refuses_block_sizes_whose_bytes_overflow(tmp_path, format, block_size, slot):
    (tmp_path / "cache.bin").write_bytes(bytes(FORMATS[format] * 64))
    args = ["--format", format, "--record-bytes", str(FORMATS[format])]  # fp8_ds_mla: 656 B, not DeepSeek V4's 584
    args += ["--cache", str(tmp_path / "cache.bin"), "--block-size", str(block_size)]
    one_line_exit_2(run("inspect", *args, "--slot", str(slot), check=False), "--block-size")


@pytest.mark.parametrize("scale", ["0", "-0", "-1", "nan", "inf", "1e38", "1e-40"])
def test_mlakv_command_inspect_refuses_meaningless_scales(tmp_path, scale):
    (tmp_path / "cache.bin").write_bytes(bytes(576 * 4))
    args = ["--format", "fp8_e4m3", "--cache", str(tmp_path / "cache.bin"), "--block-size", "4", "--slot", "0"]
    one_line_exit_2(run("inspect", *args, "--scale", scale, check=False), "--scale")


def special_files(tmp_path):
    """A character device, a FIFO and a directory: none may be read as a file."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "dir").mkdir()
    return {"/dev/zero": "a character device", str(fifo): "a FIFO", str(tmp_path / "dir"): "a directory"}


def test_mlakv_command_inspect_refuses_special_files_as_the_cache(tmp_path):
    for path, kind in special_files(tmp_path).items():
        args = ["--format", "bf16", "--cache", path, "--block-size", "1", "--slot", "0"]
        result = subprocess.run([EXE, "inspect", *args], capture_output=True, text=True, timeout=30)
        one_line_exit_2(result, "--cache", f"must be a regular file, got {kind}")


@pytest.mark.parametrize("name", ["kv_c.npy", "k_pe.npy", "q.npy"])
def test_mlakv_command_report_refuses_special_files_as_activations(tmp_path, name):
    specials = special_files(tmp_path)
    for path, kind in specials.items():
        acts = tmp_path / f"acts-{kind.split()[-1]}"
        acts.mkdir()
        np.save(acts / "kv_c.npy", np.zeros((4, 512), np.float32))
        np.save(acts / "k_pe.npy", np.zeros((4, 64), np.float32))
        (acts / name).unlink(missing_ok=True)
        (acts / name).symlink_to(path)
        result = subprocess.run(
            [EXE, "report", "--quiet", "--activations", str(acts)], capture_output=True, text=True, timeout=30
        )
        one_line_exit_2(result, "--activations", name, f"must be a regular file, got {kind}")


def fake_npy(path, shape, data_bytes: int = 64) -> None:
    """A .npy header declaring `shape` float32 values, followed by only `data_bytes` bytes."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + str(tuple(shape)) + ", }"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + bytes(data_bytes))


@pytest.mark.parametrize(
    ("name", "shape"),
    [("kv_c.npy", (2**58, 512)), ("q.npy", (2**29, 2**29, 576)), ("kv_c.npy", (2**62, 2**62)), ("k_pe.npy", (4, 65))],
)
def test_mlakv_command_npy_shapes_are_checked_against_the_file_size_before_reading(tmp_path, name, shape):
    np.save(tmp_path / "kv_c.npy", np.zeros((4, 512), np.float32))
    np.save(tmp_path / "k_pe.npy", np.zeros((4, 64), np.float32))
    fake_npy(tmp_path / name, shape)
    result = subprocess.run(
        [EXE, "report", "--quiet", "--activations", str(tmp_path)], capture_output=True, text=True, timeout=30
    )
    one_line_exit_2(result, "--activations", name, "bytes of data, the file holds")


def write_activations(path, kv_c, k_pe) -> None:
    np.save(path / "kv_c.npy", kv_c.astype(np.float32))
    np.save(path / "k_pe.npy", k_pe.astype(np.float32))


def test_mlakv_command_report_takes_the_models_kv_c_width_and_names_it_when_refusing(tmp_path):
    rng = np.random.default_rng(4)
    v4 = ["report", "--quiet", "--model", "deepseek-v4-flash", "--activations", str(tmp_path)]
    write_activations(tmp_path, 0.1 * rng.standard_normal((200, 512)), rng.standard_normal((200, 64)))
    one_line_exit_2(run(*v4, check=False), "kv_c.npy", "must be [T, 448]", "DeepSeek-V4-Flash", "got [200, 512]")
    write_activations(tmp_path, 0.1 * rng.standard_normal((200, 448)), rng.standard_normal((200, 64)))
    np.save(tmp_path / "q.npy", rng.standard_normal((2, 4, 576)).astype(np.float32))
    report = json.loads(run(*v4, "--json").stdout)
    assert report["source"] == f"200 tokens of {tmp_path} (its q.npy not read: no sparse-attention check)"
    assert report["attention"]["available"] is False
    for f in report["formats"]:
        assert 0.0 < f["latent_rel_rms"] < 0.15 and f["latent_nonfinite"] == 0
    # The V3 family's presets want the 512-value latent.
    one_line_exit_2(
        run("report", "--quiet", "--activations", str(tmp_path), check=False), "must be [T, 512]", "got [200, 448]"
    )


@pytest.mark.parametrize(("array", "value"), [("kv_c", np.nan), ("k_pe", np.inf), ("q", -np.inf)])
def test_mlakv_command_report_refuses_non_finite_activations_naming_file_array_and_index(tmp_path, array, value):
    rng = np.random.default_rng(2)
    arrays = {"kv_c": rng.standard_normal((40, 512)), "k_pe": rng.standard_normal((40, 64))}
    arrays["q"] = rng.standard_normal((2, 4, 576))
    bad = (1, 3, 7) if array == "q" else (3, 17)
    arrays[array][bad] = value
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a.astype(np.float32))
    result = run("report", "--quiet", "--activations", str(tmp_path), check=False)
    index = ", ".join(str(i) for i in bad)
    one_line_exit_2(result, f"{tmp_path}/{array}.npy", f"{array}[{index}] is {value}", "--allow-nonfinite")
    report = json.loads(run("report", "--quiet", "--json", "--allow-nonfinite", "--activations", str(tmp_path)).stdout)
    for f in report["formats"]:
        assert f["latent_nonfinite"] + f["rope_nonfinite"] + f["attention_nonfinite"] > 0
        assert np.isfinite(f["attention_rel_rms"])
    assert report["recommended"] is None


def test_mlakv_command_report_says_when_a_format_overflows_on_finite_inputs(tmp_path):
    rng = np.random.default_rng(3)
    write_activations(tmp_path, 1e6 * rng.standard_normal((64, 512)), rng.standard_normal((64, 64)))
    report = json.loads(run("report", "--quiet", "--json", "--activations", str(tmp_path)).stdout)
    fp16 = next(f for f in report["formats"] if f["format"] == "fp16")
    assert fp16["latent_nonfinite"] > 0
    assert report["recommended"] != "fp16"
    table = run("report", "--quiet", "--activations", str(tmp_path)).stdout
    assert "! fp16: non-finite decoded or reference values" in table and "larger inputs overflow" in table


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["frobnicate"], ["unknown command 'frobnicate'", "report, capacity"]),
        (["report", "--seed", "-1"], ["--seed", "must be >= 0"]),
        (["roundtrip", "--seed", "-1"], ["--seed", "must be >= 0"]),
        (["capacity", "--kv-memory", "0"], ["--kv-memory", "must be > 0"]),
        (["report", "--max-attention-error", "2"], ["--max-attention-error", "got '2'"]),
        (["report", "--max-attention-error", "150%"], ["--max-attention-error"]),
        (["report", "--tokens", "64", "--activations", "."], ["--tokens", "cannot be combined with --activations"]),
        (["report", "--plot", "/nonexistent/x.svg"], ["--plot", "no directory /nonexistent"]),
    ],
)
def test_mlakv_command_flag_mistakes_are_one_line_errors_before_any_work(args, words):
    result = subprocess.run([EXE, *args], capture_output=True, text=True, timeout=20)
    one_line_exit_2(result, *words)


def test_mlakv_command_error_limit_takes_a_percentage_or_a_fraction():
    percent = json.loads(run("report", "--json", "--max-attention-error", "2%", *FAST).stdout)
    fraction = json.loads(run("report", "--json", "--max-attention-error", "0.02", *FAST).stdout)
    assert percent["max_attention_error"] == fraction["max_attention_error"] == 0.02
    assert percent["recommended"] == fraction["recommended"]


@pytest.mark.parametrize("command", ["capacity", "report"])
def test_mlakv_command_refuses_memory_too_small_for_one_token_naming_the_flag(command):
    # The smallest cache holding a token: one 352-byte record in each of DeepSeek-V3's 61 layers.
    one_line_exit_2(
        run(command, "--kv-memory", "80", check=False), "--kv-memory: 80 B of KV memory holds no token", "21472 B"
    )
    one_line_exit_2(run(command, "--kv-memory", "21471B", check=False), "--kv-memory", "holds no token")
    if command == "capacity":
        table = run("capacity", "--kv-memory", "21472B").stdout
        assert int(next(line for line in table.splitlines() if line.startswith("nvfp4_fp8_ds_mla ")).split()[3]) == 1
        # DeepSeek V4: one sequence's sliding windows (43 x 128 entries of 288 B) and one token's entries.
        fits = json.loads(run("capacity", "--json", "--model", "deepseek-v4-flash", "--kv-memory", "1586709B").stdout)
        assert max(f["tokens"] for f in fits["formats"]) == 1
    v4 = run(command, "--model", "deepseek-v4-flash", "--kv-memory", "1586708B", check=False)
    one_line_exit_2(v4, "--kv-memory", "holds no token of DeepSeek-V4-Flash", "1586709 B")
    tiny = run(command, "--gpu-memory", "80GB", "--kv-fraction", "1e-300", check=False)
    one_line_exit_2(tiny, "--kv-fraction", "holds no token")


def test_mlakv_command_capacity_and_report_json_describe_the_model_alike():
    capacity = json.loads(run("capacity", "--json", "--model", "glm-5").stdout)
    report = json.loads(run("report", "--json", "--model", "glm-5", *FAST).stdout)
    assert capacity["model"] == report["model"] == {"id": "glm-5", "name": "GLM-5", "layers": 78, "heads": 64}


def test_mlakv_command_formats_columns_line_up_on_every_row():
    lines = run("formats").stdout.splitlines()
    header = lines[0]
    rows = [line for line in lines[1:] if line.split(" ")[0] in FORMATS]
    assert len(rows) == len(FORMATS)
    for column in ("bytes", "source"):
        end = header.index(column) + (len(column) if column == "bytes" else 0)
        for line in rows:
            if column == "bytes":
                assert line[end - 1].isdigit() and line[end] == " ", line  # right-aligned record bytes
            else:
                assert line[end - 1] == " " and line[end] != " ", line  # every source starts in one column


def test_mlakv_command_report_refuses_token_counts_beyond_host_memory_before_starting():
    with open("/proc/meminfo") as meminfo:
        available = next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:"))
    if available > 16140 * 2**24 + 64e6:
        pytest.skip("this machine holds 2^24 tokens")
    result = subprocess.run([EXE, "report", "--tokens", str(2**24)], capture_output=True, text=True, timeout=20)
    one_line_exit_2(result, "--tokens: 16777216 tokens need about", "of host memory", "or fewer")


def test_mlakv_command_plot_has_1_2_5_ticks_a_threshold_a_legend_and_labels_that_do_not_collide(tmp_path):
    path = tmp_path / "plot.svg"
    run("report", "--plot", str(path), "--max-attention-error", "3%", *FAST)
    ns = "{http://www.w3.org/2000/svg}"
    root = ElementTree.parse(path).getroot()
    texts = list(root.iter(f"{ns}text"))
    for cls in ("x-tick", "y-tick"):
        ticks = [float(t.text) for t in texts if t.get("class") == cls]
        assert len(ticks) >= 3
        step = ticks[1] - ticks[0]
        mantissa = step / 10 ** np.floor(np.log10(step))
        assert any(abs(mantissa - m) < 1e-9 for m in (1, 2, 5)), (cls, ticks)
    threshold = next(line for line in root.iter(f"{ns}line") if line.get("class") == "threshold")
    assert threshold.get("y1") == threshold.get("y2")
    assert root.find(f"{ns}g[@class='legend']") is not None
    labels = [t for t in texts if t.get("class") in ("label", "threshold-label")]
    assert sorted(t.get("data-format") for t in labels if t.get("class") == "label") == sorted(FORMATS)
    boxes = []
    for t in labels:
        x0, y0, x1, y1 = (float(v) for v in t.get("data-box").split())
        assert x1 - x0 >= 6.5 * len(t.text) and y1 - y0 >= 12  # the box covers the rendered text
        boxes.append((t.text, x0, y0, x1, y1))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = a[3] <= b[1] or b[3] <= a[1] or a[4] <= b[2] or b[4] <= a[2]
            assert apart, f"labels {a[0]!r} and {b[0]!r} overlap"
    frame = next(r for r in root.iter(f"{ns}rect") if r.get("fill") == "none")
    fx, fy = float(frame.get("x")), float(frame.get("y"))
    fw, fh = float(frame.get("width")), float(frame.get("height"))
    for name, x0, y0, x1, y1 in boxes:
        assert fx <= x0 and x1 <= fx + fw and fy <= y0 and y1 <= fy + fh, name


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--dp", "2", "--gpu-memory", "1.7e19B"], ["--gpu-memory", "more than 16 EiB"]),
        (["--gpu-memory", "80GB", "--kv-fraction", "nan"], ["--kv-fraction", "(0, 1]", "got 'nan'"]),
        (["--gpu-memory", "80GB", "--kv-fraction", "-3"], ["--kv-fraction", "(0, 1]"]),
        (["--gpu-memory", "80GB", "--kv-fraction", "5"], ["--kv-fraction", "(0, 1]"]),
        (["--gpu-memory", "80GB", "--kv-fraction", "0.5x"], ["--kv-fraction", "(0, 1]"]),
        (["--kv-fraction", "nan"], ["--kv-fraction", "applies to --gpu-memory"]),
        (["--kv-fraction", "0.5"], ["--kv-fraction", "applies to --gpu-memory"]),
        (["--dp", "8"], ["--dp", "applies to --gpu-memory"]),
        (["--kv-memory", "80GiB", "--tp", "8"], ["--kv-memory", "not both"]),
        (["--gpus", "8", "--gpu-memory", "141GB"], ["--gpus", "--tp N", "--dp N"]),
        (["--gpus", "0"], ["--gpus", "--tp N"]),
        (["--gpu-memory", "141GB", "--tp", "0"], ["--tp"]),
    ],
)
def test_mlakv_command_capacity_refuses_overflowing_nan_negative_and_stray_budget_flags(args, words):
    for command in ("capacity", "report"):
        result = subprocess.run([EXE, command, *args], capture_output=True, text=True, timeout=20)
        one_line_exit_2(result, *words)


def test_mlakv_command_capacity_models_tensor_and_data_parallelism_and_says_which():
    def capacity(*args):
        return json.loads(run("capacity", "--json", "--gpu-memory", "141GB", *args).stdout)

    one_gpu = capacity()
    tp = capacity("--tp", "8")  # the latent cache replicated on the 8 GPUs: one GPU's tokens
    dp = capacity("--dp", "8")  # each GPU its own requests' tokens
    both = capacity("--dp", "2", "--tp", "4")
    per_gpu = int(141e9 * 0.85)
    assert one_gpu["kv_memory"] == tp["kv_memory"] == per_gpu
    assert dp["kv_memory"] == 8 * per_gpu and both["kv_memory"] == 2 * per_gpu
    assert tp["parallelism"] == {"gpus": 8, "tp": 8, "dp": 1, "gpu_memory": 141 * 10**9, "kv_fraction": 0.85}
    assert both["parallelism"]["gpus"] == 8
    for f_tp, f_dp in zip(tp["formats"], dp["formats"]):
        assert f_tp["tokens"] == per_gpu // (61 * f_tp["record_bytes"])
        assert f_dp["tokens"] == 8 * per_gpu // (61 * f_dp["record_bytes"])
    assert json.loads(run("capacity", "--json").stdout)["parallelism"] is None  # --kv-memory: one copy of each token
    header = run("capacity", "--gpu-memory", "141GB", "--tp", "8").stdout.splitlines()[0]
    assert "--tp 8: tensor parallelism replicates the MLA latent cache on every GPU" in header
    header = run("capacity", "--gpu-memory", "141GB", "--dp", "8").stdout.splitlines()[0]
    assert "--dp 8: data-parallel attention, each GPU holds its own requests' tokens" in header
    report = json.loads(run("report", "--json", "--gpu-memory", "141GB", "--tp", "8", *FAST).stdout)
    assert report["parallelism"] == tp["parallelism"] and report["kv_memory"] == per_gpu


def readme_ratios() -> dict:
    """The README table's "tokens vs bf16" column, by format id."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")) as readme:
        rows = [line for line in readme if line.startswith("| `")]
    ratios = {}
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        for name in cells[0].split(","):
            ratios[name.strip().strip("`")] = float(cells[2].split("x")[0])
    return ratios


def test_mlakv_command_states_one_bf16_baseline_the_readme_uses():
    readme = readme_ratios()
    for model, bf16_bytes in (("deepseek-v3", 1152), ("deepseek-v4-flash", 1024)):
        capacity = json.loads(run("capacity", "--json", "--model", model).stdout)
        assert capacity["bf16_record_bytes"] == bf16_bytes
        for f in capacity["formats"]:
            assert readme[f["format"]] == round(f["tokens_vs_bf16"], 2), f["format"]
        table = run("capacity", "--model", model).stdout
        assert f"x bf16: tokens relative to bf16 records of the same {bf16_bytes // 2 - 64} + 64 values" in table
        assert f"({bf16_bytes} B per token per layer)" in table
    report = run("report", "--model", "deepseek-v4-flash", *FAST).stdout
    assert "bf16 records of the same 448 + 64 values (1024 B per token per layer)" in report


@pytest.mark.parametrize("command", ["report", "roundtrip"])
def test_mlakv_command_refuses_seeds_beyond_2_64_rather_than_clamping(command):
    for seed, words in (("18446744073709551616", ["at most 2^64 - 1"]), ("1e3", ["decimal integer"])):
        result = subprocess.run([EXE, command, "--seed", seed], capture_output=True, text=True, timeout=20)
        one_line_exit_2(result, "--seed", *words)
    largest = run("roundtrip", "--tokens", "64", "--seed", str(2**64 - 1)).stdout
    assert f"(seed {2**64 - 1})" in largest


def address_space(limit: int):
    """A preexec_fn: `ulimit -v` of `limit` bytes in the child."""

    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def sparse_npy(path, shape) -> None:
    """A float16 .npy declaring `shape`, its data a hole (no disk blocks): the sizing reads only its header."""
    header = "{'descr': '<f2', 'fortran_order': False, 'shape': " + str(tuple(shape)) + ", }"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        f.truncate(f.tell() + 2 * math.prod(shape))


@pytest.mark.parametrize("path", ["report --tokens", "report --queries", "roundtrip --tokens", "report --activations"])
def test_mlakv_command_refuses_inputs_beyond_host_memory_before_starting_on_every_input_path(tmp_path, path):
    command, flag = path.split()
    if flag == "--tokens":
        args = [command, "--tokens", str(10**6)]  # about 14-16 GB
    elif flag == "--queries":
        args = [command, "--queries", "4096"]  # 128 heads: about 5 GB of query rows and outputs
    else:
        sparse_npy(tmp_path / "kv_c.npy", (2**20, 512))
        sparse_npy(tmp_path / "k_pe.npy", (2**20, 64))
        args = [command, "--activations", str(tmp_path)]
    result = subprocess.run(
        [EXE, *args, "--quiet"] if command == "report" else [EXE, *args],
        capture_output=True,
        text=True,
        timeout=20,
        preexec_fn=address_space(2 * 2**30),  # the 2 GiB limit: refused, not a bad_alloc
    )
    one_line_exit_2(result, flag, "need about", "of host memory", "is available")
    assert result.stdout == ""


def test_mlakv_command_plot_that_cannot_be_written_fails_before_the_table_is_printed(tmp_path):
    def small_files():  # files of at most 1 KiB: the SVG's write fails (EFBIG, not SIGXFSZ)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    path = tmp_path / "plot.svg"
    result = subprocess.run(
        [EXE, "report", "--plot", str(path), *FAST], capture_output=True, text=True, timeout=60, preexec_fn=small_files
    )
    one_line_exit_2(result, "--plot", str(path), "writing failed")
    assert result.stdout == "" and not path.exists()
    # A name the file system refuses is found before the run.
    long_name = tmp_path / ("x" * 300 + ".svg")
    result = subprocess.run([EXE, "report", "--plot", str(long_name)], capture_output=True, text=True, timeout=20)
    one_line_exit_2(result, "--plot", "cannot be written")
    assert result.stdout == ""


def test_mlakv_command_inspect_takes_an_mlakv_format_id_outright(tmp_path):
    rng = np.random.default_rng(5)
    kv = rng.standard_normal((4, 512)).astype(ml_dtypes.bfloat16)
    pe = rng.standard_normal((4, 64)).astype(ml_dtypes.bfloat16)
    for fmt in ("fp8_ds_mla", "nvfp4_ds_mla"):  # format ids that are also engine names
        cache = np.zeros((1, 4, FORMATS[fmt]), np.uint8)
        mlakv.concat_and_cache_mla(kv, pe, cache, np.arange(4), fmt)
        cache.tofile(tmp_path / "cache.bin")
        args = ["inspect", "--format", fmt, "--cache", str(tmp_path / "cache.bin"), "--block-size", "4", "--slot", "3"]
        out = run(*args, "--values", "4").stdout
        assert out.startswith(f"{fmt}: slot 3 = block 0, position 3")
        decoded_kv, _ = mlakv.gather_records(fmt, cache, [3])
        line = next(line for line in out.splitlines() if line.startswith("decoded kv_c"))
        values = [float(v) for v in line.split("=")[1].split("(")[0].split(",")]
        np.testing.assert_allclose(values, decoded_kv[0, :4], rtol=1e-5)
    # With an engine switch the id is read as the engine's kv_cache_dtype (upstream vLLM's 352-byte record).
    upstream = np.zeros((1, 4, 352), np.uint8)
    mlakv.concat_and_cache_mla(kv, pe, upstream, np.arange(4), "nvfp4_ds_mla")
    upstream.tofile(tmp_path / "cache.bin")
    out = run("inspect", "--format", "nvfp4_ds_mla", "--record-bytes", "352", *args[3:]).stdout
    assert out.startswith("nvfp4_fp8_ds_mla: slot 3")


def test_mlakv_command_without_a_command_points_to_help():
    result = subprocess.run([EXE], capture_output=True, text=True, timeout=20)
    one_line_exit_2(result, "a command is required", "report, capacity", "mlakv --help")


def test_mlakv_command_refuses_a_bfloat16_npy_with_a_hint(tmp_path):
    np.save(tmp_path / "kv_c.npy", np.zeros((4, 512), ml_dtypes.bfloat16))  # saved as '<V2'
    np.save(tmp_path / "k_pe.npy", np.zeros((4, 64), np.float32))
    result = run("report", "--quiet", "--activations", str(tmp_path), check=False)
    one_line_exit_2(result, "kv_c.npy", "got '<V2'", "bfloat16", "astype(np.float32)")


def test_scripts_main_runs_every_preset_with_a_plot_where_there_is_one(tmp_path):
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    (tmp_path / "scripts").mkdir()
    shutil.copy(os.path.join(root, "scripts", "main"), tmp_path / "scripts" / "main")
    # The installing steps stubbed: the script's own logic runs with this mlakv, on few tokens.
    (tmp_path / "scripts" / "setup").write_text('mlakv_stage() { :; }\nmlakv_pip_install() { mkdir -p "$1"; }\n')
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mlakv").write_text(f'#!/bin/sh\nexec {EXE} "$@" --tokens 256 --queries 1 --quiet\n')
    (tmp_path / "bin" / "mlakv").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    models = run("capacity", "--help").stdout.split("Model preset: ")[1].split("\n")[0].split(", ")
    assert "deepseek-v4-flash" in models and "deepseek-v3" in models
    for model in models:
        plot = tmp_path / "build" / "main" / "report.svg"
        plot.unlink(missing_ok=True)
        result = subprocess.run(
            ["bash", str(tmp_path / "scripts" / "main"), "--model", model], capture_output=True, text=True, env=env
        )
        assert result.returncode == 0, (model, result.stderr)
        assert plot.exists() == (not model.startswith("deepseek-v4")), model
        assert ("plot: build/main/report.svg" in result.stdout) == plot.exists()


def test_mlakv_command_formats_json_is_the_python_registry():
    assert json.loads(run("formats", "--json").stdout) == mlakv.formats()


def test_mlakv_command_roundtrip_json_has_the_tables_rows():
    report = json.loads(run("roundtrip", "--tokens", "256", "--seed", "7", "--json").stdout)
    assert (report["tokens"], report["seed"], report["device"], report["bf16_record_bytes"]) == (256, 7, "cpu", 1152)
    assert [f["format"] for f in report["formats"]] == list(FORMATS)
    table = run("roundtrip", "--tokens", "256", "--seed", "7").stdout.splitlines()
    for f in report["formats"]:
        assert f["tokens_vs_bf16"] == pytest.approx(1152 / f["record_bytes"], rel=1e-5)
        row = next(line.split() for line in table if line.split()[0] == f["format"])
        for column, key in ((3, "latent_rel_rms"), (4, "latent_max_abs"), (5, "rope_rel_rms"), (6, "rope_max_abs")):
            assert float(row[column]) == pytest.approx(f[key], rel=1e-3, abs=1e-30), (f["format"], key)
        assert f["latent_nonfinite"] == f["rope_nonfinite"] == 0
    assert report["formats"][0]["latent_rel_rms"] == 0.0  # bf16 stores the bf16 inputs exactly


def test_mlakv_command_inspect_json_gives_every_fields_bytes_and_every_decoded_value(tmp_path):
    cache = compact_cache_dump(tmp_path, 6)
    args = ["--format", "nvfp4_ds_mla_fp8_rope", "--cache", str(tmp_path / "cache.bin"), "--block-size", "4"]
    out = json.loads(run("inspect", *args, "--slot", "6", "--json").stdout)
    assert (out["format"], out["slot"], out["block"], out["position"], out["page_offset"]) == (
        "nvfp4_ds_mla_fp8_rope",
        6,
        1,
        2,
        4 * 368,
    )
    page = cache[1].reshape(-1)
    assert sum(f["bytes"] for f in out["fields"]) == 368
    for f in out["fields"]:
        assert f["row"] == "record" and f["page_offset"] == 2 * 368 + f["row_offset"]
        assert bytes.fromhex(f["hex"]) == page[f["page_offset"] : f["page_offset"] + f["bytes"]].tobytes(), f["name"]
    decoded_kv, decoded_pe = mlakv.gather_records("nvfp4_ds_mla_fp8_rope", cache, [6])
    np.testing.assert_array_equal(np.array(out["kv_c"], np.float32), decoded_kv[0])
    np.testing.assert_array_equal(np.array(out["k_pe"], np.float32), decoded_pe[0])
