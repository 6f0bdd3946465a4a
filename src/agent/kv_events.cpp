#include "agent/kv_events.h"

#include <bit>
#include <cstring>
#include <string>

namespace cgn::agent {

namespace {

using Err = Error<KvDecodeError>;

enum class Type : uint8_t { kNil, kBool, kUint, kInt, kFloat, kStr, kBin, kArray, kMap, kExt };

// One msgpack value's header: its type, and a scalar value or a length / element count.
struct Head {
  Type type = Type::kNil;
  uint64_t u = 0;  // kUint; kInt (as two's complement); kBool; str/bin/ext length; array/map count
  double f = 0;    // kFloat
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : p_(b.data()), end_(b.data() + b.size()) {}

  size_t left() const { return static_cast<size_t>(end_ - p_); }
  bool at_end() const { return p_ == end_; }

  // Reads one header; for str/bin/ext the payload is not consumed (see skip_payload / bytes).
  bool head(Head& h) {
    uint8_t c = 0;
    if (!u8(c)) {
      return false;
    }
    if (c <= 0x7f) {
      h = {Type::kUint, c, 0};
      return true;
    }
    if (c >= 0xe0) {
      h = {Type::kInt, static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(c))), 0};
      return true;
    }
    if ((c & 0xf0) == 0x80) {
      h = {Type::kMap, c & 0x0fu, 0};
      return true;
    }
    if ((c & 0xf0) == 0x90) {
      h = {Type::kArray, c & 0x0fu, 0};
      return true;
    }
    if ((c & 0xe0) == 0xa0) {
      h = {Type::kStr, c & 0x1fu, 0};
      return true;
    }
    uint64_t v = 0;
    switch (c) {
      case 0xc0:
        h = {Type::kNil, 0, 0};
        return true;
      case 0xc2:
      case 0xc3:
        h = {Type::kBool, c == 0xc3 ? 1u : 0u, 0};
        return true;
      case 0xc4:
      case 0xc5:
      case 0xc6:
        h.type = Type::kBin;
        return be(size_t{1} << (c - 0xc4), h.u);
      case 0xc7:
      case 0xc8:
      case 0xc9:
        h.type = Type::kExt;
        return be(size_t{1} << (c - 0xc7), h.u) && skip_bytes(1);  // the ext type byte
      case 0xca: {
        h.type = Type::kFloat;
        if (!be(4, v)) {
          return false;
        }
        h.f = static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(v)));
        return true;
      }
      case 0xcb:
        h.type = Type::kFloat;
        if (!be(8, v)) {
          return false;
        }
        h.f = std::bit_cast<double>(v);
        return true;
      case 0xcc:
      case 0xcd:
      case 0xce:
      case 0xcf:
        h.type = Type::kUint;
        return be(size_t{1} << (c - 0xcc), h.u);
      case 0xd0:
      case 0xd1:
      case 0xd2:
      case 0xd3: {
        const size_t n = size_t{1} << (c - 0xd0);
        if (!be(n, v)) {
          return false;
        }
        // Sign-extend from n bytes.
        const unsigned shift = static_cast<unsigned>(64 - 8 * n);
        h = {Type::kInt, static_cast<uint64_t>(static_cast<int64_t>(v << shift) >> shift), 0};
        return true;
      }
      case 0xd4:
      case 0xd5:
      case 0xd6:
      case 0xd7:
      case 0xd8:
        h = {Type::kExt, size_t{1} << (c - 0xd4), 0};
        return skip_bytes(1);
      case 0xd9:
      case 0xda:
      case 0xdb:
        h.type = Type::kStr;
        return be(size_t{1} << (c - 0xd9), h.u);
      case 0xdc:
      case 0xdd:
        h.type = Type::kArray;
        return be(c == 0xdc ? 2 : 4, h.u);
      case 0xde:
      case 0xdf:
        h.type = Type::kMap;
        return be(c == 0xde ? 2 : 4, h.u);
      default:
        return false;  // 0xc1: never used
    }
  }

  // The payload of a str/bin/ext whose header was just read.
  bool bytes(const Head& h, std::string_view& out) {
    if (h.u > left()) {
      return false;
    }
    out = std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(h.u));
    p_ += h.u;
    return true;
  }

  // Skips one whole value (header included), iteratively: `pending` counts values still to
  // skip and can never exceed the bytes left (each value takes at least one byte).
  bool skip_value() {
    uint64_t pending = 1;
    while (pending > 0) {
      if (pending > left()) {
        return false;
      }
      --pending;
      Head h;
      if (!head(h) || !skip_children(h, pending)) {
        return false;
      }
    }
    return true;
  }

 private:
  bool skip_children(const Head& h, uint64_t& pending) {
    switch (h.type) {
      case Type::kStr:
      case Type::kBin:
      case Type::kExt:
        return skip_bytes(h.u);
      case Type::kArray:
        pending += h.u;
        return true;
      case Type::kMap:
        pending += 2 * h.u;
        return true;
      default:
        return true;
    }
  }
  bool u8(uint8_t& c) {
    if (p_ == end_) {
      return false;
    }
    c = *p_++;
    return true;
  }
  bool be(size_t n, uint64_t& v) {
    if (n > left()) {
      return false;
    }
    v = 0;
    for (size_t i = 0; i < n; ++i) {
      v = (v << 8) | *p_++;
    }
    return true;
  }
  bool skip_bytes(uint64_t n) {
    if (n > left()) {
      return false;
    }
    p_ += n;
    return true;
  }

  const uint8_t* p_;
  const uint8_t* end_;
};

Err truncated() {
  return make_error(KvDecodeError::kTruncated, "KV event batch: truncated msgpack");
}
Err bad_type(std::string_view what) {
  return make_error(KvDecodeError::kBadType, "KV event batch: " + std::string(what));
}
Err bad_shape(std::string_view what) {
  return make_error(KvDecodeError::kBadShape, "KV event batch: " + std::string(what));
}

// A container header whose count the remaining bytes can hold.
Result<uint64_t, KvDecodeError> container(Reader& r, Type want, std::string_view what) {
  Head h;
  if (!r.head(h)) {
    return truncated();
  }
  if (h.type != want) {
    return bad_type(std::string(what) + (want == Type::kArray ? " is not an array" : " is not a map"));
  }
  if (h.u > r.left()) {
    return bad_shape(std::string(what) + ": more elements than bytes");
  }
  return h.u;
}

Result<uint64_t, KvDecodeError> read_hash(Reader& r) {
  Head h;
  if (!r.head(h)) {
    return truncated();
  }
  switch (h.type) {
    case Type::kUint:
    case Type::kInt:
      return h.u;
    case Type::kStr:
    case Type::kBin: {
      std::string_view b;
      if (!r.bytes(h, b)) {
        return truncated();
      }
      uint64_t v = 0;  // the low 64 bits, big-endian (vLLM's int form)
      const size_t from = b.size() > 8 ? b.size() - 8 : 0;
      for (size_t i = from; i < b.size(); ++i) {
        v = (v << 8) | static_cast<uint8_t>(b[i]);
      }
      return v;
    }
    default:
      return bad_type("a block hash is not an integer or bytes");
  }
}

Result<Ok, KvDecodeError> read_hashes(Reader& r, std::vector<uint64_t>& out) {
  auto n = container(r, Type::kArray, "block_hashes");
  if (!n) {
    return n.error();
  }
  out.reserve(static_cast<size_t>(*n));
  for (uint64_t i = 0; i < *n; ++i) {
    auto h = read_hash(r);
    if (!h) {
      return h.error();
    }
    out.push_back(*h);
  }
  return Ok{};
}

Result<std::optional<uint64_t>, KvDecodeError> read_parent(Reader& r) {
  Reader probe = r;
  Head h;
  if (!probe.head(h)) {
    return truncated();
  }
  if (h.type == Type::kNil) {
    r = probe;
    return std::optional<uint64_t>();
  }
  auto v = read_hash(r);
  if (!v) {
    return v.error();
  }
  return std::optional<uint64_t>(*v);
}

Result<uint64_t, KvDecodeError> read_uint(Reader& r, std::string_view what) {
  Head h;
  if (!r.head(h)) {
    return truncated();
  }
  if (h.type == Type::kNil) {
    return uint64_t{0};
  }
  if (h.type != Type::kUint) {
    return bad_type(std::string(what) + " is not an unsigned integer");
  }
  return h.u;
}

// token_ids: only their number matters here.
Result<size_t, KvDecodeError> count_tokens(Reader& r) {
  auto n = container(r, Type::kArray, "token_ids");
  if (!n) {
    return n.error();
  }
  for (uint64_t i = 0; i < *n; ++i) {
    if (!r.skip_value()) {
      return truncated();
    }
  }
  return static_cast<size_t>(*n);
}

std::optional<KvEvent::Kind> kind_of(std::string_view tag) {
  if (tag == "BlockStored") {
    return KvEvent::Kind::kStored;
  }
  if (tag == "BlockRemoved") {
    return KvEvent::Kind::kRemoved;
  }
  if (tag == "AllBlocksCleared") {
    return KvEvent::Kind::kAllCleared;
  }
  return std::nullopt;
}

Result<std::string_view, KvDecodeError> read_str(Reader& r, std::string_view what) {
  Head h;
  if (!r.head(h)) {
    return truncated();
  }
  if (h.type != Type::kStr) {
    return bad_type(std::string(what) + " is not a string");
  }
  std::string_view s;
  if (!r.bytes(h, s)) {
    return truncated();
  }
  return s;
}

uint32_t clamp_block_size(uint64_t v) {
  return static_cast<uint32_t>(std::min<uint64_t>(v, 1u << 20));
}

// ["Tag", fields...]; `n` elements, the array header already read. nullopt: unknown tag (skipped).
Result<std::optional<KvEvent>, KvDecodeError> array_event(Reader& r, uint64_t n) {
  if (n == 0) {
    return bad_shape("an event array is empty");
  }
  auto tag = read_str(r, "an event tag");
  if (!tag) {
    return tag.error();
  }
  uint64_t used = 1;
  auto skip_rest = [&]() -> Result<Ok, KvDecodeError> {
    for (; used < n; ++used) {
      if (!r.skip_value()) {
        return truncated();
      }
    }
    return Ok{};
  };
  const auto kind = kind_of(*tag);
  if (!kind) {
    if (auto s = skip_rest(); !s) {
      return s.error();
    }
    return std::optional<KvEvent>();
  }
  KvEvent e;
  e.kind = *kind;
  if (*kind == KvEvent::Kind::kStored) {
    if (n < 5) {
      return bad_shape("BlockStored has fewer than 4 fields");
    }
    if (auto s = read_hashes(r, e.block_hashes); !s) {
      return s.error();
    }
    auto parent = read_parent(r);
    if (!parent) {
      return parent.error();
    }
    e.parent = *parent;
    auto toks = count_tokens(r);
    if (!toks) {
      return toks.error();
    }
    e.num_tokens = *toks;
    auto bs = read_uint(r, "block_size");
    if (!bs) {
      return bs.error();
    }
    e.block_size = clamp_block_size(*bs);
    used = 5;
  } else if (*kind == KvEvent::Kind::kRemoved) {
    if (n < 2) {
      return bad_shape("BlockRemoved has no block_hashes");
    }
    if (auto s = read_hashes(r, e.block_hashes); !s) {
      return s.error();
    }
    used = 2;
  }
  if (auto s = skip_rest(); !s) {
    return s.error();
  }
  return std::optional<KvEvent>(std::move(e));
}

// {"type": "Tag", field: value, ...}; `n` pairs, the map header already read.
Result<std::optional<KvEvent>, KvDecodeError> map_event(Reader& r, uint64_t n) {
  KvEvent e;
  std::optional<KvEvent::Kind> kind;
  bool known = true;
  bool have_hashes = false;
  for (uint64_t i = 0; i < n; ++i) {
    auto key = read_str(r, "an event field name");
    if (!key) {
      return key.error();
    }
    if (*key == "type") {
      auto tag = read_str(r, "an event type");
      if (!tag) {
        return tag.error();
      }
      kind = kind_of(*tag);
      known = kind.has_value();
    } else if (*key == "block_hashes") {
      e.block_hashes.clear();
      if (auto s = read_hashes(r, e.block_hashes); !s) {
        return s.error();
      }
      have_hashes = true;
    } else if (*key == "parent_block_hash") {
      auto p = read_parent(r);
      if (!p) {
        return p.error();
      }
      e.parent = *p;
    } else if (*key == "token_ids") {
      auto t = count_tokens(r);
      if (!t) {
        return t.error();
      }
      e.num_tokens = *t;
    } else if (*key == "block_size") {
      auto bs = read_uint(r, "block_size");
      if (!bs) {
        return bs.error();
      }
      e.block_size = clamp_block_size(*bs);
    } else if (!r.skip_value()) {
      return truncated();
    }
  }
  if (!known) {
    return std::optional<KvEvent>();
  }
  if (!kind) {
    return bad_shape("an event map has no \"type\"");
  }
  e.kind = *kind;
  if (e.kind != KvEvent::Kind::kAllCleared && !have_hashes) {
    return bad_shape("a BlockStored/BlockRemoved map has no block_hashes");
  }
  return std::optional<KvEvent>(std::move(e));
}

Result<Ok, KvDecodeError> read_events(Reader& r, KvEventBatch& batch) {
  auto n = container(r, Type::kArray, "events");
  if (!n) {
    return n.error();
  }
  batch.events.reserve(static_cast<size_t>(*n));
  for (uint64_t i = 0; i < *n; ++i) {
    Head h;
    if (!r.head(h)) {
      return truncated();
    }
    if ((h.type != Type::kArray && h.type != Type::kMap) || h.u > r.left()) {
      return bad_type("an event is neither an array nor a map");
    }
    auto ev = h.type == Type::kArray ? array_event(r, h.u) : map_event(r, h.u);
    if (!ev) {
      return ev.error();
    }
    if (ev->has_value()) {
      batch.events.push_back(std::move(**ev));
    } else {
      ++batch.unknown_events;
    }
  }
  return Ok{};
}

Result<double, KvDecodeError> read_ts(Reader& r) {
  Head h;
  if (!r.head(h)) {
    return truncated();
  }
  switch (h.type) {
    case Type::kFloat:
      return h.f;
    case Type::kUint:
      return static_cast<double>(h.u);
    case Type::kInt:
      return static_cast<double>(static_cast<int64_t>(h.u));
    default:
      return bad_type("ts is not a number");
  }
}

Result<std::optional<int64_t>, KvDecodeError> read_rank(Reader& r) {
  Head h;
  if (!r.head(h)) {
    return truncated();
  }
  if (h.type == Type::kNil) {
    return std::optional<int64_t>();
  }
  if (h.type != Type::kUint && h.type != Type::kInt) {
    return bad_type("data_parallel_rank is not an integer");
  }
  return std::optional<int64_t>(static_cast<int64_t>(h.u));
}

}  // namespace

std::string_view to_string(KvDecodeError e) {
  switch (e) {
    case KvDecodeError::kTooLarge:
      return "too_large";
    case KvDecodeError::kTruncated:
      return "truncated";
    case KvDecodeError::kBadType:
      return "bad_type";
    case KvDecodeError::kBadShape:
      return "bad_shape";
  }
  return "unknown";
}

Result<KvEventBatch, KvDecodeError> decode_kv_event_batch(std::span<const uint8_t> bytes) {
  if (bytes.size() > kMaxKvEventBatchBytes) {
    return make_error(KvDecodeError::kTooLarge, "KV event batch: larger than 16 MiB");
  }
  Reader r(bytes);
  KvEventBatch batch;
  Head h;
  if (!r.head(h)) {
    return truncated();
  }
  if (h.type == Type::kArray) {
    if (h.u < 2 || h.u > r.left()) {
      return bad_shape("EventBatch array needs [ts, events, dp_rank?]");
    }
    auto ts = read_ts(r);
    if (!ts) {
      return ts.error();
    }
    batch.ts = *ts;
    if (auto s = read_events(r, batch); !s) {
      return s.error();
    }
    if (h.u >= 3) {
      auto rank = read_rank(r);
      if (!rank) {
        return rank.error();
      }
      batch.dp_rank = *rank;
    }
    for (uint64_t i = 3; i < h.u; ++i) {
      if (!r.skip_value()) {
        return truncated();
      }
    }
  } else if (h.type == Type::kMap) {
    if (h.u > r.left()) {
      return bad_shape("EventBatch map: more fields than bytes");
    }
    bool have_events = false;
    for (uint64_t i = 0; i < h.u; ++i) {
      auto key = read_str(r, "an EventBatch field name");
      if (!key) {
        return key.error();
      }
      if (*key == "ts") {
        auto ts = read_ts(r);
        if (!ts) {
          return ts.error();
        }
        batch.ts = *ts;
      } else if (*key == "events") {
        batch.events.clear();
        if (auto s = read_events(r, batch); !s) {
          return s.error();
        }
        have_events = true;
      } else if (*key == "data_parallel_rank") {
        auto rank = read_rank(r);
        if (!rank) {
          return rank.error();
        }
        batch.dp_rank = *rank;
      } else if (!r.skip_value()) {
        return truncated();
      }
    }
    if (!have_events) {
      return bad_shape("EventBatch map has no \"events\"");
    }
  } else {
    return bad_type("EventBatch is neither an array nor a map");
  }
  if (!r.at_end()) {
    return bad_shape("trailing bytes after the EventBatch");
  }
  return batch;
}

std::optional<int64_t> decode_kv_event_seq(std::span<const uint8_t> frame) {
  if (frame.size() != 8) {
    return std::nullopt;
  }
  uint64_t v = 0;
  for (uint8_t b : frame) {
    v = (v << 8) | b;
  }
  return static_cast<int64_t>(v);
}

cluster::KvWithdrawal plan_withdrawal(const KvEventBatch& batch) {
  cluster::KvWithdrawal w;
  for (const KvEvent& e : batch.events) {
    switch (e.kind) {
      case KvEvent::Kind::kAllCleared:
        w.all = true;
        w.removed_blocks = 0;  // what was removed before is inside the clear
        break;
      case KvEvent::Kind::kRemoved:
        w.removed_blocks += e.block_hashes.size();
        break;
      case KvEvent::Kind::kStored:
        if (e.block_size != 0) {
          w.block_size = e.block_size;
        }
        break;
    }
  }
  return w;
}

}  // namespace cgn::agent
