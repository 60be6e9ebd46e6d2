// SPDX-License-Identifier: Apache-2.0
// The readers' run functions: gather_records (two outputs), gather_records_out
// (the caller's [N, nope + rope] prefill buffer) and gather_records_paged.
#include "mlakv/readers.h"

#include <string>

#include "gather_options.h"
#include "mlakv/checks.h"
#include "mlakv/error.h"
#include "mlakv/formats.h"
#include "run_functions.h"

namespace mlakv::bindings {
namespace {

// The latent and RoPE widths of `format`; an unknown id gets 512 and 64 and is refused by the library call.
TokenGeometry widths(std::string_view format) {
  for (const FormatInfo& info : formats()) {
    if (info.id == format) return info.geometry;
  }
  return {kLatentDim, kRopeDim, false};
}

// Columns [start, start + width) of a 2-D view: the prefill layout's latent and RoPE parts.
TensorView columns(TensorView v, std::int64_t start, std::int64_t width) {
  v.data = static_cast<char*>(v.data) + start * v.strides[1] * dtype_size(v.dtype);
  v.shape[1] = width;
  return v;
}

// "(7, 576)", "(7,)": Python's str(tuple(shape)), as the torch ops' messages print it.
std::string shape_text(const TensorView& v) {
  std::string text = "(";
  for (int d = 0; d < v.ndim; ++d) text += (d > 0 ? ", " : "") + std::to_string(v.shape[d]);
  return text + (v.ndim == 1 ? ",)" : ")");
}

void gather(const OpCall& c, const TensorView& kv_c, const TensorView& k_pe) {
  const Format format = parse_format(c.text("format"));
  const TensorView &cache = c.tensor("kv_cache"), &slots = c.tensor("slots");
  if (!c.run()) return check_gather_records(format, cache, slots, kv_c, k_pe, gather_options(c));
  gather_records(format, cache, slots, kv_c, k_pe, gather_options(c), c.stream());
}

}  // namespace

std::int64_t run_gather_records(const OpCall& c) {
  gather(c, c.output(0), c.output(1));
  return 0;
}

std::int64_t run_gather_records_out(const OpCall& c) {
  const TokenGeometry geometry = widths(c.text("format"));
  const TensorView &out = c.tensor("out"), &slots = c.tensor("slots");
  const std::int64_t width = geometry.nope_dims + geometry.rope_dims, rows = slots.ndim >= 1 ? slots.shape[0] : 0;
  if (out.ndim != 2 || out.shape[1] != width || out.shape[0] != rows) {
    throw Error(ErrorCode::kValue, "mlakv::gather_records(" + std::string(c.text("format")) +
                                       "): out: shape must be (N, " + std::to_string(width) +
                                       ") with N = len(slots) = " + std::to_string(rows) + ", got " + shape_text(out));
  }
  gather(c, columns(out, 0, geometry.nope_dims), columns(out, geometry.nope_dims, geometry.rope_dims));
  return 0;
}

std::int64_t run_gather_records_paged(const OpCall& c) {
  const Format format = parse_format(c.text("format"));
  const TokenGeometry geometry = format_info(format).geometry;
  const TensorView& out = c.output(0);
  const TensorView kv_c = columns(out, 0, geometry.nope_dims);
  const TensorView k_pe = columns(out, geometry.nope_dims, geometry.rope_dims);
  const TensorView &cache = c.tensor("kv_cache"), &table = c.tensor("block_table");
  const TensorView &lens = c.tensor("seq_lens"), &cu = c.tensor("cu_seq_lens");
  if (!c.run()) {
    check_gather_records_paged(format, cache, table, lens, cu, kv_c, k_pe, gather_options(c));
  } else {
    gather_records_paged(format, cache, table, lens, cu, kv_c, k_pe, gather_options(c), c.stream());
  }
  return 0;
}

}  // namespace mlakv::bindings
