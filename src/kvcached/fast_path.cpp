#include "kvcached/fast_path.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>

namespace cgn::kvcached {

static_assert(std::endian::native == std::endian::little, "the fast path's frames are little-endian");

std::string_view to_string(Op op) {
  switch (op) {
    case Op::kHello:
      return "HELLO";
    case Op::kPutStart:
      return "PUT_START";
    case Op::kPutEnd:
      return "PUT_END";
    case Op::kPutAbort:
      return "PUT_ABORT";
    case Op::kGet:
      return "GET";
    case Op::kRelease:
      return "RELEASE";
    case Op::kLookup:
      return "LOOKUP";
    case Op::kGetMany:
      return "GET_MANY";
    case Op::kPutStartMany:
      return "PUT_START_MANY";
    case Op::kPutEndMany:
      return "PUT_END_MANY";
    case Op::kReleaseMany:
      return "RELEASE_MANY";
  }
  return "?";
}

std::string_view to_string(FrameStatus s) {
  switch (s) {
    case FrameStatus::kOk:
      return "OK";
    case FrameStatus::kNotFound:
      return "NOT_FOUND";
    case FrameStatus::kTooLarge:
      return "TOO_LARGE";
    case FrameStatus::kNoSpace:
      return "NO_SPACE";
    case FrameStatus::kBusy:
      return "BUSY";
    case FrameStatus::kInvalid:
      return "INVALID";
    case FrameStatus::kUnavailable:
      return "UNAVAILABLE";
  }
  return "?";
}

namespace {

constexpr size_t kHeader = 8;
constexpr size_t kKey = 32;

class Writer {
 public:
  explicit Writer(size_t reserve) { out_.reserve(reserve); }
  template <class T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.insert(out_.end(), b, b + sizeof(T));
  }
  void bytes(const uint8_t* p, size_t n) { out_.insert(out_.end(), p, p + n); }
  void zeros(size_t n) { out_.insert(out_.end(), n, 0); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  template <class T>
  bool get(T& v) {
    if (in_.size() - pos_ < sizeof(T)) {
      return false;
    }
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool bytes(uint8_t* p, size_t n) {
    if (in_.size() - pos_ < n) {
      return false;
    }
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool zeros(size_t n) {
    if (in_.size() - pos_ < n) {
      return false;
    }
    for (size_t i = 0; i < n; ++i) {
      if (in_[pos_ + i] != 0) {
        return false;
      }
    }
    pos_ += n;
    return true;
  }
  size_t left() const { return in_.size() - pos_; }

 private:
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

Error<FrameError> malformed(std::string message) {
  return make_error(FrameError::kMalformed, std::move(message));
}

bool valid_op(uint8_t op) {
  return op >= 1 && op <= 11;
}

bool valid_status(uint8_t s) {
  return s <= static_cast<uint8_t>(FrameStatus::kUnavailable);
}

// A batch's count: 1 to kMaxBatchKeys, and exactly `item` bytes per entry left in the frame.
bool batch_count(Reader& rd, Op op, uint32_t count, size_t item, std::string& why) {
  if (count == 0 || count > kMaxBatchKeys) {
    why = fmt::format("{} of {} keys; 1 to {}", to_string(op), count, kMaxBatchKeys);
    return false;
  }
  if (rd.left() != size_t{count} * item) {
    why = fmt::format("{} of {} keys carries {} bytes of entries; {} expected", to_string(op), count,
                      rd.left(), size_t{count} * item);
    return false;
  }
  return true;
}

bool valid_tier(uint8_t t) {
  return t == 1 || t == 2;
}

}  // namespace

std::vector<uint8_t> encode(const Request& r) {
  Writer w(kHeader + 48 + kKey * r.keys.size() + 40 * r.puts.size() + 8 * r.handles.size());
  w.put(kFrameMagic);
  w.put(static_cast<uint8_t>(r.op));
  w.zeros(3);
  switch (r.op) {
    case Op::kHello:
      w.put(r.version);
      break;
    case Op::kPutStart:
      w.bytes(r.key.data(), kKey);
      w.put(r.length);
      break;
    case Op::kPutEnd:
    case Op::kPutAbort:
    case Op::kGet:
      w.bytes(r.key.data(), kKey);
      break;
    case Op::kRelease:
      w.put(r.handle);
      break;
    case Op::kLookup:
      w.put(r.lease_ms);
      w.put(static_cast<uint32_t>(r.keys.size()));
      for (const auto& k : r.keys) {
        w.bytes(k.data(), kKey);
      }
      break;
    case Op::kGetMany:
    case Op::kPutEndMany:
      w.put(static_cast<uint32_t>(r.keys.size()));
      w.zeros(4);
      for (const auto& k : r.keys) {
        w.bytes(k.data(), kKey);
      }
      break;
    case Op::kPutStartMany:
      w.put(static_cast<uint32_t>(r.puts.size()));
      w.zeros(4);
      for (const auto& p : r.puts) {
        w.bytes(p.key.data(), kKey);
        w.put(p.length);
      }
      break;
    case Op::kReleaseMany:
      w.put(r.no_reply ? kNoReply : uint32_t{0});
      w.put(static_cast<uint32_t>(r.handles.size()));
      for (const auto h : r.handles) {
        w.put(h);
      }
      break;
  }
  return w.take();
}

Result<Request, FrameError> decode_request(std::span<const uint8_t> frame) {
  Reader rd(frame);
  uint32_t magic = 0;
  uint8_t op = 0;
  if (!rd.get(magic) || magic != kFrameMagic) {
    return malformed(fmt::format("a {}-byte frame without the fast path's magic", frame.size()));
  }
  if (!rd.get(op) || !valid_op(op)) {
    return malformed(fmt::format("unknown op {}", op));
  }
  if (!rd.zeros(3)) {
    return malformed("reserved header bytes must be zero");
  }
  Request r;
  r.op = static_cast<Op>(op);
  bool ok = true;
  switch (r.op) {
    case Op::kHello:
      ok = rd.get(r.version);
      break;
    case Op::kPutStart:
      ok = rd.bytes(r.key.data(), kKey) && rd.get(r.length);
      break;
    case Op::kPutEnd:
    case Op::kPutAbort:
    case Op::kGet:
      ok = rd.bytes(r.key.data(), kKey);
      break;
    case Op::kRelease:
      ok = rd.get(r.handle);
      break;
    case Op::kLookup: {
      uint32_t count = 0;
      ok = rd.get(r.lease_ms) && rd.get(count);
      if (ok && (count == 0 || count > kMaxLookupKeys)) {
        return malformed(fmt::format("LOOKUP of {} keys; 1 to {}", count, kMaxLookupKeys));
      }
      if (ok && rd.left() != size_t{count} * kKey) {
        return malformed(fmt::format("LOOKUP of {} keys carries {} key bytes", count, rd.left()));
      }
      r.keys.resize(count);
      for (uint32_t i = 0; ok && i < count; ++i) {
        ok = rd.bytes(r.keys[i].data(), kKey);
      }
      break;
    }
    case Op::kGetMany:
    case Op::kPutEndMany:
    case Op::kPutStartMany:
    case Op::kReleaseMany: {
      uint32_t flags = 0;
      uint32_t count = 0;
      if (r.op == Op::kReleaseMany) {
        ok = rd.get(flags) && rd.get(count);
        if (ok && (flags & ~kNoReply) != 0) {
          return malformed(fmt::format("RELEASE_MANY flags {:#x}; only bit 0 (no answer) is defined", flags));
        }
        r.no_reply = (flags & kNoReply) != 0;
      } else {
        ok = rd.get(count) && rd.zeros(4);
      }
      if (!ok) {
        break;
      }
      const size_t item = r.op == Op::kPutStartMany ? kKey + 8 : r.op == Op::kReleaseMany ? 8 : kKey;
      if (std::string why; !batch_count(rd, r.op, count, item, why)) {
        return malformed(std::move(why));
      }
      for (uint32_t i = 0; ok && i < count; ++i) {
        if (r.op == Op::kPutStartMany) {
          PutItem p;
          ok = rd.bytes(p.key.data(), kKey) && rd.get(p.length);
          r.puts.push_back(p);
        } else if (r.op == Op::kReleaseMany) {
          uint64_t h = 0;
          ok = rd.get(h);
          r.handles.push_back(h);
        } else {
          kvcache::BlockKey k{};
          ok = rd.bytes(k.data(), kKey);
          r.keys.push_back(k);
        }
      }
      break;
    }
  }
  if (!ok || rd.left() != 0) {
    return malformed(fmt::format("a {} frame of {} bytes has the wrong size", to_string(r.op), frame.size()));
  }
  return r;
}

std::vector<uint8_t> encode(const Response& r) {
  Writer w(kHeader + 40 + r.tiers.size() + 32 * r.entries.size() + r.message.size());
  w.put(kFrameMagic);
  w.put(static_cast<uint8_t>(r.op));
  w.put(static_cast<uint8_t>(r.status));
  w.zeros(2);
  if (r.status != FrameStatus::kOk) {
    const size_t n = std::min(r.message.size(), kMaxMessage);
    w.put(static_cast<uint16_t>(n));
    w.bytes(reinterpret_cast<const uint8_t*>(r.message.data()), n);
    return w.take();
  }
  switch (r.op) {
    case Op::kHello:
      w.put(r.version);
      w.zeros(4);
      w.put(r.arena_bytes);
      break;
    case Op::kPutStart:
      w.put(r.offset);
      w.put(static_cast<uint8_t>(r.already_resident ? 1 : 0));
      w.zeros(7);
      break;
    case Op::kPutEnd:
    case Op::kPutAbort:
    case Op::kRelease:
      break;
    case Op::kGet:
      w.put(r.handle);
      w.put(r.offset);
      w.put(r.length);
      w.put(static_cast<uint8_t>(r.tier));
      w.zeros(7);
      break;
    case Op::kLookup:
      w.put(r.lease_until_unix_ms);
      w.put(static_cast<uint32_t>(r.tiers.size()));
      w.zeros(4);
      for (auto t : r.tiers) {
        w.put(static_cast<uint8_t>(t));
      }
      break;
    case Op::kGetMany:
    case Op::kPutStartMany:
    case Op::kPutEndMany:
    case Op::kReleaseMany:
      w.put(static_cast<uint32_t>(r.entries.size()));
      w.zeros(4);
      for (const auto& e : r.entries) {
        const bool ok = e.status == FrameStatus::kOk;
        w.put(static_cast<uint8_t>(e.status));
        if (r.op == Op::kGetMany) {
          w.put(static_cast<uint8_t>(ok ? e.tier : kvcache::Tier::kNone));
          w.zeros(6);
          w.put(ok ? e.handle : 0);
          w.put(ok ? e.offset : 0);
          w.put(ok ? e.length : 0);
        } else if (r.op == Op::kPutStartMany) {
          w.put(static_cast<uint8_t>(ok && e.already_resident ? 1 : 0));
          w.zeros(6);
          w.put(ok ? e.offset : 0);
        }
      }
      break;
  }
  return w.take();
}

Result<Response, FrameError> decode_response(std::span<const uint8_t> frame) {
  Reader rd(frame);
  uint32_t magic = 0;
  uint8_t op = 0;
  uint8_t status = 0;
  if (!rd.get(magic) || magic != kFrameMagic) {
    return malformed(fmt::format("a {}-byte answer without the fast path's magic", frame.size()));
  }
  if (!rd.get(op) || !valid_op(op)) {
    return malformed(fmt::format("an answer to unknown op {}", op));
  }
  if (!rd.get(status) || !valid_status(status) || !rd.zeros(2)) {
    return malformed("a bad answer header");
  }
  Response r;
  r.op = static_cast<Op>(op);
  r.status = static_cast<FrameStatus>(status);
  bool ok = true;
  if (r.status != FrameStatus::kOk) {
    uint16_t n = 0;
    ok = rd.get(n) && n <= kMaxMessage && rd.left() == n;
    if (ok) {
      r.message.resize(n);
      ok = rd.bytes(reinterpret_cast<uint8_t*>(r.message.data()), n);
    }
  } else {
    switch (r.op) {
      case Op::kHello:
        ok = rd.get(r.version) && rd.zeros(4) && rd.get(r.arena_bytes);
        break;
      case Op::kPutStart: {
        uint8_t resident = 0;
        ok = rd.get(r.offset) && rd.get(resident) && resident <= 1 && rd.zeros(7);
        r.already_resident = resident == 1;
        break;
      }
      case Op::kPutEnd:
      case Op::kPutAbort:
      case Op::kRelease:
        break;
      case Op::kGet: {
        uint8_t tier = 0;
        ok = rd.get(r.handle) && rd.get(r.offset) && rd.get(r.length) && rd.get(tier) && valid_tier(tier) &&
             rd.zeros(7);
        r.tier = static_cast<kvcache::Tier>(tier);
        break;
      }
      case Op::kLookup: {
        uint32_t count = 0;
        ok = rd.get(r.lease_until_unix_ms) && rd.get(count) && rd.zeros(4) && count <= kMaxLookupKeys &&
             rd.left() == count;
        for (uint32_t i = 0; ok && i < count; ++i) {
          uint8_t t = 0;
          ok = rd.get(t) && valid_tier(t);
          r.tiers.push_back(static_cast<kvcache::Tier>(t));
        }
        break;
      }
      case Op::kGetMany:
      case Op::kPutStartMany:
      case Op::kPutEndMany:
      case Op::kReleaseMany: {
        uint32_t count = 0;
        ok = rd.get(count) && rd.zeros(4);
        const size_t item = r.op == Op::kGetMany ? 32 : r.op == Op::kPutStartMany ? 16 : 1;
        std::string why;
        ok = ok && batch_count(rd, r.op, count, item, why);
        for (uint32_t i = 0; ok && i < count; ++i) {
          BatchEntry e;
          uint8_t status = 0;
          ok = rd.get(status) && valid_status(status);
          e.status = static_cast<FrameStatus>(status);
          const bool entry_ok = e.status == FrameStatus::kOk;
          if (ok && r.op == Op::kGetMany) {
            uint8_t tier = 0;
            ok = rd.get(tier) && (entry_ok ? valid_tier(tier) : tier == 0) && rd.zeros(6) &&
                 rd.get(e.handle) && rd.get(e.offset) && rd.get(e.length) &&
                 (entry_ok || (e.handle == 0 && e.offset == 0 && e.length == 0));
            e.tier = static_cast<kvcache::Tier>(tier);
          } else if (ok && r.op == Op::kPutStartMany) {
            uint8_t resident = 0;
            ok = rd.get(resident) && resident <= (entry_ok ? 1 : 0) && rd.zeros(6) && rd.get(e.offset) &&
                 (entry_ok || e.offset == 0);
            e.already_resident = resident == 1;
          }
          r.entries.push_back(e);
        }
        break;
      }
    }
  }
  if (!ok || rd.left() != 0) {
    return malformed(fmt::format("a malformed {} answer of {} bytes", to_string(r.op), frame.size()));
  }
  return r;
}

Response error_response(Op op, FrameStatus status, std::string message) {
  Response r;
  r.op = op;
  r.status = status;
  if (message.size() > kMaxMessage) {
    message.resize(kMaxMessage);
  }
  r.message = std::move(message);
  return r;
}

FrameStatus frame_status(kvcache::StoreError e) {
  switch (e) {
    case kvcache::StoreError::kNotFound:
    case kvcache::StoreError::kCorrupt:
      return FrameStatus::kNotFound;
    case kvcache::StoreError::kTooLarge:
      return FrameStatus::kTooLarge;
    case kvcache::StoreError::kNoSpace:
      return FrameStatus::kNoSpace;
    case kvcache::StoreError::kBusy:
      return FrameStatus::kBusy;
    case kvcache::StoreError::kConfig:
      return FrameStatus::kInvalid;
    case kvcache::StoreError::kIo:
    case kvcache::StoreError::kDiskFull:
    case kvcache::StoreError::kStopped:
      return FrameStatus::kUnavailable;
  }
  return FrameStatus::kUnavailable;
}

}  // namespace cgn::kvcached
