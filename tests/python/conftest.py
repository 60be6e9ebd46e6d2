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


def error_of(call, *args, **kwargs):
    """(type, text) of the error a call raises, None when it raises none."""
    try:
        call(*args, **kwargs)
    except Exception as e:  # noqa: BLE001  (the type is part of what is compared)
        return type(e), str(e)
    return None


class DLPackOnly:
    """An array seen only through the DLPack protocol (as JAX's immutable arrays are), with its shape."""

    def __init__(self, array: np.ndarray) -> None:
        self.array, self.shape, self.ndim = array, array.shape, array.ndim

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class BrokenExporter:
    """A DLPack producer whose export fails, with its own reason."""

    def __dlpack__(self, **kwargs):
        raise BufferError("this producer exports nothing")

    def __dlpack_device__(self):
        return (1, 0)


@pytest.fixture
def bf16_inputs():
    return random_inputs(8, BF16, seed=1)
