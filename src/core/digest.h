// Sequence-chained BLAKE3 prefix digests (docs/design/principles.md, prefix digests), the routing signal
// shared by router, agent, kvcached, cgn-infer, the simulator and the
// benchmark client. The exact construction and byte layout, with test
// vectors, is in docs/architecture/digests.md; in short:
//
//   seed      = BLAKE3-derive_key(kDigestSeedContext, TLV(format_version, model, BLAKE3(tools)))
//   leaf_i    = BLAKE3(block_i)                      (SIMD many-inputs path, one chunk each)
//   digest_i  = BLAKE3-keyed(key = digest_{i-1}, leaf_i)   (exactly one compression)
//   digest_-1 = seed
//
// Everything here is a pure function of its arguments: no process state, no
// salt, so two processes on two machines produce identical digests. All
// functions are thread-safe (BLAKE3's CPU-feature cache is a benign race).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/digest_types.h"

namespace cgn {

// Context string of the seed's derive_key. Changing it changes every digest.
inline constexpr std::string_view kDigestSeedContext = "cognitora 2026-11 prefix digest seed v1";

// The current canonical byte layout and construction version.
inline constexpr uint32_t kDigestFormatVersion = 1;

inline constexpr uint32_t kDefaultBlockBytes = 256;

// The explicit fields a digest chain starts from. Two requests can share
// cached KV only if all of these are equal.
struct DigestSeedFields {
  uint32_t format_version = kDigestFormatVersion;
  std::string_view model;
  // Canonical JSON of the request's `tools` array (ParsedRequest::canonical_tools);
  // empty = the request has no tools.
  std::string_view canonical_tools;
};

Digest make_digest_seed(const DigestSeedFields& fields);

// The key material make_digest_seed derives the seed from (TLV-encoded
// fields, docs/architecture/digests.md "Seed"); for docs, tools and tests.
std::string digest_seed_material(const DigestSeedFields& fields);

// block_bytes must be a multiple of 64 (one BLAKE3 block) in [64, 1024] (one chunk).
bool valid_block_bytes(uint32_t block_bytes);

// Appends to `out` one digest per FULL block of `canonical`; a partial tail
// block is ignored. Stops after `max_digests` digests (counted from the start
// of `canonical`, not including what `out` already held). Requires
// valid_block_bytes(block_bytes); otherwise appends nothing.
//
// Chaining makes the function resumable: passing the last digest as `seed`
// and the bytes from the next block boundary on gives the same digests as one
// call over the whole input (used for post-generation digests).
void compute_prefix_digests(const Digest& seed, std::string_view canonical, uint32_t block_bytes,
                            std::vector<Digest>& out, size_t max_digests = 4096);

// The same as compute_prefix_digests but one plain BLAKE3 call per block and
// one keyed BLAKE3 call per link: the slow, obviously-correct reference the
// fast path is tested against.
void compute_prefix_digests_reference(const Digest& seed, std::string_view canonical, uint32_t block_bytes,
                                      std::vector<Digest>& out, size_t max_digests = 4096);

// The SIMD implementation BLAKE3's many-inputs path dispatches to on this CPU
// ("avx512", "avx2", "sse41", "sse2", "neon" or "portable").
const char* blake3_simd_level();

// Plain BLAKE3 helpers (32-byte output), used by the seed and by tests.
Digest blake3_hash(std::string_view data);
Digest blake3_keyed_hash(const Digest& key, std::string_view data);
Digest blake3_derive_key(std::string_view context, std::string_view material);

}  // namespace cgn
