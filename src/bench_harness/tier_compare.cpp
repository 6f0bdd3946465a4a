#include "bench_harness/tier_compare.h"

#include <fmt/format.h>

#include "bench_harness/cluster_sim_pd.h"
#include "routing/policies.h"

namespace cgn::bench {
namespace {

double share(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

const PolicyResult* row_of(const TierLevelReport& lr, std::string_view config) {
  for (const auto& row : lr.rows) {
    if (row.config == config) {
      return &row.r;
    }
  }
  return nullptr;
}

// One sentence: whether kv+tiers beat kv on TTFT at this level, and by how much.
std::string verdict(const TierLevelReport& lr) {
  const PolicyResult* base = row_of(lr, "kv");
  const PolicyResult* tiers = row_of(lr, "kv+tiers");
  if (base == nullptr || tiers == nullptr || tiers->ttft_p50_s <= 0 || tiers->ttft_p90_s <= 0) {
    return "";
  }
  const double p50 = base->ttft_p50_s / tiers->ttft_p50_s;
  const double p90 = base->ttft_p90_s / tiers->ttft_p90_s;
  const bool pays = p50 > 1.05 || p90 > 1.05;
  return fmt::format(
      "Tiers {} at this level: kv+tiers against kv, TTFT p50 {:.2f}x, p90 {:.2f}x, recomputed prompt "
      "tokens {:.1f}% of kv's.\n",
      pays ? "pay off" : "do not pay off", p50, p90,
      share(tiers->prompt_tokens - tiers->cached_tokens, base->prompt_tokens - base->cached_tokens));
}

}  // namespace

std::vector<TierLevelReport> run_tier_comparison(const Workload& w, const ClusterConfig& c,
                                                 const std::vector<double>& levels, uint32_t pd_prefill) {
  ClusterConfig plain = c;
  plain.tiers = TierConfig{};
  const routing::Policy* kv = routing::builtin_policy("kv");
  const routing::Policy* rr = routing::builtin_policy("round_robin");
  std::vector<TierLevelReport> out;
  for (double u : levels) {
    TierLevelReport lr;
    lr.level = load_level(w, c, u);
    lr.rows.push_back({"kv", run_policy(w, lr.level, kv, plain)});
    lr.rows.push_back({"kv+tiers", run_policy(w, lr.level, kv, c)});
    lr.rows.push_back({"round_robin+tiers", run_policy(w, lr.level, rr, c)});
    if (pd_prefill > 0 && pd_prefill < c.nodes) {
      PdResult pd = run_pd(w, lr.level, pd_prefill, c);
      lr.rows.push_back({fmt::format("disagg-cgn {}:{}", pd.prefill_nodes, pd.decode_nodes), pd.r});
    }
    out.push_back(std::move(lr));
  }
  return out;
}

std::string render_tier_markdown(const std::vector<TierLevelReport>& r, const ClusterConfig& c) {
  std::string md = fmt::format(
      "# KV offload tiers: {} nodes, RAM tier {} blocks, SSD tier {} blocks per node "
      "({} tokens per block, HBM {} blocks)\n\n",
      c.nodes, c.tiers.ram_blocks, c.tiers.ssd_blocks, c.node_model.block_size, c.node_model.num_gpu_blocks);
  for (const auto& lr : r) {
    md += fmt::format("## Level {:.2f} ({:.2f} req/s)\n\n", lr.level.utilisation, lr.level.rate_rps);
    md +=
        "| config | hit HBM | hit RAM | hit SSD | hit total | TTFT p50 (s) | TTFT p90 (s) | recomputed "
        "prompt tokens | completed | errors+shed |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& row : lr.rows) {
      const PolicyResult& p = row.r;
      const uint64_t tier = p.loaded_ram_tokens + p.loaded_ssd_tokens;
      md += fmt::format(
          "| {} | {:.1f}% | {:.1f}% | {:.1f}% | {:.1f}% | {:.3f} | {:.3f} | {} | {} | {} |\n", row.config,
          share(p.cached_tokens - std::min(tier, p.cached_tokens), p.prompt_tokens),
          share(p.loaded_ram_tokens, p.prompt_tokens), share(p.loaded_ssd_tokens, p.prompt_tokens),
          share(p.cached_tokens, p.prompt_tokens), p.ttft_p50_s, p.ttft_p90_s,
          p.prompt_tokens - std::min(p.prompt_tokens, p.cached_tokens), p.completed, p.errors + p.shed);
    }
    md += '\n';
    md += verdict(lr);
    md += '\n';
  }
  return md;
}

}  // namespace cgn::bench
