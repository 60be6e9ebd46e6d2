# SPDX-License-Identifier: Apache-2.0
"""Argument checks of the public Python functions, run before anything reaches the
extension: every mistake is one line, ``mlakv::<function>(<format>): <arg>: <rule>, got <value>``,
as the library's own errors read (never nanobind's signature dump or a raw numpy error)."""

from __future__ import annotations

import math
import operator
from typing import Any, NoReturn

import numpy as np

# Output dtypes of the readers: the documented spellings and the library's own name for bf16.
OUTPUT_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16"}


def _type_name(x: Any) -> str:
    return type(x).__name__


def _numpy_dtype_ok(dtype: np.dtype) -> bool:
    return dtype.kind in "biuf" or dtype.name == "bfloat16"


def text_fault(x: str) -> str | None:
    """Why a str cannot reach the library as it is, else None: a NUL would end its text early (C strings)
    and a lone surrogate has no UTF-8 encoding."""
    try:
        x.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (a lone surrogate has no UTF-8 encoding)"
    if "\0" in x:
        return "must not contain a NUL character"
    return None


def int_text(x: int) -> str:
    """An int as errors show it: its digits, or its size when they would be too many to read (or to print:
    Python refuses str() of an int of more than 4300 digits)."""
    return str(x) if x.bit_length() <= 256 else f"an int of {x.bit_length()} bits"


def shown(x: Any) -> str:
    """A wrong value as an error shows it, on one line: a str's repr, an int's digits (int_text), else
    its type (an array's repr spans lines)."""
    if isinstance(x, str):
        return repr(x)
    if isinstance(x, int) and not isinstance(x, bool):
        return int_text(x)
    return _type_name(x)


def real(x: Any) -> float:
    """A Python or numpy real as a float: an int beyond the float range becomes +-inf, as a float beyond
    float32's range becomes +-inf in float32, so the library's own rule refuses it (never OverflowError)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


class Call:
    """The checks of one call, with its ``mlakv::function(format)`` prefix."""

    def __init__(self, function: str, format: Any = None) -> None:
        self.function = function
        # A format id that is no text (a NUL, a lone surrogate) stays out of the prefix: the error says so.
        shown = isinstance(format, str) and text_fault(format) is None
        self.prefix = f"mlakv::{function}({format}): " if shown else f"mlakv::{function}: "

    def type_error(self, name: str, rule: str, got: str) -> NoReturn:
        raise TypeError(f"{self.prefix}{name}: {rule}, got {got}")

    def value_error(self, name: str, rule: str, got: str) -> NoReturn:
        raise ValueError(f"{self.prefix}{name}: {rule}, got {got}")

    def string(self, name: str, x: Any, rule: str) -> str:
        if not isinstance(x, str):
            self.type_error(name, rule, _type_name(x))
        fault = text_fault(x)
        if fault is not None:
            self.value_error(name, fault, repr(x))
        return x

    def optional_string(self, name: str, x: Any, rule: str) -> str | None:
        return None if x is None else self.string(name, x, rule)

    def array(self, name: str, x: Any, *, writable: bool = False) -> Any:
        """numpy arrays of a numeric dtype, or any other DLPack producer (torch, CuPy, JAX)."""
        if isinstance(x, np.ndarray):
            if not _numpy_dtype_ok(x.dtype):
                self.type_error(name, "must be an array of a numeric dtype", f"dtype {x.dtype}")
            if not x.dtype.isnative:  # DLPack carries no byte order: the bytes would be read swapped
                self.type_error(name, "must be in the machine's byte order (DLPack has no other)", f"dtype {x.dtype}")
            if writable and not x.flags.writeable:
                self.value_error(name, "must be writable (it is written in place)", "a read-only array")
            return x
        if hasattr(x, "__dlpack__") or type(x).__name__ == "PyCapsule":
            return x
        self.type_error(name, "must be an array (numpy, torch, CuPy or another DLPack producer)", _type_name(x))

    def optional_array(self, name: str, x: Any, *, writable: bool = False) -> Any:
        return None if x is None else self.array(name, x, writable=writable)

    def slots(self, name: str, x: Any) -> Any:
        """A list, tuple or range of Python ints becomes an int64 array; arrays pass through."""
        if isinstance(x, (list, tuple, range)):
            if not all(isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) for s in x):
                bad = next(s for s in x if not isinstance(s, (int, np.integer)) or isinstance(s, (bool, np.bool_)))
                self.type_error(name, "a list of slots must hold Python ints", f"an element of type {_type_name(bad)}")
            try:
                return np.asarray(x, dtype=np.int64)
            except OverflowError:
                self.value_error(name, "slots must fit int64", "a larger int")
        return self.array(name, x)

    def scale(self, name: str, x: Any) -> Any:
        """None, a Python or numpy real number (a 1-element float32 array), or an array."""
        if x is None:
            return None
        if isinstance(x, (bool, np.bool_)):
            self.type_error(name, "must be a float or a 1-element float32 array", "bool")
        if isinstance(x, (int, float, np.floating, np.integer)):
            with np.errstate(over="ignore"):
                return np.array([real(x)], dtype=np.float32)
        return self.array(name, x)

    def optional_real(self, name: str, x: Any, rule: str) -> float | None:
        """None or a Python or numpy real number (not bool), as a float (see ``real``)."""
        if x is None:
            return None
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
            self.type_error(name, rule, _type_name(x))
        return real(x)

    def stream(self, name: str, x: Any) -> int | None:
        """None, an int cudaStream_t, or a torch/CuPy stream object."""
        if x is None:
            return None
        for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
            if hasattr(x, attr):
                x = getattr(x, attr)
                break
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            self.type_error(name, "must be an int cudaStream_t or a torch/CuPy stream", _type_name(x))
        if not 0 <= int(x) < 2**64:
            self.value_error(name, "must be a cudaStream_t in [0, 2^64)", int_text(int(x)))
        return int(x)

    def integer(self, name: str, x: Any) -> int:
        """An int (anything ``operator.index`` takes but a bool) that fits int64, as the library takes every int."""
        if isinstance(x, (bool, np.bool_)):
            self.type_error(name, "must be an int", _type_name(x))
        try:
            value = operator.index(x)
        except TypeError:  # not an int, or an array of more than one element
            self.type_error(name, "must be an int", _type_name(x))
        if not -(2**63) <= value < 2**63:
            self.value_error(name, "must fit int64 (in [-2^63, 2^63))", int_text(value))
        return value

    def count(self, name: str, x: Any) -> int:
        """A non-negative Python or numpy int (not bool) that fits int64."""
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            self.type_error(name, "must be an int", _type_name(x))
        if int(x) < 0:
            self.value_error(name, "must be >= 0", int_text(int(x)))
        if int(x) >= 2**63:
            self.value_error(name, "must be < 2^63", int_text(int(x)))
        return int(x)

    def flag(self, name: str, x: Any) -> bool:
        """A Python or numpy bool (not an int, nor an array whose truth is ambiguous)."""
        if not isinstance(x, (bool, np.bool_)):
            self.type_error(name, "must be a bool", _type_name(x))
        return bool(x)

    def output_dtype(self, name: str, x: Any) -> str:
        accepted = ", ".join(repr(k) for k in OUTPUT_DTYPES)
        if not isinstance(x, str):
            self.type_error(name, f"must be one of {accepted}", _type_name(x))
        if x not in OUTPUT_DTYPES:
            self.value_error(name, f"must be one of {accepted}", repr(x))
        return OUTPUT_DTYPES[x]

    def rope_dtype(self, name: str, x: Any) -> str:
        if not isinstance(x, str) or x not in ("bf16", "fp16"):
            self.value_error(name, "must be bf16 or fp16", shown(x))
        return x

    def prefill_out(self, name: str, x: Any, rows: int | None, width: int) -> Any:
        """``out``: a writable [N, 576] array (N = rows when known)."""
        self.array(name, x, writable=True)
        shape = tuple(int(d) for d in getattr(x, "shape", ()))
        expected = f"(N, {width})" if rows is None else f"(N, {width}) with N = {rows}"
        if len(shape) != 2 or shape[1] != width or (rows is not None and shape[0] != rows):
            self.value_error(name, f"shape must be {expected}", str(shape))
        return x

    def allocate(self, name: str, make: Any, shape: tuple[int, ...], dtype: str) -> Any:
        """An output array; a size that cannot be allocated is an error naming ``name``."""
        try:
            return make()
        except (MemoryError, ValueError, RuntimeError, OverflowError) as e:
            first_line = str(e).splitlines()[0] if str(e) else type(e).__name__
            self.value_error(name, f"cannot allocate a {shape} {dtype} output", first_line)
