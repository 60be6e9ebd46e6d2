# SPDX-License-Identifier: Apache-2.0
"""The op table (python/ops/op_table.h) drives the module's functions: each entry is a function
mlakv._mlakv.<op> and a raw entry point mlakv._mlakv.raw.<op> taking the schema's arguments, then
the outputs by name and the stream (torch's registrations from the same table: test_torch_ops.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mlakv import _mlakv

TABLE = _mlakv.op_table()


def schema_names(schema: str) -> list[str]:
    """The argument names of a torch schema's text."""
    inside = schema[schema.index("(") + 1 : schema.rindex(") ->")]
    return [item.split("=")[0].split()[-1] for item in inside.split(", ") if item != "*"]


def test_the_table_has_every_public_operation_once():
    names = [op["name"] for op in TABLE]
    assert len(names) == len(set(names)) == 12
    assert {"concat_and_cache_mla", "gather_records", "sparse_mla_decode", "merge_attention_states"} <= set(names)


@pytest.mark.parametrize("op", TABLE, ids=lambda op: op["name"])
def test_each_entry_is_a_function_and_a_raw_entry_point_with_the_schemas_arguments(op):
    want = schema_names(op["schema"]) + [o["name"] for o in op["outputs"]] + ["stream"]
    for module, extra in ((_mlakv, []), (_mlakv.raw, ["run"])):
        function = getattr(module, op["name"])
        signature = function.__nb_signature__[0][0]
        assert re.findall(r"(\w+): ", signature[signature.index("(") :]) == want + extra, signature


def test_a_call_binds_by_position_and_keyword_and_names_what_it_cannot_bind():
    out, lse = np.zeros((1, 2, 4), np.float32), np.zeros((1, 2), np.float32)
    a, la = np.ones((1, 2, 4), np.float32), np.zeros((1, 2), np.float32)
    _mlakv.merge_attention_states(a, la, a, lse_b=la, out=out, lse=lse)
    np.testing.assert_array_equal(out, a)
    np.testing.assert_allclose(lse, np.log(2), rtol=1e-6)
    with pytest.raises(TypeError, match=r"merge_attention_states\(\): unexpected keyword argument 'outs'"):
        _mlakv.merge_attention_states(a, la, a, la, outs=out, lse=lse)
    with pytest.raises(TypeError, match=r"merge_attention_states\(\): missing output 'lse'"):
        _mlakv.merge_attention_states(a, la, a, la, out=out)
    with pytest.raises(TypeError, match=r"merge_attention_states\(\): missing argument 'lse_b'"):
        _mlakv.merge_attention_states(a, la, a, out=out, lse=lse)
    with pytest.raises(TypeError, match=r"merge_attention_states\(\): takes 4 positional arguments"):
        _mlakv.merge_attention_states(a, la, a, la, out, out=out, lse=lse)


def test_an_op_returning_an_int_returns_it():
    assert _mlakv.sparse_mla_decode_workspace_size(4, 16, 2048, (False, 0)) == 0
    with pytest.raises(ValueError, match=r"^mlakv::sparse_mla_decode_workspace_size: topk: must be in \[0, 2\^31\)"):
        _mlakv.sparse_mla_decode_workspace_size(4, 16, -1, (False, 0))
