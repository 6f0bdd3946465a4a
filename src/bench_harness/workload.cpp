#include "bench_harness/workload.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "sim/tokenizer.h"

namespace cgn::bench {
namespace {

constexpr uint64_t kMooncakeSalt = 0x6d6f6f6e63616b65ULL;   // "mooncake"
constexpr uint64_t kSyntheticSalt = 0x7368617265647078ULL;  // "sharedpx"

Error<TraceError> line_error(TraceError code, size_t line, const std::string& what) {
  return make_error(code, "trace line " + std::to_string(line) + ": " + what);
}

// A non-negative integer field of at most `max`.
bool get_uint(const nlohmann::json& obj, const char* key, uint64_t max, uint64_t& out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_unsigned()) {
    return false;
  }
  out = it->get<uint64_t>();
  return out <= max;
}

}  // namespace

void block_text(uint64_t salt, uint64_t id, std::string& out) {
  // 512 three-letter words, each followed by a space (the last by '\n'): one 4-byte piece per
  // word, so the simulator's tokenizer cuts exactly at word boundaries. Five 12-bit word
  // indices per 64-bit PRNG draw keep this cheap: the benchmark builds ~600 MB of prompts
  // per run.
  const size_t start = out.size();
  out.resize(start + kBlockBytes);
  char* p = out.data() + start;
  uint64_t state = sim::mix64(salt ^ sim::mix64(id + 0x9e3779b97f4a7c15ULL));
  uint64_t bits = 0;
  uint32_t left = 0;
  for (uint32_t w = 0; w < kBlockTokens; ++w) {
    if (left == 0) {
      state = sim::mix64(state + 0x9e3779b97f4a7c15ULL);
      bits = state;
      left = 5;
    }
    const auto k = static_cast<uint32_t>(bits & 0xfff);  // < 26^3
    bits >>= 12;
    --left;
    char* q = p + static_cast<size_t>(w) * kBytesPerToken;
    q[0] = static_cast<char>('a' + k % 26);
    q[1] = static_cast<char>('a' + (k / 26) % 26);
    q[2] = static_cast<char>('a' + k / 676);
    q[3] = ' ';
  }
  p[kBlockBytes - 1] = '\n';
}

uint32_t WorkRequest::input_tokens() const {
  uint64_t bytes = 0;
  for (const auto& s : segments) {
    bytes += s.bytes;
  }
  return static_cast<uint32_t>(bytes / kBytesPerToken);
}

void build_prompt(const Workload& w, const WorkRequest& r, std::string& out) {
  out.clear();
  std::string block;
  for (const auto& s : r.segments) {
    block.clear();
    block_text(w.salt, s.block_id, block);
    out.append(block, 0, std::min<size_t>(s.bytes, block.size()));
  }
}

Result<Workload, TraceError> parse_mooncake_trace(std::string_view text, std::string name,
                                                  const TraceLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return make_error(TraceError::kLimit,
                      "trace is larger than " + std::to_string(limits.max_bytes) + " bytes");
  }
  Workload w;
  w.name = std::move(name);
  w.salt = kMooncakeSalt;
  size_t line_no = 0;
  size_t pos = 0;
  Nanos last = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line_no > limits.max_lines) {
      return make_error(TraceError::kLimit,
                        "trace has more than " + std::to_string(limits.max_lines) + " lines");
    }
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) {
      continue;
    }
    if (line.size() > limits.max_line_bytes) {
      return line_error(TraceError::kLimit, line_no,
                        "line longer than " + std::to_string(limits.max_line_bytes));
    }
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return line_error(TraceError::kParse, line_no, "not a JSON object");
    }
    uint64_t ts = 0;
    uint64_t in = 0;
    uint64_t outl = 0;
    if (!get_uint(j, "timestamp", uint64_t{1} << 40, ts)) {
      return line_error(TraceError::kParse, line_no, "timestamp must be a non-negative integer (ms)");
    }
    if (!get_uint(j, "input_length", limits.max_input_tokens, in) || in == 0) {
      return line_error(TraceError::kParse, line_no, "input_length must be an integer in [1, max]");
    }
    if (!get_uint(j, "output_length", limits.max_output_tokens, outl)) {
      return line_error(TraceError::kParse, line_no, "output_length must be an integer in [0, max]");
    }
    auto ids = j.find("hash_ids");
    const uint64_t want_blocks = (in + kBlockTokens - 1) / kBlockTokens;
    if (ids == j.end() || !ids->is_array() || ids->size() != want_blocks) {
      return line_error(TraceError::kParse, line_no,
                        "hash_ids must be an array of ceil(input_length/512) ids");
    }
    WorkRequest r;
    r.arrival = static_cast<Nanos>(ts) * kNanosPerMilli;
    if (r.arrival < last) {
      return line_error(TraceError::kParse, line_no, "timestamps must not decrease");
    }
    last = r.arrival;
    r.output_tokens = static_cast<uint32_t>(std::max<uint64_t>(outl, 1));
    r.segments.reserve(ids->size());
    uint64_t left = in * kBytesPerToken;
    for (const auto& id : *ids) {
      if (!id.is_number_unsigned()) {
        return line_error(TraceError::kParse, line_no, "hash_ids must be non-negative integers");
      }
      const auto bytes = static_cast<uint32_t>(std::min<uint64_t>(left, kBlockBytes));
      r.segments.push_back({id.get<uint64_t>(), bytes});
      left -= bytes;
    }
    r.session_key = std::to_string(r.segments.front().block_id);
    if (r.segments.size() > 1) {
      r.session_key += '-';
      r.session_key += std::to_string(r.segments[1].block_id);
    }
    w.requests.push_back(std::move(r));
  }
  return w;
}

Result<Workload, TraceError> load_mooncake_trace(const std::string& path, const TraceLimits& limits) {
  // gzread passes plain files through unchanged, so one path reads .jsonl and .jsonl.gz alike.
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    return make_error(TraceError::kIo, "cannot open trace " + path);
  }
  std::string text;
  char buf[1 << 16];
  int n = 0;
  // Stop one byte past the limit: parse_mooncake_trace reports it, and a small file that
  // inflates without bound (a gzip bomb) never fills memory.
  while (text.size() <= limits.max_bytes && (n = gzread(f, buf, sizeof buf)) > 0) {
    text.append(buf, static_cast<size_t>(n));
  }
  int zerr = Z_OK;
  const std::string zmsg = n < 0 ? gzerror(f, &zerr) : "";
  gzclose(f);
  if (n < 0) {
    return make_error(TraceError::kIo, "cannot read trace " + path + ": " + zmsg);
  }
  std::string name = path;
  if (auto slash = name.find_last_of('/'); slash != std::string::npos) {
    name = name.substr(slash + 1);
  }
  if (auto dot = name.find('.'); dot != std::string::npos) {
    name = name.substr(0, dot);
  }
  return parse_mooncake_trace(text, std::move(name), limits);
}

Result<SharedPrefixPreset, TraceError> shared_prefix_preset(std::string_view name) {
  SharedPrefixPreset p;
  if (name == "llmd") {
    p.name = "llmd";
    return p;
  }
  if (name == "small") {
    p.name = "small";
    p.tenants = 12;
    p.system_tokens = 3000;
    p.users_per_tenant = 3;
    p.question_tokens = 600;
    p.turns = 3;
    p.output_tokens = 200;
    return p;
  }
  return make_error(TraceError::kParse, "unknown preset '" + std::string(name) + "' (llmd, small)");
}

Workload make_shared_prefix(const SharedPrefixPreset& p, uint64_t seed) {
  Workload w;
  w.name = "shared-prefix-" + p.name;
  w.salt = kSyntheticSalt ^ sim::mix64(seed);
  // Block id spaces: tenant system blocks, then per-user question/answer blocks.
  const uint64_t sys_blocks = (p.system_tokens + kBlockTokens - 1) / kBlockTokens;
  auto add_text = [](std::vector<Segment>& segs, uint64_t first_id, uint32_t tokens) {
    uint64_t bytes = static_cast<uint64_t>(tokens) * kBytesPerToken;
    for (uint64_t id = first_id; bytes > 0; ++id) {
      const auto b = static_cast<uint32_t>(std::min<uint64_t>(bytes, kBlockBytes));
      segs.push_back({id, b});
      bytes -= b;
    }
  };
  const uint64_t msg_blocks = std::max<uint64_t>((p.question_tokens + kBlockTokens - 1) / kBlockTokens,
                                                 (p.output_tokens + kBlockTokens - 1) / kBlockTokens);
  const uint64_t user_base = static_cast<uint64_t>(p.tenants) * sys_blocks;
  const uint32_t users = p.tenants * p.users_per_tenant;
  // conversation[u]: the prompt of u's current turn without the new question.
  std::vector<std::vector<Segment>> history(users);
  for (uint32_t u = 0; u < users; ++u) {
    add_text(history[u], (u / p.users_per_tenant) * sys_blocks, p.system_tokens);
  }
  std::vector<uint32_t> order(users);
  uint64_t rng = sim::mix64(seed ^ 0x5eed);
  double t = 0;
  for (uint32_t turn = 0; turn < p.turns; ++turn) {
    for (uint32_t i = 0; i < users; ++i) {
      order[i] = i;
    }
    for (uint32_t i = users; i > 1; --i) {  // Fisher-Yates with the stable mixer
      rng = sim::mix64(rng + 1);
      std::swap(order[i - 1], order[rng % i]);
    }
    for (uint32_t u : order) {
      // Each user message and answer gets its own ids: 2 * turns messages per user.
      const uint64_t msg_base = user_base + (static_cast<uint64_t>(u) * p.turns * 2 + turn * 2) * msg_blocks;
      WorkRequest r;
      r.segments = history[u];
      add_text(r.segments, msg_base, p.question_tokens);
      r.output_tokens = p.output_tokens;
      r.session_key = fmt::format("t{}-u{}", u / p.users_per_tenant, u % p.users_per_tenant);
      rng = sim::mix64(rng + 1);
      const double uniform = (static_cast<double>(rng >> 11) + 0.5) / 9007199254740992.0;
      t += -std::log(uniform);  // exponential gaps, mean 1 s
      r.arrival = static_cast<Nanos>(t * 1e9);
      // The next turn's prompt: this one plus the answer (as a block of answer text).
      history[u] = r.segments;
      add_text(history[u], msg_base + msg_blocks, p.output_tokens);
      w.requests.push_back(std::move(r));
    }
  }
  return w;
}

Workload take_first(const Workload& w, size_t n) {
  Workload out;
  out.name = w.name;
  out.salt = w.salt;
  const size_t k = (n == 0 || n > w.requests.size()) ? w.requests.size() : n;
  out.requests.assign(w.requests.begin(), w.requests.begin() + static_cast<std::ptrdiff_t>(k));
  return out;
}

Result<SessionHalf, TraceError> parse_session_half(std::string_view name) {
  if (name == "all") {
    return SessionHalf::kAll;
  }
  if (name == "even") {
    return SessionHalf::kEven;
  }
  if (name == "odd") {
    return SessionHalf::kOdd;
  }
  return make_error(TraceError::kParse, fmt::format("unknown session half '{}' (all | even | odd)", name));
}

Workload session_half(const Workload& w, SessionHalf half) {
  if (half == SessionHalf::kAll) {
    return w;
  }
  const size_t keep = half == SessionHalf::kEven ? 0 : 1;
  Workload out;
  out.name = w.name + (half == SessionHalf::kEven ? " (even sessions)" : " (odd sessions)");
  out.salt = w.salt;
  std::unordered_map<std::string, size_t> number;  // session_key -> order of first appearance
  for (const WorkRequest& r : w.requests) {
    const auto [it, added] = number.try_emplace(r.session_key, number.size());
    if (it->second % 2 == keep) {
      out.requests.push_back(r);
    }
  }
  return out;
}

}  // namespace cgn::bench

namespace cgn::bench {
std::string trace_dir() {
  if (const char* env = std::getenv("CGN_TRACE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return CGN_DEFAULT_TRACE_DIR;
}

std::string trace_path(std::string_view name) {
  return trace_dir() + "/" + std::string(name) + "_trace.jsonl.gz";
}
}  // namespace cgn::bench
