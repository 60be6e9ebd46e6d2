# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: seeded random inputs in numpy bf16 (ml_dtypes) and fp16."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

BF16 = ml_dtypes.bfloat16


def random_inputs(tokens: int, dtype, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    scale = np.exp2(rng.integers(-8, 4, size=(tokens, 1)))
    kv_c = (rng.standard_normal((tokens, 512)) * scale).astype(np.float32).astype(dtype)
    k_pe = (rng.standard_normal((tokens, 64)) * scale).astype(np.float32).astype(dtype)
    return kv_c, k_pe


@pytest.fixture
def bf16_inputs():
    return random_inputs(8, BF16, seed=1)
