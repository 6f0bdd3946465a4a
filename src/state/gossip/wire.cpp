#include "state/gossip/wire.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

namespace cgn::gossip {

namespace {

size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

size_t addr_size(const PeerAddr& a) {
  if (a.family == 4) {
    return 1 + 4 + 2;
  }
  if (a.family == 6) {
    return 1 + 16 + 2;
  }
  return 1;
}

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) {
    out_.push_back(static_cast<uint8_t>(v));
    out_.push_back(static_cast<uint8_t>(v >> 8));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    }
  }
  void vu(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<uint8_t>(v));
  }
  void s8(std::string_view s) {
    u8(static_cast<uint8_t>(std::min<size_t>(s.size(), 255)));
    out_.insert(out_.end(), s.begin(), s.begin() + std::min<size_t>(s.size(), 255));
  }
  void s16(std::string_view s) {
    u16(static_cast<uint16_t>(std::min<size_t>(s.size(), 65535)));
    out_.insert(out_.end(), s.begin(), s.begin() + std::min<size_t>(s.size(), 65535));
  }
  void addr(const PeerAddr& a) {
    if (a.family != 4 && a.family != 6) {
      u8(0);
      return;
    }
    u8(a.family);
    const size_t n = a.family == 4 ? 4 : 16;
    out_.insert(out_.end(), a.bytes.begin(), a.bytes.begin() + static_cast<ptrdiff_t>(n));
    u16(a.port);
  }

 private:
  std::vector<uint8_t>& out_;
};

// Every read checks the remaining length; the first failure sticks.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  bool ok() const { return ok_; }
  size_t left() const { return in_.size() - pos_; }
  uint8_t u8() {
    if (!need(1)) {
      return 0;
    }
    return in_[pos_++];
  }
  uint16_t u16() {
    if (!need(2)) {
      return 0;
    }
    uint16_t v = static_cast<uint16_t>(in_[pos_] | (in_[pos_ + 1] << 8));
    pos_ += 2;
    return v;
  }
  uint64_t u64() {
    if (!need(8)) {
      return 0;
    }
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) {
      v = (v << 8) | in_[pos_ + static_cast<size_t>(i)];
    }
    pos_ += 8;
    return v;
  }
  uint64_t vu() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!need(1)) {
        return 0;
      }
      const uint8_t b = in_[pos_++];
      if (shift == 63 && b > 1) {
        ok_ = false;  // would overflow 64 bits
        return 0;
      }
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        if (b == 0 && shift != 0) {
          ok_ = false;  // overlong encoding
          return 0;
        }
        return v;
      }
    }
    ok_ = false;
    return 0;
  }
  std::string str(size_t len, size_t max) {
    if (len > max || !need(len)) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(in_.data() + pos_), len);
    pos_ += len;
    return s;
  }
  std::string s8(size_t max) { return str(u8(), max); }
  std::string s16(size_t max) { return str(u16(), max); }
  PeerAddr addr() {
    PeerAddr a;
    const uint8_t f = u8();
    if (f == 0) {
      return a;
    }
    if (f != 4 && f != 6) {
      ok_ = false;
      return a;
    }
    const size_t n = f == 4 ? 4 : 16;
    if (!need(n)) {
      return a;
    }
    a.family = f;
    std::memcpy(a.bytes.data(), in_.data() + pos_, n);
    pos_ += n;
    a.port = u16();
    return a;
  }
  void fail() { ok_ = false; }

 private:
  bool need(size_t n) {
    if (!ok_ || left() < n) {
      ok_ = false;
      return false;
    }
    return true;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

void write_digest(Writer& w, const Digest& d) {
  w.u8(d.complete ? 1 : 0);
  w.u16(static_cast<uint16_t>(d.entries.size()));
  for (const auto& e : d.entries) {
    w.s8(e.name);
    w.u64(e.generation);
    w.vu(e.heartbeat);
    w.vu(e.max_version);
    w.vu(e.last_gc_version);
  }
}

void write_delta(Writer& w, const std::vector<NodeDelta>& delta) {
  w.u16(static_cast<uint16_t>(delta.size()));
  for (const auto& n : delta) {
    w.s8(n.name);
    w.u64(n.generation);
    w.addr(n.addr);
    w.vu(n.heartbeat);
    w.vu(n.last_gc_version);
    w.vu(n.floor);
    w.vu(n.max_version);
    w.u8(static_cast<uint8_t>((n.reset ? 1 : 0) | (n.complete ? 2 : 0)));
    w.u16(static_cast<uint16_t>(n.kvs.size()));
    for (const auto& kv : n.kvs) {
      w.s8(kv.key);
      w.vu(kv.version);
      w.u8(static_cast<uint8_t>(kv.status));
      w.s16(kv.value);
    }
  }
}

// Smallest encodings, to refuse counts that cannot fit in what is left before allocating.
constexpr size_t kMinDigestEntry = 1 + 8 + 3;
constexpr size_t kMinNodeDelta = 1 + 8 + 1 + 4 + 1 + 2;
constexpr size_t kMinKv = 1 + 1 + 1 + 2;

bool read_digest(Reader& r, Digest& d) {
  const uint8_t flags = r.u8();
  if (flags > 1) {
    r.fail();
  }
  d.complete = (flags & 1) != 0;
  const uint16_t count = r.u16();
  if (!r.ok() || count * kMinDigestEntry > r.left()) {
    return false;
  }
  d.entries.resize(count);
  for (auto& e : d.entries) {
    e.name = r.s8(kMaxName);
    e.generation = r.u64();
    e.heartbeat = r.vu();
    e.max_version = r.vu();
    e.last_gc_version = r.vu();
    if (!r.ok() || e.name.empty()) {
      return false;
    }
  }
  return true;
}

bool read_delta(Reader& r, std::vector<NodeDelta>& delta) {
  const uint16_t count = r.u16();
  if (!r.ok() || count * kMinNodeDelta > r.left()) {
    return false;
  }
  delta.resize(count);
  for (auto& n : delta) {
    n.name = r.s8(kMaxName);
    n.generation = r.u64();
    n.addr = r.addr();
    n.heartbeat = r.vu();
    n.last_gc_version = r.vu();
    n.floor = r.vu();
    n.max_version = r.vu();
    const uint8_t flags = r.u8();
    if (flags > 3) {
      return false;
    }
    n.reset = (flags & 1) != 0;
    n.complete = (flags & 2) != 0;
    const uint16_t kvs = r.u16();
    if (!r.ok() || n.name.empty() || kvs * kMinKv > r.left()) {
      return false;
    }
    n.kvs.resize(kvs);
    uint64_t last = n.floor;
    for (auto& kv : n.kvs) {
      kv.key = r.s8(kMaxName);
      kv.version = r.vu();
      const uint8_t st = r.u8();
      if (st > 1) {
        return false;
      }
      kv.status = static_cast<KvStatus>(st);
      kv.value = r.s16(kMaxValue);
      // Versions strictly increase above the floor, up to the stated max.
      if (!r.ok() || kv.key.empty() || kv.version <= last || kv.version > n.max_version ||
          (kv.status == KvStatus::kDeleted && !kv.value.empty())) {
        return false;
      }
      last = kv.version;
    }
  }
  return r.ok();
}

}  // namespace

std::string PeerAddr::host() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family == 4) {
    ::inet_ntop(AF_INET, bytes.data(), buf, sizeof buf);
  } else if (family == 6) {
    ::inet_ntop(AF_INET6, bytes.data(), buf, sizeof buf);
  }
  return buf;
}

std::string PeerAddr::to_string() const {
  if (family != 4 && family != 6) {
    return {};
  }
  // Appends rather than operator+ chains (GCC 12 -Wrestrict false positive).
  std::string out;
  out.reserve(48);
  if (family == 6) {
    out.push_back('[');
  }
  out.append(host());
  if (family == 6) {
    out.push_back(']');
  }
  out.push_back(':');
  out.append(std::to_string(port));
  return out;
}

std::optional<PeerAddr> PeerAddr::parse(std::string_view ip, uint16_t port) {
  const std::string s(ip);
  PeerAddr a;
  a.port = port;
  if (::inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) {
    a.family = 4;
    return a;
  }
  if (::inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) {
    a.family = 6;
    return a;
  }
  return std::nullopt;
}

std::string_view to_string(WireError e) {
  switch (e) {
    case WireError::kSize:
      return "size";
    case WireError::kMagic:
      return "magic";
    case WireError::kVersion:
      return "version";
    case WireError::kAuth:
      return "auth";
    case WireError::kMalformed:
      return "malformed";
    case WireError::kBadCluster:
      return "bad_cluster";
  }
  return "unknown";
}

size_t header_size(std::string_view cluster_id, std::string_view sender, bool auth) {
  return 2 + 1 + 1 + 1 + 1 + cluster_id.size() + 1 + sender.size() + 8 + (auth ? kMacBytes : 0);
}

size_t digest_entry_size(const DigestEntry& e) {
  return 1 + e.name.size() + 8 + varint_size(e.heartbeat) + varint_size(e.max_version) +
         varint_size(e.last_gc_version);
}

size_t node_delta_header_size(const NodeDelta& d) {
  return 1 + d.name.size() + 8 + addr_size(d.addr) + varint_size(d.heartbeat) +
         varint_size(d.last_gc_version) + varint_size(d.floor) + varint_size(d.max_version) + 1 + 2;
}

size_t kv_size(const KvUpdate& kv) {
  return 1 + kv.key.size() + varint_size(kv.version) + 1 + 2 + kv.value.size();
}

std::array<uint8_t, kMacBytes> mac(std::string_view key, std::span<const uint8_t> data) {
  unsigned char full[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ::HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), full, &len);
  std::array<uint8_t, kMacBytes> out{};
  std::memcpy(out.data(), full, kMacBytes);
  return out;
}

std::vector<uint8_t> encode(const Message& m, std::string_view hmac_key) {
  std::vector<uint8_t> out;
  out.reserve(kMaxDatagram);
  Writer w(out);
  w.u16(kMagic);
  w.u8(kProtocolVersion);
  w.u8(static_cast<uint8_t>(m.type));
  w.u8(hmac_key.empty() ? 0 : 1);
  w.s8(m.cluster_id);
  w.s8(m.sender);
  w.u64(m.sender_generation);
  if (m.type == MessageType::kSyn || m.type == MessageType::kSynAck) {
    write_digest(w, m.digest);
  }
  if (m.type == MessageType::kSynAck || m.type == MessageType::kAck) {
    write_delta(w, m.delta);
  }
  if (!hmac_key.empty()) {
    const auto tag = mac(hmac_key, out);
    out.insert(out.end(), tag.begin(), tag.end());
  }
  return out;
}

Result<Message, WireError> decode(std::span<const uint8_t> bytes, std::string_view cluster_id,
                                  std::string_view hmac_key, size_t max_datagram,
                                  std::string_view rotation_key) {
  constexpr size_t kFixed = 2 + 1 + 1 + 1;
  if (bytes.size() < kFixed || bytes.size() > max_datagram) {
    return make_error(WireError::kSize, "datagram of " + std::to_string(bytes.size()) + " bytes");
  }
  if ((bytes[0] | (bytes[1] << 8)) != kMagic) {
    return make_error(WireError::kMagic, "not a gossip packet");
  }
  if (bytes[2] != kProtocolVersion) {
    return make_error(WireError::kVersion, "protocol version " + std::to_string(bytes[2]));
  }
  const bool has_mac = (bytes[4] & 1) != 0;
  if ((bytes[4] & ~1u) != 0) {
    return make_error(WireError::kMalformed, "unknown flags");
  }
  if (has_mac != !hmac_key.empty()) {
    return make_error(WireError::kAuth, has_mac ? "authenticated packet, no key configured"
                                                : "unauthenticated packet, a key is configured");
  }
  std::span<const uint8_t> body = bytes;
  if (has_mac) {
    if (bytes.size() < kFixed + kMacBytes) {
      return make_error(WireError::kAuth, "short HMAC");
    }
    body = bytes.first(bytes.size() - kMacBytes);
    const uint8_t* got = bytes.data() + body.size();
    const auto want = mac(hmac_key, body);
    bool ok = CRYPTO_memcmp(want.data(), got, kMacBytes) == 0;
    if (!ok && !rotation_key.empty()) {
      const auto second = mac(rotation_key, body);
      ok = CRYPTO_memcmp(second.data(), got, kMacBytes) == 0;
    }
    if (!ok) {
      return make_error(WireError::kAuth, "wrong HMAC");
    }
  }
  Reader r(body);
  r.u16();
  r.u8();
  const uint8_t type = r.u8();
  r.u8();
  if (type > static_cast<uint8_t>(MessageType::kAck)) {
    return make_error(WireError::kMalformed, "unknown message type " + std::to_string(type));
  }
  Message m;
  m.type = static_cast<MessageType>(type);
  m.cluster_id = r.s8(kMaxName);
  m.sender = r.s8(kMaxName);
  m.sender_generation = r.u64();
  if (!r.ok() || m.sender.empty()) {
    return make_error(WireError::kMalformed, "truncated header");
  }
  if ((m.type == MessageType::kSyn || m.type == MessageType::kSynAck) && !read_digest(r, m.digest)) {
    return make_error(WireError::kMalformed, "bad digest");
  }
  if ((m.type == MessageType::kSynAck || m.type == MessageType::kAck) && !read_delta(r, m.delta)) {
    return make_error(WireError::kMalformed, "bad delta");
  }
  if (!r.ok() || r.left() != 0) {
    return make_error(WireError::kMalformed, "trailing bytes");
  }
  if (m.cluster_id != cluster_id) {
    return make_error(WireError::kBadCluster, "cluster \"" + m.cluster_id + "\"");
  }
  return m;
}

}  // namespace cgn::gossip
