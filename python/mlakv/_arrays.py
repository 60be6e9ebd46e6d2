# SPDX-License-Identifier: Apache-2.0
"""Adapts Python arguments for the extension: bf16 numpy arrays, scales, slot lists."""

from __future__ import annotations

from typing import Any

import numpy as np


def input_array(x: Any) -> tuple[Any, str | None]:
    """numpy has no bfloat16: an ml_dtypes.bfloat16 array travels as a uint16 view tagged 'bf16'."""
    if isinstance(x, np.ndarray) and x.dtype.name == "bfloat16":
        return x.view(np.uint16), "bf16"
    return x, None


def scale_array(scale: Any) -> Any:
    """None stays None; a Python or numpy scalar becomes a 1-element float32 array;
    arrays and tensors (engines pass layer._k_scale) go through unchanged."""
    if scale is None:
        return None
    if isinstance(scale, (bool, int, float, np.floating, np.integer)):
        return np.array([scale], dtype=np.float32)
    return scale


def slot_array(slots: Any) -> Any:
    """A Python list or tuple of slots becomes an int64 array; arrays pass unchanged."""
    if isinstance(slots, (list, tuple, range)):
        return np.asarray(slots, dtype=np.int64)
    return slots
