# SPDX-License-Identifier: Apache-2.0
"""Every public operation as a torch op, ``torch.ops.mlakv.*``: importing this module registers them.

``import mlakv`` never imports torch; an engine (or ``mlakv.integrations.vllm``)
imports ``mlakv.torch`` once, after which::

    torch.ops.mlakv.concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale)
    torch.ops.mlakv.concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, kv_cache, slot_mapping, scale, per_token_scale)
    kv_c, k_pe = torch.ops.mlakv.gather_records(format, kv_cache, slots, scale=None, rope_dtype="bf16", dtype=None)
    torch.ops.mlakv.gather_records_out(format, kv_cache, slots, out)    # out [N, 576]: the prefill layout
    out = torch.ops.mlakv.gather_records_paged(format, kv_cache, block_table, seq_lens, cu_seq_lens, num_rows, ...)
    out, lse = torch.ops.mlakv.sparse_mla_decode(format, q, kv_cache, indices, topk_len, sm_scale, ...,
                                                 attn_sink=None, extra_format=None, extra_kv_cache=None, ...)
    out, lse = torch.ops.mlakv.sparse_mla_prefill(format, q, kv_cache, indices, topk_len, sm_scale, attn_sink, ...)
    out, lse = torch.ops.mlakv.merge_attention_states(out_a, lse_a, out_b, lse_b)
    torch.ops.mlakv.sparse_mla_decode_workspace_size(rows, heads, topk, device)
    slots = torch.ops.mlakv.dcp_local_slots(indices, req_id, block_table, world_size=N, rank=r, block_size=B)
    out, lse = torch.ops.mlakv.merge_attention_states_stacked(outs, lses)   # [N, R, H, D], [N, R, H]: N-way

Every op comes from the op table (python/ops/op_table.h, read here through ``_mlakv.op_table()``): its
schema, the outputs its kernel allocates and its run function; this module turns each entry into a Python
kernel and a fake implementation. The schemas declare what each op writes (the cache, gather_records_out's
out, the decode's workspace) and nothing else. Each op hands the extension its tensors' pointers, dtypes, shapes,
strides and torch's current CUDA stream (no DLPack export), so Dynamo traces the
ops and ``torch.compile(fullgraph=True)`` holds over a writer -> reader ->
decode -> merge pipeline, and CUDA graphs capture them. Each fake
implementation computes the output shapes and runs the same checks as the real
call (``mlakv/checks.h``: shape, dtype, record width, format, strides,
alignment) on made-up addresses, so a traced program refuses what running it
would; only a CPU k_scale's value (read at run time) and shapes without a hint
(data-dependent sizes: the checks are skipped) escape it. The ops' schemas and
CPU/CUDA kernels are registered in C++ (``mlakv/_torch_ops.so``, built with
``-DMLAKV_BUILD_TORCH_OPS=ON``: the dispatcher calls the library directly) when
that extension is installed, else by ``torch.library.Library`` define/impl,
torch's fastest Python path; the fake implementations are this module's either
way. ``REGISTRATION`` says which ("cpp" or "python"); the environment variable
``MLAKV_TORCH_OPS`` = ``python`` forces the Python kernels, ``cpp`` requires the
extension. Schemas, errors and what is written are the same under both.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Optional

import torch

from . import _mlakv, _widths
from ._checks import Call

MINIMUM_TORCH = (2, 4)


def _torch_version(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


if _torch_version(torch.__version__) < MINIMUM_TORCH or not hasattr(torch.library, "register_fake"):
    raise ImportError(
        f"mlakv.torch needs torch >= {MINIMUM_TORCH[0]}.{MINIMUM_TORCH[1]} (torch.library.register_fake), "
        f"found torch {torch.__version__}; mlakv itself works without it"
    )

__all__ = ["MINIMUM_TORCH", "REGISTRATION"]

_raw = _mlakv.raw

# mlakv::DType's values (include/mlakv/tensor_view.h); any other torch dtype is kOther.
_OTHER = 10
_DTYPES = {
    torch.bfloat16: 0,
    torch.float16: 1,
    torch.float32: 2,
    torch.float64: 3,
    torch.uint8: 4,
    torch.int8: 5,
    torch.int16: 7,
    torch.int32: 8,
    torch.int64: 9,
}
# The stock writer's cache: engines type an fp8 cache float8_e4m3fn or uint8,
# the same bytes (16-bit caches the library itself reads as their bytes).
_CACHE_DTYPES = {**_DTYPES, torch.float8_e4m3fn: 4}


def _view(t: torch.Tensor, dtypes: dict = _DTYPES) -> tuple:
    """The extension's view of a real tensor: (data_ptr, dtype, shape, strides, device_index)."""
    return (t.data_ptr(), dtypes.get(t.dtype, _OTHER), t.shape, t.stride(), t.get_device())


def _stream(t: torch.Tensor) -> int:
    """torch's current stream on t's device (0 for the CPU), as the raw cudaStream_t."""
    return torch._C._cuda_getCurrentRawStream(t.get_device()) if t.is_cuda else 0


class _NoHint(Exception):
    """A size with no hint (data-dependent): the fake implementation cannot check concrete values."""


def _hint(x: Any) -> int:
    if isinstance(x, int):
        return x
    hint = getattr(getattr(x, "node", None), "hint", None)
    if hint is None:
        raise _NoHint
    return int(hint)


# A real k_scale for the checks of a fake CPU one: its value is read at run time.
_ONE = torch.ones(1, dtype=torch.float32)


class _FakeViews:
    """Views of fake tensors at made-up addresses: one 2^40-aligned base per storage (views of one
    storage overlap exactly as at run time), plus the tensor's offset; sizes are the trace's hints."""

    def __init__(self) -> None:
        self._bases: dict[int, int] = {}

    def __call__(self, t: torch.Tensor, dtypes: dict = _DTYPES) -> tuple:
        try:
            key = t.untyped_storage()._cdata
        except (RuntimeError, NotImplementedError, AttributeError):
            key = id(t)
        base = self._bases.setdefault(key, (len(self._bases) + 1) << 40)
        shape = tuple(_hint(d) for d in t.shape)
        strides = tuple(_hint(s) for s in t.stride())
        data = base + _hint(t.storage_offset()) * t.element_size()
        device = t.device.index if t.device.type == "cuda" else -1
        if device is None:
            device = 0
        return (data, dtypes.get(t.dtype, _OTHER), shape, strides, device)

    def optional(self, t: Optional[torch.Tensor]) -> Optional[tuple]:
        return None if t is None else self(t)

    def scale(self, t: Optional[torch.Tensor]) -> Optional[tuple]:
        """A k_scale the checks take for a CPU one (a CPU or meta tensor: both travel as device -1) has its
        value read by them: a real 1.0 stands in at the fake's shape."""
        if t is None or t.device.type == "cuda":
            return self.optional(t)
        view = self(t)
        return (_ONE.data_ptr(), *view[1:])


def _fake_checks(check: Any) -> None:
    """Runs a fake implementation's checks; sizes without a hint skip them (run time checks)."""
    try:
        check(_FakeViews())
    except _NoHint:
        pass


def _registration() -> str:
    """Loads mlakv/_torch_ops.so (the C++ schemas and kernels) when it is installed and not turned off."""
    choice = os.environ.get("MLAKV_TORCH_OPS", "")
    if choice not in ("", "cpp", "python"):
        raise ImportError(f"MLAKV_TORCH_OPS must be 'cpp', 'python' or unset, got {choice!r}")
    library = Path(__file__).with_name("_torch_ops.so")
    if choice == "python" or (not choice and not library.exists()):
        return "python"
    if not library.exists():
        raise ImportError(
            "MLAKV_TORCH_OPS=cpp: this mlakv has no C++ torch ops (build it with "
            "-C cmake.define.MLAKV_BUILD_TORCH_OPS=ON --no-build-isolation)"
        )
    try:
        torch.ops.load_library(str(library))
    except OSError as e:
        if choice == "cpp":
            raise ImportError(
                f"MLAKV_TORCH_OPS=cpp: {library.name} does not load into torch {torch.__version__}: {e}"
            ) from e
        # Built against another torch (its C++ ABI is per version): the Python kernels, said out loud.
        warnings.warn(
            f"mlakv.torch: {library.name} does not load into torch {torch.__version__} ({e}); "
            "registering the Python kernels (rebuild mlakv against this torch for the C++ ones)",
            RuntimeWarning,
            stacklevel=2,
        )
        return "python"
    return "cpp"


REGISTRATION = _registration()
# The op table (python/ops/op_table.h): each op's name, schema and outputs, as every binding reads them.
_TABLE: list[dict[str, Any]] = _mlakv.op_table()
# The schemas, name -> text: what this module defines, and what the C++ extension must define (tested).
_SCHEMAS: dict[str, str] = {op["name"]: op["schema"] for op in _TABLE}
_lib = torch.library.Library("mlakv", "DEF" if REGISTRATION == "python" else "FRAGMENT")

# mlakv::DType's value -> torch dtype, for the outputs the table declares.
_TORCH_DTYPES = {code: dtype for dtype, code in _DTYPES.items()}
# The arguments whose value a CPU call's checks read (a fake one gets a real 1.0: _FakeViews.scale).
_SCALES = ("scale", "k_scale")


def _output_dtype(call: Call, bound: dict[str, Any], rule: tuple) -> torch.dtype:
    source, code, arg = rule
    if source == "constant":
        return _TORCH_DTYPES[code]
    if source == "like":
        return bound[arg].dtype
    dtype = bound[arg]  # the readers' dtype: float32 or bfloat16
    if dtype is None:
        return torch.float32
    if dtype not in (torch.float32, torch.bfloat16):
        call.type_error(arg, "must be torch.float32 or torch.bfloat16 (or None: torch.float32)", str(dtype))
    return dtype


def _output_shape(call: Call, bound: dict[str, Any], rules: list) -> list:
    """An output's dims from the call's arguments (symbolic in a trace), as registration.cpp reads them."""
    shape: list = []
    for source, arg, first, last, value in rules:
        if source == "constant":
            shape.append(value)
        elif source == "axis":
            t = bound[arg]
            shape.append(t.shape[first] if t.dim() > first else 0)
        elif source == "slice":
            shape.extend(bound[arg].shape[first : None if last < 0 else last])
        elif source == "int":
            if isinstance(bound[arg], int) and bound[arg] < 0:
                call.value_error(arg, "must be >= 0", str(bound[arg]))
            shape.append(bound[arg])
        else:
            nope, rope = _widths(bound["format"])
            shape.append({"format_nope": nope, "format_rope": rope, "format_width": nope + rope}[source])
    return shape


def _returned(op: dict[str, Any], outputs: list[torch.Tensor], result: Any) -> Any:
    if op["schema"].endswith("-> int"):
        return result
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


class _RealViews:
    """Views of real tensors, with _FakeViews' interface."""

    __call__ = staticmethod(_view)
    scale = staticmethod(_view)


_REAL_VIEWS = _RealViews()


class _Op:
    """One table entry as torch registers it: its Python kernel and its fake implementation."""

    def __init__(self, op: dict[str, Any]) -> None:
        self.op = op
        arguments = op["arguments"]  # name, type, written, default: the table's parse of the schema
        self.names = tuple(a["name"] for a in arguments)
        self.defaults = tuple((a["name"], a["default"]) for a in arguments if "default" in a)
        # How each argument travels to the raw entry point: the writers' cache may be float8_e4m3fn (its
        # bytes), a fake CPU k_scale gets a real 1.0 (the checks read its value), a trace's int its hint.
        self.kinds = tuple(_kind(a) for a in arguments)
        self.entry = getattr(_raw, op["name"])
        # The workspace size has no tensor: one CompositeExplicitAutograd kernel, no fake.
        self.composite = "tensor" not in (a["type"] for a in arguments)

    def _bind(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        """The call's arguments by name, defaults filled in."""
        bound = dict(zip(self.names, args))
        bound.update(kwargs)
        for name, value in self.defaults:
            bound.setdefault(name, value)
        return bound

    def _first_tensor(self, bound: dict[str, Any]) -> Optional[torch.Tensor]:
        return next((bound[n] for n, k in zip(self.names, self.kinds) if k in _TENSORS and bound[n] is not None), None)

    def _call(self, bound: dict[str, Any]) -> Call:
        """Who the op's errors name: the op, and its first str argument (its format), as the C++ bindings do."""
        return Call(self.op["name"], next((bound[n] for n, k in zip(self.names, self.kinds) if k == "str"), None))

    def _outputs(self, bound: dict[str, Any]) -> list[torch.Tensor]:
        """The tensors the op returns, on its first tensor's device; a size that cannot be allocated is refused
        naming the argument it comes from (registration.cpp does the same)."""
        if not self.op["outputs"]:
            return []
        call = self._call(bound)
        device = self._first_tensor(bound).device
        outputs = []
        for output in self.op["outputs"]:
            dtype = _output_dtype(call, bound, output["dtype"])
            shape = _output_shape(call, bound, output["shape"])
            size_from = next((arg for _, arg, *_ in output["shape"] if arg), output["name"])
            make = lambda shape=shape, dtype=dtype: torch.empty(shape, dtype=dtype, device=device)  # noqa: E731
            outputs.append(call.allocate(size_from, make, tuple(shape), str(dtype)))
        return outputs

    def _check_devices(self, bound: dict[str, Any]) -> None:
        """Every tensor on the first one's device (a k_scale may also be on the CPU), as the library requires:
        the dispatcher sends a call with a meta tensor among real ones to the fake implementation, which
        would otherwise return outputs nobody wrote, and write nothing."""
        tensors = [(n, k, bound[n]) for n, k in zip(self.names, self.kinds) if k in _TENSORS and bound[n] is not None]
        first_name, _, first = next(t for t in tensors if t[1] != "scale")
        for name, kind, t in tensors:
            if t.device == first.device:
                continue
            call = self._call(bound)
            if kind != "scale":
                call.value_error(name, f"must be on the same device as {first_name} ({first.device})", str(t.device))
            if t.device.type != "cpu":
                call.value_error(name, f"must be on the CPU or on the tensors' device ({first.device})", str(t.device))

    def _enter(self, views: Any, bound: dict[str, Any], outputs: list, stream: int, run: bool) -> Any:
        """The raw entry point on ``views`` of the tensors (_REAL_VIEWS or a _FakeViews)."""
        values = [_travel(kind, bound[name], views) for name, kind in zip(self.names, self.kinds)]
        return self.entry(*values, *(views(t) for t in outputs), stream, run)

    def kernel(self, *args, **kwargs):
        bound = self._bind(args, kwargs)
        outputs = self._outputs(bound)
        first = self._first_tensor(bound)
        result = self._enter(_REAL_VIEWS, bound, outputs, 0 if first is None else _stream(first), True)
        return _returned(self.op, outputs, result)

    def fake(self, *args, **kwargs):
        """The outputs, after the real call's checks on made-up addresses."""
        bound = self._bind(args, kwargs)
        self._check_devices(bound)
        outputs = self._outputs(bound)
        _fake_checks(lambda v: self._enter(v, bound, outputs, 0, False))
        return _returned(self.op, outputs, None)

    def register(self) -> None:
        name = self.op["name"]
        if REGISTRATION == "python":
            _lib.define(self.op["schema"])
            for key in ("CompositeExplicitAutograd",) if self.composite else ("CPU", "CUDA"):
                _lib.impl(name, self.kernel, key)
        if not self.composite:
            torch.library.register_fake(f"mlakv::{name}", self.fake, lib=_lib)


_TENSORS = ("tensor", "cache", "scale")


def _kind(argument: dict[str, Any]) -> str:
    if argument["type"] == "tensor":
        if argument["name"] in _SCALES:
            return "scale"
        return "cache" if argument["name"] == "kv_cache" and argument["written"] else "tensor"
    return argument["type"]


def _travel(kind: str, x: Any, views: Any) -> Any:
    """An argument as the raw entry point takes it."""
    if x is None or kind in ("str", "float", "bool"):
        return x
    if kind == "tensor":
        return views(x)
    if kind == "int":
        return _hint(x)  # an int, or a SymInt's hint in a trace
    if kind == "cache":
        return views(x, _CACHE_DTYPES)
    if kind == "scale":
        return views.scale(x)
    if kind == "dtype":
        return (_DTYPES.get(x, _OTHER), str(x))
    return (x.type == "cuda", (x.index or 0) if x.type == "cuda" else 0)  # a device


for _entry in _TABLE:
    _Op(_entry).register()
