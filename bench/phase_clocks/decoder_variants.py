"""Measurement builds of the wide-tile decoders (wrong results, timing only; never commit the patched source).

Run in the repository root, build mlakv_gpu_bench, copy it, then `git checkout src/cuda`.
  local_only:  crossover blocks skip the remote (st.async) stores; each block's keys_full expects 0 bytes from its peer.
  no_convert:  NVFP4 latent groups are stored as their raw code words (loaded, not converted); stores unchanged.
"""

import sys

from source_patch import SourcePatch

mode = sys.argv[1]
f = "src/cuda/sparse_mla_decode_wide_tiles.cuh"
patch = SourcePatch(f)
if mode == "local_only":
    patch.rep("      cluster::store_async(peer.keys + at[0], low, peer.full);\n", "")
    patch.rep("      cluster::store_async(peer.keys + at[1], high, peer.full);\n", "")
    patch.rep("  if constexpr (kCrossover) cluster::store_async(peer.keys + rope_at, pairs, peer.full);\n", "")
    patch.rep("      if constexpr (kCrossover) cluster::store_async(to_peer.valid + d.first + 4 * lane, word, to_peer.full);\n", "")
    patch.rep("static_cast<std::uint32_t>(d.count * (kKeyRowBytes + 1))", "0u")
elif mode == "no_convert":
    patch.rep(
        "      decode_latent_fragment<Codec>(group, record, latent);\n",
        "      {\n"
        "        const uint2 codes = *reinterpret_cast<const uint2*>(codec::group_codes(record, group));\n"
        "        const std::uint32_t sbyte = Codec::latent_scale_byte(group, record);\n"
        "#pragma unroll\n"
        "        for (int k = 0; k < 8; ++k) latent[k] = (k % 2 == 0 ? codes.x : codes.y) ^ sbyte;\n"
        "      }\n",
    )
else:
    sys.exit(f"unknown mode {mode}")
patch.write()
