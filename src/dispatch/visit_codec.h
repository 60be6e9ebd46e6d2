// SPDX-License-Identifier: Apache-2.0
// Maps a runtime Format to its codec type: the one dispatch point that the CPU
// loops and the CUDA launchers share. One switch over the format ids of
// mlakv/vocabulary.h (not the registry) lists each one's codec: an id it
// does not list fails to compile (every_format_listed). It sits
// above the codecs (which know no Format) and below the backends; its names
// stay in mlakv::codec because what they select is a codec.
#pragma once

#include <cstdlib>
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
#include "mlakv/vocabulary.h"

namespace mlakv::codec {

template <class T>
struct Tag {
  using type = T;
};

/// Whether Codec writes and reads DeepSeek V4's token (448 NoPE + 64 RoPE
/// values, block-planar or token-major) as a data row and a scale row in 32
/// lanes of 16 values (codec/v4_lanes.h).
template <class Codec>
inline constexpr bool kPartCodec = requires {
  Codec::kScaleRow;
  Codec::kTileLanes;
};

/// Calls fn(Tag<Codec>{}) for the codec of any `format`: the one switch over
/// the format ids (every_format_listed checks that it lists each one).
template <class Fn>
constexpr decltype(auto) visit_format_codec(Format format, Fn&& fn) {
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
      return fn(Tag<CodecFp8DsMlaV4>{});
    case Format::kFp8DsMlaV41:
      return fn(Tag<CodecFp8DsMlaV41>{});
    case Format::kNvfp4DsMlaV41:
      return fn(Tag<CodecNvfp4DsMlaV41>{});
    case Format::kFp8DsMlaV41Planar:
      return fn(Tag<CodecFp8DsMlaV41Planar>{});
    case Format::kNvfp4DsMlaV41Planar:
      return fn(Tag<CodecNvfp4DsMlaV41Planar>{});
  }
  std::abort();  // a value no format id names: not a constant expression (every_format_listed)
}

/// Whether `format` stores DeepSeek V4's token: its codec is reached through
/// visit_part_codec, never visit_codec.
constexpr bool is_part_coded(Format format) {
  return visit_format_codec(format, []<class Codec>(Tag<Codec>) { return kPartCodec<Codec>; });
}

/// Calls fn(Tag<Codec>{}) for the codec of a 512 + 64 `format` (callers
/// dispatch the DeepSeek V4 family with visit_part_codec first: a part-coded
/// format here is a caller's error, and aborts).
template <class Fn>
constexpr decltype(auto) visit_codec(Format format, Fn&& fn) {
  using Result = decltype(fn(Tag<CodecBf16>{}));
  return visit_format_codec(format, [&]<class Codec>(Tag<Codec> tag) -> Result {
    if constexpr (kPartCodec<Codec>) {
      std::abort();
    } else {
      return fn(tag);
    }
  });
}

/// Calls fn(Tag<Codec>{}) for the codec of a DeepSeek V4 family `format`,
/// which writes and reads a token's data row and scale row (Codec::kDataRow,
/// Codec::kScaleRow: their region and offset in the page) in 32 lanes of 16
/// values each (codec/v4_lanes.h), or whole (encode_token, decode_token).
/// A 512 + 64 format here is a caller's error, and aborts.
template <class Fn>
constexpr decltype(auto) visit_part_codec(Format format, Fn&& fn) {
  using Result = decltype(fn(Tag<CodecFp8DsMlaV4>{}));
  return visit_format_codec(format, [&]<class Codec>(Tag<Codec> tag) -> Result {
    if constexpr (kPartCodec<Codec>) {
      return fn(tag);
    } else {
      std::abort();
    }
  });
}

/// The format ids: vocabulary.h's record_bytes sizes each one and gives 0
/// past the last (the enumerators run from 0 without gaps).
constexpr int format_id_count() {
  int count = 0;
  while (record_bytes(static_cast<Format>(count)) != 0) ++count;
  return count;
}

/// Every format id reaches a codec of its record size: a constant
/// expression only if visit_format_codec lists each id (an unlisted one
/// reaches std::abort, which is not).
constexpr bool every_format_listed() {
  for (int id = 0; id < format_id_count(); ++id) {
    const Format format = static_cast<Format>(id);
    const int bytes = visit_format_codec(format, []<class Codec>(Tag<Codec>) { return Codec::Spec::kRecordBytes; });
    if (bytes != record_bytes(format)) return false;
  }
  return true;
}
static_assert(every_format_listed(), "a format id of mlakv/vocabulary.h without its codec here, or with another's");

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
