// cgn-ctl's verbs as a registry: each verb file adds its commands (name, help, options) and the
// function that runs them. ctl_app.cpp builds the command line from the registry, so a new verb
// is one register_* call and no edit elsewhere.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "ctl/ctl_context.h"

namespace cgn::ctl {

using VerbRun = std::function<int(Ctx&)>;

struct Verb {
  std::string name;  // "status", or "policy set" for a nested command
  std::string help;
  // Adds the verb's options and arguments to `cmd`; returns what runs it (it owns their storage).
  std::function<VerbRun(CLI::App& cmd)> setup;
};

using Registry = std::vector<Verb>;

void register_cluster_verbs(Registry& r);  // status, nodes, cordon, uncordon, drain
void register_policy_verbs(Registry& r);   // policy get, policy set
void register_tool_verbs(Registry& r);     // routes explain, bench, version, up, down
void register_install_verbs(Registry& r);  // install, uninstall

// Shared by verbs: one node's record and cordon flag from etcd.
struct NodeRow {
  std::string id;
  std::string address;
  std::string engine;
  std::string models;
  std::string role;
  bool ready = false;
  double queue = 0;
  double kv_used = 0;
  std::string gpu;
  bool cordoned = false;
  uint64_t kv_epoch = 0;
  int64_t heartbeat_age_s = -1;  // granted TTL - remaining; -1: unknown
  std::optional<double> power_watts;
};
// Every node in etcd; the error code has been printed.
Result<std::vector<NodeRow>, int> etcd_nodes(Ctx& ctx, etcd::EtcdClient& client);

}  // namespace cgn::ctl
