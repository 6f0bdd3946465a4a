// cgn-gossip: one gossip member on its own, for tests, demos and debugging a cluster.
//   cgn-gossip --name N --listen 127.0.0.1:0 --seed HOST:PORT [--record-file R.json]
//              [--cluster ID] (--secret-env VAR [--rotation-secret-env VAR2] | --insecure)
//              [--port-file F] [--status-file S]
// With --record-file it publishes that node record (re-read every second) like an agent does;
// without, it joins as a plain member (like the router). --status-file is rewritten (atomically)
// every 200 ms with the member's view: members (name, generation, live, addr, keys) and counters.
#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/log.h"
#include "state/gossip/gossip_store.h"

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) {
    s.pop_back();
  }
  return s;
}

void write_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << content;
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
}

std::string status_json(const cgn::gossip::GossipNode& node) {
  using cgn::gossip::WireError;
  nlohmann::json j;
  j["name"] = node.name();
  j["generation"] = node.generation();
  nlohmann::json members = nlohmann::json::array();
  for (const auto& m : node.members()) {
    nlohmann::json e;
    e["name"] = m.name;
    e["generation"] = m.generation;
    e["live"] = m.live;
    e["self"] = m.self;
    e["addr"] = m.addr.to_string();
    e["heartbeat"] = m.heartbeat;
    e["kvs"] = m.kvs;
    members.push_back(e);
  }
  j["members"] = members;
  const auto s = node.stats();
  nlohmann::json rejected;
  for (auto r : {WireError::kSize, WireError::kMagic, WireError::kVersion, WireError::kAuth,
                 WireError::kMalformed, WireError::kBadCluster}) {
    rejected[std::string(cgn::gossip::to_string(r))] = s.rejected[static_cast<size_t>(r)];
  }
  j["rejected"] = rejected;
  j["packets_in"] = s.packets_in;
  j["packets_out"] = s.packets_out;
  j["superseded"] = s.superseded;
  j["members_dead"] = s.members_dead;
  return j.dump();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cgn;
  CLI::App app{"cgn-gossip: one gossip member (tests, demos, debugging)"};
  std::string name;
  std::string listen = "127.0.0.1:0";
  std::vector<std::string> seeds;
  std::string cluster = "cognitora";
  std::string secret_env;
  std::string record_file;
  std::string port_file;
  std::string status_file;
  std::string log_level = "info";
  app.add_option("--name", name, "Member name (the node id when publishing a record)")->required();
  app.add_option("--listen", listen, "UDP HOST:PORT (port 0 picks one)");
  app.add_option("--seed", seeds, "Seed HOST:PORT (repeatable)");
  app.add_option("--cluster", cluster, "Cluster id");
  app.add_option("--secret-env", secret_env, "Environment variable holding the HMAC key");
  std::string rotation_env;
  bool insecure = false;
  app.add_option("--rotation-secret-env", rotation_env,
                 "Environment variable holding a second key accepted while keys rotate");
  app.add_flag("--insecure", insecure, "Run without a key (unsigned packets; anyone may join)");
  app.add_option("--record-file", record_file, "Node record JSON to publish (re-read every second)");
  app.add_option("--port-file", port_file, "Write the bound UDP port here");
  app.add_option("--status-file", status_file, "Rewrite this file with the member's view every 200 ms");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off");
  CLI11_PARSE(app, argc, argv);
  log::set_level(log_level);

  config::GossipConfig cfg;
  cfg.listen = listen;
  cfg.seeds = seeds;
  cfg.cluster_id = cluster;
  if (!secret_env.empty()) {
    const char* v = std::getenv(secret_env.c_str());
    cfg.secret = config::Secret(v != nullptr ? v : "", secret_env);
  }
  if (!rotation_env.empty()) {
    const char* v = std::getenv(rotation_env.c_str());
    cfg.rotation_secret = config::Secret(v != nullptr ? v : "", rotation_env);
  }
  cfg.insecure = insecure;
  auto opts = gossip::node_options_from_config(cfg, name);
  if (!opts) {
    std::cerr << "cgn-gossip: " << opts.error().message << "\n";
    return 2;
  }
  auto node = gossip::GossipNode::create(*opts);
  if (!node) {
    std::cerr << "cgn-gossip: " << node.error().message << "\n";
    return 2;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  gossip::RecordPublisher publisher(
      std::move(*node), [&] { return record_file.empty() ? std::string() : read_all(record_file); });
  gossip::GossipNode& member = publisher.node();
  Result<uint16_t, gossip::NodeError> port = make_error(gossip::NodeError::kStart, "");
  if (record_file.empty()) {
    port = member.start();
  } else {
    port = publisher.start();
  }
  if (!port) {
    std::cerr << "cgn-gossip: " << port.error().message << "\n";
    return 1;
  }
  if (!port_file.empty()) {
    write_atomic(port_file, std::to_string(*port) + "\n");
  }
  std::atomic<bool> stop{false};
  std::thread status([&] {
    while (!stop.load()) {
      if (!status_file.empty()) {
        write_atomic(status_file, status_json(member));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  int sig = 0;
  sigwait(&set, &sig);
  stop = true;
  status.join();
  publisher.stop();
  member.stop();
  return 0;
}
