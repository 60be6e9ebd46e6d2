from mlakv._mlakv import raw as raw

# The op functions (one per entry of python/ops/op_table.h): the schema's arguments, then the outputs
# by name and the stream. Arrays are DLPack producers, a numpy bfloat16 array the pair (its uint16
# view, "bf16"). mlakv._mlakv.raw has the same functions for mlakv.torch: view tuples (data_ptr,
# dtype, shape, strides, device_index), every argument positional in the schema's order, then the
# outputs, the stream and run (False: only the checks).

LATENT_DIM: int = 512

ROPE_DIM: int = 64

QUERY_DIM: int = 576

VALUE_DIM: int = 512

def page_bytes(format: str, block_size: int) -> int: ...
def formats() -> list: ...
def resolve_format(
    kv_cache_dtype: str, record_bytes: int, fp8_rope: bool, per_token_scale: bool, input_dtype: str | None
) -> str: ...
def capabilities() -> list: ...
def concat_and_cache_mla(
    kv_c: object,
    k_pe: object,
    kv_cache: object,
    slot_mapping: object,
    kv_cache_dtype: str,
    scale: object | None = None,
    *,
    stream: int = 0,
) -> None: ...
def concat_and_cache_nvfp4_mla_fp8_rope(
    kv_c: object,
    k_pe: object,
    kv_cache: object,
    slot_mapping: object,
    scale: object | None = None,
    per_token_scale: bool = False,
    *,
    stream: int = 0,
) -> None: ...
def mla_kv_cache_writer_update(
    kv_c: object,
    k_pe: object,
    kv_cache: object,
    slot_mapping: object,
    kv_cache_dtype: str,
    k_scale: object | None,
    seam_kv_cache_dtype: str,
    fp8_rope: bool,
    per_token_scale: bool,
    *,
    stream: int = 0,
) -> None: ...
def gather_records(
    format: str,
    kv_cache: object,
    slots: object,
    *,
    scale: object | None = None,
    rope_dtype: str = "bf16",
    dtype: tuple[int, str] | None = None,
    kv_c: object,
    k_pe: object,
    stream: int = 0,
) -> None: ...
def gather_records_out(
    format: str,
    kv_cache: object,
    slots: object,
    out: object,
    *,
    scale: object | None = None,
    rope_dtype: str = "bf16",
    stream: int = 0,
) -> None: ...
def gather_records_paged(
    format: str,
    kv_cache: object,
    block_table: object,
    seq_lens: object,
    cu_seq_lens: object,
    num_rows: int,
    *,
    scale: object | None = None,
    rope_dtype: str = "bf16",
    dtype: tuple[int, str] | None = None,
    out: object,
    stream: int = 0,
) -> None: ...
def sparse_mla_decode(
    format: str,
    q: object,
    kv_cache: object,
    indices: object,
    topk_len: object | None = None,
    sm_scale: float | None = None,
    *,
    scale: object | None = None,
    rope_dtype: str = "bf16",
    workspace: object | None = None,
    attn_sink: object | None = None,
    extra_format: str | None = None,
    extra_kv_cache: object | None = None,
    extra_indices: object | None = None,
    extra_topk_len: object | None = None,
    out: object,
    lse: object,
    stream: int = 0,
) -> None: ...
def sparse_mla_prefill(
    format: str,
    q: object,
    kv_cache: object,
    indices: object,
    topk_len: object | None = None,
    sm_scale: float | None = None,
    attn_sink: object | None = None,
    *,
    scale: object | None = None,
    rope_dtype: str = "bf16",
    out: object,
    lse: object,
    stream: int = 0,
) -> None: ...
def merge_attention_states(
    out_a: object, lse_a: object, out_b: object, lse_b: object, *, out: object, lse: object, stream: int = 0
) -> None: ...
def sparse_mla_decode_workspace_size(
    rows: int, heads: int, topk: int, device: tuple[bool, int], *, stream: int = 0
) -> int: ...
def dcp_local_slots(
    indices: object,
    req_id: object,
    block_table: object,
    *,
    world_size: int,
    rank: int,
    block_size: int,
    interleave: int = 1,
    local_slots: object,
    stream: int = 0,
) -> None: ...
def merge_attention_states_stacked(
    outs: object, lses: object, *, out: object, lse: object, stream: int = 0
) -> None: ...
def op_table() -> list:
    """The op table (python/ops/op_table.h), as mlakv.torch registers it"""

class MlaKvCacheWriter:
    def __init__(self, kv_cache_dtype: str, fp8_rope: bool, per_token_scale: bool) -> None: ...
    @property
    def compact(self) -> bool: ...
    def update(
        self,
        kv_c: object,
        kv_c_tag: str | None,
        k_pe: object,
        k_pe_tag: str | None,
        kv_cache: object,
        slot_mapping: object,
        kv_cache_dtype: str,
        scale: object | None,
        stream: int,
    ) -> None: ...
