from typing import Annotated

from numpy.typing import NDArray

def concat_and_cache_mla(
    kv_c: Annotated[NDArray, dict(writable=False)],
    kv_c_tag: str | None,
    k_pe: Annotated[NDArray, dict(writable=False)],
    k_pe_tag: str | None,
    kv_cache: NDArray,
    slot_mapping: Annotated[NDArray, dict(writable=False)],
    kv_cache_dtype: str,
    scale: Annotated[NDArray, dict(writable=False)] | None,
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
) -> None: ...
def gather_records(
    format: str,
    kv_cache: Annotated[NDArray, dict(writable=False)],
    slots: Annotated[NDArray, dict(writable=False)],
    kv_c_out: NDArray,
    k_pe_out: NDArray,
    scale: Annotated[NDArray, dict(writable=False)] | None,
    rope_dtype: str,
) -> None: ...
def formats() -> list: ...
def capabilities() -> list: ...
