// Shared pieces of the etcd integration tests (header-only, test code only).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "state/etcd/etcd_client.h"
#include "testing/etcd_server.h"
#include "testing/process.h"

namespace cgn::etcd::itest {

// One etcd for the tests that neither restart nor compact it; each test uses
// its own key prefix. Started on first use; stopped, and its tmpfs data dir
// removed, when the test binary exits (static destruction).
inline cgn::testing::EtcdServer& shared_etcd() {
  static cgn::testing::EtcdServer server;
  static const bool started = [] {
    bool ok = server.start();
    if (!ok) {
      ADD_FAILURE() << "etcd did not start:\n" << server.log();
    }
    return ok;
  }();
  (void)started;
  return server;
}

inline std::shared_ptr<EtcdClient> make_client(
    const std::string& endpoint, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  EtcdClientOptions o;
  o.endpoints = {endpoint};
  o.call_timeout = timeout;
  auto c = EtcdClient::create(o);
  EXPECT_TRUE(c.ok());
  return c.value();
}

// Waits until `client` reaches etcd again after a restart: its channel may still be in a
// reconnect backoff, in which calls fail at once (reads are safe to retry).
inline bool reconnected(EtcdClient& client) {
  return cgn::testing::wait_until([&] { return client.get("/").ok(); }, std::chrono::seconds(15),
                                  std::chrono::milliseconds(20));
}

// A key prefix unique to the running test.
inline std::string test_prefix() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string("/cgn-itest/") + info->test_suite_name() + "/" + info->name() + "/";
}

// test_prefix(), emptied first, so a repeated run (--gtest_repeat) starts clean.
inline std::string fresh_prefix(EtcdClient& client) {
  std::string p = test_prefix();
  EXPECT_TRUE(client.del_prefix(p).ok());
  return p;
}

}  // namespace cgn::etcd::itest
