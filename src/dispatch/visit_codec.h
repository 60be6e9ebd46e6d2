// SPDX-License-Identifier: Apache-2.0
// Maps a runtime Format to its codec type: the one dispatch point that the CPU
// loops and the CUDA launchers share. It sits above the codecs (which know no
// Format) and the registry, and below the backends; its names stay in
// mlakv::codec because what they select is a codec.
#pragma once

#include <type_traits>

#include "codec/fp8_ds_mla.h"
#include "codec/fp8_ds_mla_v4.h"
#include "codec/fp8_ds_mla_v41.h"
#include "codec/fp8_e4m3.h"
#include "codec/nvfp4_ds_mla.h"
#include "codec/nvfp4_ds_mla_fp8_rope.h"
#include "codec/nvfp4_ds_mla_fp8_rope_pts.h"
#include "codec/nvfp4_ds_mla_v41.h"
#include "codec/nvfp4_fp8_ds_mla.h"
#include "codec/raw16.h"
#include "mlakv/formats.h"
#include "mlakv/vocabulary.h"

namespace mlakv::codec {

template <class T>
struct Tag {
  using type = T;
};

/// Whether `format` stores DeepSeek V4's token (448 NoPE + 64 RoPE values,
/// block-planar or token-major): its codec writes a data row and a scale row
/// (codec/v4_lanes.h) and is reached through visit_part_codec, never visit_codec.
inline bool is_part_coded(Format format) { return format_info(format).geometry.nope_dims != format::kLatentDim; }

/// Calls fn(Tag<Codec>{}) for the codec of a 512 + 64 `format` (callers
/// dispatch the DeepSeek V4 family with visit_part_codec first).
template <class Fn>
decltype(auto) visit_codec(Format format, Fn&& fn) {
  switch (format) {
    case Format::kBf16:
      return fn(Tag<CodecBf16>{});
    case Format::kFp16:
      return fn(Tag<CodecFp16>{});
    case Format::kFp8E4m3:
      return fn(Tag<CodecFp8E4m3>{});
    case Format::kFp8DsMla:
      return fn(Tag<CodecFp8DsMla>{});
    case Format::kNvfp4DsMla:
      return fn(Tag<CodecNvfp4DsMla>{});
    case Format::kNvfp4DsMlaFp8Rope:
      return fn(Tag<CodecNvfp4DsMlaFp8Rope>{});
    case Format::kNvfp4DsMlaFp8RopePts:
      return fn(Tag<CodecNvfp4DsMlaFp8RopePts>{});
    case Format::kNvfp4Fp8DsMla:
      return fn(Tag<CodecNvfp4Fp8DsMla>{});
    case Format::kFp8DsMlaV4:
    case Format::kFp8DsMlaV41:
    case Format::kNvfp4DsMlaV41:
    case Format::kFp8DsMlaV41Planar:
    case Format::kNvfp4DsMlaV41Planar:
      break;  // the DeepSeek V4 family: visit_part_codec
  }
  return fn(Tag<CodecBf16>{});  // unreachable: every token-major enumerator is handled above
}

/// Calls fn(Tag<Codec>{}) for the codec of a DeepSeek V4 family `format`,
/// which writes and reads a token's data row and scale row (Codec::kDataRow,
/// Codec::kScaleRow: their region and offset in the page) in 32 lanes of 16
/// values each (codec/v4_lanes.h), or whole (encode_token, decode_token).
template <class Fn>
decltype(auto) visit_part_codec(Format format, Fn&& fn) {
  if (format == Format::kFp8DsMlaV41) return fn(Tag<CodecFp8DsMlaV41>{});
  if (format == Format::kNvfp4DsMlaV41) return fn(Tag<CodecNvfp4DsMlaV41>{});
  if (format == Format::kFp8DsMlaV41Planar) return fn(Tag<CodecFp8DsMlaV41Planar>{});
  if (format == Format::kNvfp4DsMlaV41Planar) return fn(Tag<CodecNvfp4DsMlaV41Planar>{});
  return fn(Tag<CodecFp8DsMlaV4>{});
}

/// Calls fn(std::integral_constant<InputDtype, D>{}) for a runtime input dtype.
template <class Fn>
decltype(auto) visit_input_dtype(InputDtype dtype, Fn&& fn) {
  if (dtype == InputDtype::kBf16) return fn(std::integral_constant<InputDtype, InputDtype::kBf16>{});
  return fn(std::integral_constant<InputDtype, InputDtype::kFp16>{});
}

/// The input dtype a codec requires, if any (the 16-bit records copy bits).
template <class Codec>
constexpr bool accepts_input(InputDtype dtype) {
  if constexpr (requires { Codec::kElementDtype; }) {
    return dtype == Codec::kElementDtype;
  } else {
    return true;
  }
}

}  // namespace mlakv::codec
