from types import ModuleType
from typing import Annotated, Any

from numpy.typing import NDArray

LATENT_DIM: int
ROPE_DIM: int
QUERY_DIM: int
VALUE_DIM: int

def concat_and_cache_mla(
    kv_c: Annotated[NDArray, dict(writable=False)],
    kv_c_tag: str | None,
    k_pe: Annotated[NDArray, dict(writable=False)],
    k_pe_tag: str | None,
    kv_cache: NDArray,
    slot_mapping: Annotated[NDArray, dict(writable=False)],
    kv_cache_dtype: str,
    scale: Annotated[NDArray, dict(writable=False)] | None,
    stream: int,
) -> None: ...
def concat_and_cache_nvfp4_mla_fp8_rope(
    kv_c: Annotated[NDArray, dict(writable=False)],
    kv_c_tag: str | None,
    k_pe: Annotated[NDArray, dict(writable=False)],
    k_pe_tag: str | None,
    kv_cache: NDArray,
    slot_mapping: Annotated[NDArray, dict(writable=False)],
    scale: Annotated[NDArray, dict(writable=False)] | None,
    per_token_scale: bool,
    stream: int,
) -> None: ...
def gather_records(
    format: str,
    kv_cache: Annotated[NDArray, dict(writable=False)],
    slots: Annotated[NDArray, dict(writable=False)],
    kv_c_out: NDArray,
    k_pe_out: NDArray,
    out_tag: str | None,
    scale: Annotated[NDArray, dict(writable=False)] | None,
    rope_dtype: str,
    stream: int,
) -> None: ...
def gather_records_paged(
    format: str,
    kv_cache: Annotated[NDArray, dict(writable=False)],
    block_table: Annotated[NDArray, dict(writable=False)],
    seq_lens: Annotated[NDArray, dict(writable=False)],
    cu_seq_lens: Annotated[NDArray, dict(writable=False)],
    kv_c_out: NDArray,
    k_pe_out: NDArray,
    out_tag: str | None,
    scale: Annotated[NDArray, dict(writable=False)] | None,
    rope_dtype: str,
    stream: int,
) -> None: ...
def sparse_mla_decode(
    format: str,
    q: Annotated[NDArray, dict(writable=False)],
    q_tag: str | None,
    kv_cache: Annotated[NDArray, dict(writable=False)],
    indices: Annotated[NDArray, dict(writable=False)],
    out: NDArray,
    out_tag: str | None,
    lse: NDArray,
    topk_len: Annotated[NDArray, dict(writable=False)] | None,
    sm_scale: float,
    scale: Annotated[NDArray, dict(writable=False)] | None,
    rope_dtype: str,
    workspace: NDArray | None,
    attn_sink: Annotated[NDArray, dict(writable=False)] | None,
    extra_format: str | None,
    extra_kv_cache: Annotated[NDArray, dict(writable=False)] | None,
    extra_indices: Annotated[NDArray, dict(writable=False)] | None,
    extra_topk_len: Annotated[NDArray, dict(writable=False)] | None,
    stream: int,
) -> None: ...
def merge_attention_states(
    out_a: Annotated[NDArray, dict(writable=False)],
    a_tag: str | None,
    lse_a: Annotated[NDArray, dict(writable=False)],
    out_b: Annotated[NDArray, dict(writable=False)],
    b_tag: str | None,
    lse_b: Annotated[NDArray, dict(writable=False)],
    out: NDArray,
    out_tag: str | None,
    lse: NDArray,
    stream: int,
) -> None: ...
def sparse_mla_decode_workspace_size(rows: int, heads: int, topk: int, cuda: bool, device_index: int) -> int: ...
def page_bytes(format: str, block_size: int) -> int: ...
def formats() -> list: ...
def resolve_format(
    kv_cache_dtype: str, record_bytes: int, fp8_rope: bool, per_token_scale: bool, input_dtype: str | None
) -> str: ...
def capabilities() -> list: ...
def dcp_local_slots(
    indices: Annotated[NDArray, dict(writable=False)],
    req_id: Annotated[NDArray, dict(writable=False)],
    block_table: Annotated[NDArray, dict(writable=False)],
    local_slots: NDArray,
    world_size: int,
    rank: int,
    interleave: int,
    block_size: int,
    stream: int,
) -> None: ...
def merge_attention_states_stacked(
    outs: Annotated[NDArray, dict(writable=False)],
    outs_tag: str | None,
    lses: Annotated[NDArray, dict(writable=False)],
    out: NDArray,
    out_tag: str | None,
    lse: NDArray,
    stream: int,
) -> None: ...

# mlakv.torch's entry points (python/src/raw_views.cpp): each view is the tuple
# (data_ptr, dtype, shape, strides, device_index); run=False runs only the checks.
raw: ModuleType

class MlaKvCacheWriter:
    def __init__(self, kv_cache_dtype: str, fp8_rope: bool, per_token_scale: bool) -> None: ...
    @property
    def compact(self) -> bool: ...
    def update(
        self,
        kv_c: Annotated[NDArray, dict(writable=False)],
        kv_c_tag: str | None,
        k_pe: Annotated[NDArray, dict(writable=False)],
        k_pe_tag: str | None,
        kv_cache: NDArray,
        slot_mapping: Annotated[NDArray, dict(writable=False)],
        kv_cache_dtype: str,
        scale: Annotated[NDArray, dict(writable=False)] | None,
        stream: int,
    ) -> None: ...
    def update_raw(
        self,
        kv_c: tuple[Any, ...],
        k_pe: tuple[Any, ...],
        kv_cache: tuple[Any, ...],
        slot_mapping: tuple[Any, ...],
        kv_cache_dtype: str,
        scale: tuple[Any, ...] | None,
        stream: int,
        run: bool,
    ) -> None: ...
