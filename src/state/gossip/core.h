// GossipCore: the scuttlebutt protocol with no sockets and no clock of its own
// (docs/architecture/gossip.md). The UDP node (udp_node.h) feeds it datagrams and timer ticks;
// tests and the benchmark drive many cores in one process with explicit time.
//
// Every member owns a set of versioned key-values (one version counter per member, bumped by each
// set or delete); a digest lists (name, generation, heartbeat, max_version, last_gc_version) per
// member; a delta carries the KVs a peer lacks, in increasing version order, cut to fit one
// datagram. A member with a higher generation (a restart) supersedes the older incarnation at
// once. Deletions are tombstones kept `tombstone_grace`, then collected by their owner, which
// advances last_gc_version; a peer too far behind gets a reset (full state). Liveness comes from
// heartbeats (one per round, carried in digests) through a phi-accrual detector; dead members leave
// digests and deltas and are forgotten after `dead_gc`, their (name, generation) remembered so
// they cannot come back from a stale peer.
//
// Not thread-safe: one owner (the UDP node's thread, under its mutex; or a test).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "state/gossip/phi.h"
#include "state/gossip/wire.h"

namespace cgn::gossip {

struct CoreOptions {
  std::string cluster_id = "cognitora";
  std::string name;          // unique member name (the agent's node_id; the router's own)
  uint64_t generation = 0;   // start time of this incarnation; higher supersedes
  PeerAddr advertise;        // our address when known (family 0 when listening on a wildcard)
  std::string hmac_key;      // signs every packet and verifies; empty: no authentication
  std::string rotation_key;  // also accepted, never used to sign (key rotation); empty: none
  size_t max_datagram = kMaxDatagram;
  size_t fanout = 3;                             // peers per round
  Nanos gossip_interval = 300 * kNanosPerMilli;  // the UDP node's tick period (for the docs)
  PhiOptions phi;
  Nanos tombstone_grace = 60 * kNanosPerSecond;  // deleted keys kept this long by their owner
  Nanos dead_gc = 5 * 60 * kNanosPerSecond;      // dead members forgotten after this long
  size_t gc_history = 1000;                      // forgotten (name, generation)s remembered
  size_t max_members = 4096;                     // learned members beyond this are ignored
  size_t max_keys = 64;                          // per member
  size_t retransmit = 0;  // digest retransmits of a fresh change; 0 = 3 * ceil(log10(N + 1))
  uint64_t seed = 0;      // RNG seed (0 = from the name and generation)
};

struct KvEntry {
  std::string value;
  uint64_t version = 0;
  bool deleted = false;
  Nanos deleted_at = 0;  // when this holder learned of the deletion
};

struct MemberView {
  std::string name;
  uint64_t generation = 0;
  PeerAddr addr;
  uint64_t heartbeat = 0;
  uint64_t max_version = 0;
  bool live = false;
  bool self = false;
  double phi = 0;
  std::map<std::string, std::string> kvs;  // live keys only
};

struct CoreStats {
  uint64_t packets_in = 0;
  uint64_t packets_out = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t rejected[6] = {};  // by WireError
  uint64_t members_dead = 0;  // live -> dead transitions
  uint64_t members_gced = 0;
  uint64_t superseded = 0;       // an older generation replaced by a newer one
  uint64_t deltas_cut = 0;       // deltas that did not fit one datagram
  uint64_t digests_sampled = 0;  // digests that listed only part of the membership
  uint64_t name_conflicts = 0;   // another live process gossips our name
  uint64_t rejected_total() const {
    uint64_t n = 0;
    for (auto v : rejected) {
      n += v;
    }
    return n;
  }
};

struct Outgoing {
  PeerAddr to;
  std::vector<uint8_t> bytes;
};

class GossipCore {
 public:
  explicit GossipCore(CoreOptions options, Nanos now);

  // Local state. Values over kMaxValue bytes (or keys over kMaxName, or past max_keys) are
  // refused with false.
  bool set(const std::string& key, const std::string& value, Nanos now);
  bool remove(const std::string& key, Nanos now);

  // Seed addresses (re-resolved by the caller); used when no live peer is known and to heal
  // partitions.
  void set_seeds(std::vector<PeerAddr> seeds) { seeds_ = std::move(seeds); }

  // One round: bump our heartbeat, run the detector, collect garbage, and open a handshake (Syn)
  // with `fanout` live peers, possibly one dead peer and one seed.
  std::vector<Outgoing> tick(Nanos now);

  // An incoming datagram from `from`; returns the replies. Rejected datagrams are counted.
  std::vector<Outgoing> receive(std::span<const uint8_t> bytes, const PeerAddr& from, Nanos now);

  std::vector<MemberView> members(Nanos now) const;
  size_t member_count() const { return members_.size(); }
  const CoreStats& stats() const { return stats_; }
  const CoreOptions& options() const { return options_; }
  // Is `name` known, live, and at least at `version` (tests, benchmark).
  bool has_version(const std::string& name, uint64_t generation, uint64_t version) const;
  bool is_live(const std::string& name) const;
  uint64_t max_version() const;

 private:
  struct Member {
    std::string name;
    uint64_t generation = 0;
    PeerAddr addr;
    bool addr_direct = false;  // learned from a packet it sent us
    uint64_t heartbeat = 0;
    uint64_t max_version = 0;
    uint64_t seen_max_version = 0;  // highest max_version any digest showed us
    uint64_t last_gc_version = 0;
    std::map<std::string, KvEntry> kvs;
    PhiDetector fd;
    bool live = true;
    Nanos dead_since = 0;
    size_t retransmit_left = 0;  // fresh change: prefer it in digests this many times
    size_t list_index = 0;       // position in live_ or dead_
    bool hot = false;            // in hot_ (stale or fresh: listed first in digests)
    uint64_t mark = 0;           // == mark_epoch_: already in the digest being built
  };

  Member& self() { return *self_; }
  const Member& self() const { return *self_; }
  Member* find(std::string_view name);
  const Member* find(std::string_view name) const;
  Member* add_member(Member m);
  void set_live(Member& m, bool live);
  void make_hot(Member& m);
  Member* learn(const std::string& name, uint64_t generation, Nanos now);
  void supersede(Member& m, uint64_t generation, Nanos now);
  void observe_heartbeat(Member& m, uint64_t heartbeat, Nanos now);
  void mark_fresh(Member& m);
  size_t retransmit_limit() const;

  Digest make_digest(size_t budget);
  void apply_digest(const Digest& d, Nanos now);
  std::vector<NodeDelta> make_delta(const Digest& peer, size_t budget);
  void apply_delta(const std::vector<NodeDelta>& delta, Nanos now);
  std::vector<uint8_t> seal(const Message& m);
  Message blank(MessageType type) const;
  size_t header_bytes() const;

  void detect(Nanos now);
  void collect(Nanos now);

  CoreOptions options_;
  // The members by name: a hash map (members() sorts its view by name), its nodes stable, so the
  // pointers in order_, live_, dead_ and hot_ stay valid until the member is erased. order_ lists
  // them all, for the rare passes over every member.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, Member, NameHash, std::equal_to<>> members_;
  std::vector<Member*> order_;
  // Every member but ourselves is in exactly one of live_ and dead_ (list_index is its place);
  // hot_ holds members that may be stale or fresh (make_digest prunes it). With these a digest
  // or a round touches the members it picks, not all of them.
  std::vector<Member*> live_, dead_, hot_;
  uint64_t mark_epoch_ = 0;
  Member* self_ = nullptr;
  // Scratch buffers reused by make_digest and tick (no allocation per packet).
  std::vector<Member*> stale_, fresh_, rest_;
  std::deque<std::pair<std::string, uint64_t>> gc_order_;
  std::map<std::string, uint64_t> gced_;  // name -> highest forgotten generation
  std::vector<PeerAddr> seeds_;
  std::mt19937_64 rng_;
  CoreStats stats_;
};

}  // namespace cgn::gossip
