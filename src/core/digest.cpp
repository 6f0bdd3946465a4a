#include "core/digest.h"

#include <algorithm>
#include <cstring>

#include "core/tlv.h"

// The internal BLAKE3 API (blake3_hash_many, blake3_compress_in_place, the
// flag names) is C without extern "C"; the standard headers it includes are
// pulled in first so that only its own declarations get C linkage.
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "blake3.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
extern "C" {
#include "blake3_impl.h"
}

namespace cgn {
namespace {

// Leaves are hashed this many at a time: enough to fill the widest SIMD path
// (16 lanes) several times over while staying in a few KiB of stack.
constexpr size_t kLeafBatch = 64;

// Seed TLV tags (docs/architecture/digests.md, "Seed"). Fields are written in
// ascending tag order; optional fields are omitted when empty so that adding
// a field later (tenant, LoRA) does not change existing digests.
constexpr uint8_t kTagFormatVersion = 0x01;
constexpr uint8_t kTagModel = 0x02;
constexpr uint8_t kTagToolsHash = 0x03;

using tlv::append_field;
using tlv::append_u32_le;

std::string_view as_view(const Digest& d) {
  return std::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace

bool valid_block_bytes(uint32_t block_bytes) {
  return block_bytes >= BLAKE3_BLOCK_LEN && block_bytes <= BLAKE3_CHUNK_LEN &&
         block_bytes % BLAKE3_BLOCK_LEN == 0;
}

std::string digest_seed_material(const DigestSeedFields& fields) {
  std::string material;
  material.reserve(64 + fields.model.size());
  std::string version;
  append_u32_le(version, fields.format_version);
  append_field(material, kTagFormatVersion, version);
  append_field(material, kTagModel, fields.model);
  if (!fields.canonical_tools.empty()) {
    const Digest tools_hash = blake3_hash(fields.canonical_tools);
    append_field(material, kTagToolsHash, as_view(tools_hash));
  }
  return material;
}

Digest make_digest_seed(const DigestSeedFields& fields) {
  return blake3_derive_key(kDigestSeedContext, digest_seed_material(fields));
}

void compute_prefix_digests(const Digest& seed, std::string_view canonical, uint32_t block_bytes,
                            std::vector<Digest>& out, size_t max_digests) {
  if (!valid_block_bytes(block_bytes)) {
    return;
  }
  const size_t count = std::min(canonical.size() / block_bytes, max_digests);
  if (count == 0) {
    return;
  }
  const size_t base = out.size();
  out.resize(base + count);
  const auto* data = reinterpret_cast<const uint8_t*>(canonical.data());
  const size_t blocks_per_leaf = block_bytes / BLAKE3_BLOCK_LEN;

  // The chaining value of a keyed hash starts as the key's words; after the
  // single ROOT compression it holds the output, which is the next key. So
  // the chain lives in `cv` and is only stored, never reloaded.
  uint32_t cv[8];
  load_key_words(seed.data(), cv);

  const uint8_t* inputs[kLeafBatch];
  alignas(64) uint8_t leaves[kLeafBatch * BLAKE3_OUT_LEN];
  alignas(64) uint8_t link_block[BLAKE3_BLOCK_LEN] = {};
  constexpr uint8_t kLinkFlags = KEYED_HASH | CHUNK_START | CHUNK_END | ROOT;

  for (size_t first = 0; first < count; first += kLeafBatch) {
    const size_t n = std::min(kLeafBatch, count - first);
    for (size_t j = 0; j < n; ++j) {
      inputs[j] = data + (first + j) * block_bytes;
    }
    // Each leaf is at most one chunk, so it is the plain BLAKE3 hash of its
    // block: IV key, chunk counter 0, CHUNK_START on the first block and
    // CHUNK_END|ROOT on the last.
    blake3_hash_many(inputs, n, blocks_per_leaf, IV, /*counter=*/0, /*increment_counter=*/false,
                     /*flags=*/0, /*flags_start=*/CHUNK_START, /*flags_end=*/CHUNK_END | ROOT, leaves);
    for (size_t j = 0; j < n; ++j) {
      std::memcpy(link_block, leaves + j * BLAKE3_OUT_LEN, BLAKE3_OUT_LEN);
      blake3_compress_in_place(cv, link_block, BLAKE3_OUT_LEN, /*counter=*/0, kLinkFlags);
      store_cv_words(out[base + first + j].data(), cv);
    }
  }
}

void compute_prefix_digests_reference(const Digest& seed, std::string_view canonical, uint32_t block_bytes,
                                      std::vector<Digest>& out, size_t max_digests) {
  if (!valid_block_bytes(block_bytes)) {
    return;
  }
  const size_t count = std::min(canonical.size() / block_bytes, max_digests);
  Digest prev = seed;
  for (size_t i = 0; i < count; ++i) {
    const Digest leaf = blake3_hash(canonical.substr(i * block_bytes, block_bytes));
    prev = blake3_keyed_hash(prev, as_view(leaf));
    out.push_back(prev);
  }
}

const char* blake3_simd_level() {
  // Mirrors the order of blake3_hash_many in blake3_dispatch.c.
#if defined(__x86_64__) || defined(__i386__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) {
    return "avx512";
  }
  if (__builtin_cpu_supports("avx2")) {
    return "avx2";
  }
  if (__builtin_cpu_supports("sse4.1")) {
    return "sse41";
  }
  if (__builtin_cpu_supports("sse2")) {
    return "sse2";
  }
  return "portable";
#elif BLAKE3_USE_NEON == 1
  return "neon";
#else
  return "portable";
#endif
}

Digest blake3_hash(std::string_view data) {
  blake3_hasher h;
  blake3_hasher_init(&h);
  blake3_hasher_update(&h, data.data(), data.size());
  Digest d;
  blake3_hasher_finalize(&h, d.data(), d.size());
  return d;
}

Digest blake3_keyed_hash(const Digest& key, std::string_view data) {
  blake3_hasher h;
  blake3_hasher_init_keyed(&h, key.data());
  blake3_hasher_update(&h, data.data(), data.size());
  Digest d;
  blake3_hasher_finalize(&h, d.data(), d.size());
  return d;
}

Digest blake3_derive_key(std::string_view context, std::string_view material) {
  blake3_hasher h;
  blake3_hasher_init_derive_key_raw(&h, context.data(), context.size());
  blake3_hasher_update(&h, material.data(), material.size());
  Digest d;
  blake3_hasher_finalize(&h, d.data(), d.size());
  return d;
}

}  // namespace cgn
