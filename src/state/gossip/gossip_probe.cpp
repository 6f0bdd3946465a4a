#include "state/gossip/gossip_probe.h"

namespace cgn::gossip {

namespace {
constexpr WireError kReasons[] = {WireError::kSize, WireError::kMagic,     WireError::kVersion,
                                  WireError::kAuth, WireError::kMalformed, WireError::kBadCluster};
}

GossipProbe::GossipProbe(metrics::Registry& registry, const GossipNode& node)
    : registry_(registry), node_(node) {
  // Every series exists from the start, so a scrape shows zeros before anything happened.
  auto& packets =
      registry_.counter("cgn_gossip_packets_total", "Gossip datagrams sent and received.", {"direction"});
  packets_in_ = packets.with({"in"});
  packets_out_ = packets.with({"out"});
  auto& bytes = registry_.counter("cgn_gossip_bytes_total", "Gossip bytes sent and received.", {"direction"});
  bytes_in_ = bytes.with({"in"});
  bytes_out_ = bytes.with({"out"});
  auto& rejected = registry_.counter("cgn_gossip_packets_rejected_total",
                                     "Gossip datagrams dropped, by reason.", {"reason"});
  for (auto r : kReasons) {
    rejected_[static_cast<size_t>(r)] = rejected.with({std::string(to_string(r))});
  }
  auto& members = registry_.gauge("cgn_gossip_members", "Gossip members known, by state.", {"state"});
  live_ = members.with({"live"});
  dead_ = members.with({"dead"});
  deaths_ = registry_.counter("cgn_gossip_member_deaths_total", "Members the failure detector declared dead.")
                .with({});
  supersedes_ = registry_
                    .counter("cgn_gossip_generation_supersedes_total",
                             "Member incarnations replaced by a newer generation (restarts).")
                    .with({});
  cut_ = registry_.counter("cgn_gossip_deltas_cut_total", "Deltas cut to fit one datagram.").with({});
  sampled_ =
      registry_
          .counter("cgn_gossip_digests_sampled_total", "Digests that listed only part of the membership.")
          .with({});
  conflicts_ =
      registry_
          .counter("cgn_gossip_name_conflicts_total", "Packets from another process using our member name.")
          .with({});
  callback_ = registry_.add_collect_callback([this] { collect(); });
}

GossipProbe::~GossipProbe() {
  registry_.remove_collect_callback(callback_);
}

void GossipProbe::collect() {
  std::lock_guard lock(mu_);
  const CoreStats s = node_.stats();
  auto bump = [](const metrics::Counter& c, uint64_t now, uint64_t before) {
    if (now > before) {
      c.inc(now - before);
    }
  };
  bump(packets_in_, s.packets_in, last_.packets_in);
  bump(packets_out_, s.packets_out, last_.packets_out);
  bump(bytes_in_, s.bytes_in, last_.bytes_in);
  bump(bytes_out_, s.bytes_out, last_.bytes_out);
  for (size_t i = 0; i < 6; ++i) {
    bump(rejected_[i], s.rejected[i], last_.rejected[i]);
  }
  bump(deaths_, s.members_dead, last_.members_dead);
  bump(supersedes_, s.superseded, last_.superseded);
  bump(cut_, s.deltas_cut, last_.deltas_cut);
  bump(sampled_, s.digests_sampled, last_.digests_sampled);
  bump(conflicts_, s.name_conflicts, last_.name_conflicts);
  last_ = s;
  size_t live = 0;
  size_t dead = 0;
  for (const auto& m : node_.members()) {
    (m.live ? live : dead) += 1;
  }
  live_.set(static_cast<double>(live));
  dead_.set(static_cast<double>(dead));
}

}  // namespace cgn::gossip
