# SPDX-License-Identifier: Apache-2.0
"""Golden records from an independent implementation of ABI.md, byte for byte through the Python API."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import mlakv
from conftest import BF16
from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

VECTORS = sorted((Path(__file__).parents[1] / "data" / "vectors").glob("*.json"))
ENGINE_DTYPE = {"bf16": "auto", "fp16": "auto"}


def test_vectors_cover_every_token_major_format():
    covered = {json.loads(p.read_text())["format"] for p in VECTORS}
    # The DeepSeek V4 family has no independent vectors: its golden pages and records are built by
    # hand from the engines' facts in tests/cpp/fp8_ds_mla_v4_test.cpp and v41_records_test.cpp.
    assert covered == {f["id"] for f in mlakv.formats() if f["geometry"]["nope_dims"] == 512}


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_records_match_golden_vectors(path: Path):
    vec = json.loads(path.read_text())
    dtype = BF16 if vec["input_dtype"] == "bf16" else np.float16
    kv_c = np.array(vec["kv_c_bits"], dtype=np.uint16).view(dtype)
    k_pe = np.array(vec["k_pe_bits"], dtype=np.uint16).view(dtype)
    want = [bytes.fromhex(h) for h in vec["records_hex"]]
    tokens, record_bytes = len(want), len(want[0])
    cache = np.full((2, tokens, record_bytes), 0xAB, dtype=np.uint8)
    slots = np.arange(tokens, dtype=np.int64) + tokens  # block 1
    fmt = vec["format"]
    if fmt.startswith("nvfp4_ds_mla_fp8_rope"):
        concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, slots, None, per_token_scale=fmt.endswith("_pts"))
    else:
        mlakv.concat_and_cache_mla(kv_c, k_pe, cache, slots, ENGINE_DTYPE.get(fmt, fmt), vec["k_scale"])
    assert (cache[0] == 0xAB).all(), "block 0 must be untouched"
    for t in range(tokens):
        got = cache[1, t].tobytes()
        if got != want[t]:
            first = next(i for i in range(record_bytes) if got[i] != want[t][i])
            pytest.fail(f"{fmt} token {t}: first differing byte {first}: got {got[first]}, want {want[t][first]}")
