// cgn-gossip's options and application object (state/gossip/member_app.h), without a process:
// the parser, a refused configuration, and two members on loopback that see each other and the
// published record through the status file.
#include "state/gossip/member_app.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "testing/process.h"

namespace cgn::gossip {
namespace {

CliResult<MemberOptions> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "cgn-gossip");
  return parse_member_options(static_cast<int>(args.size()), args.data());
}

TEST(GossipMemberOptions, help_is_status_zero_with_the_flags) {
  auto r = parse({"--help"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 0);
  EXPECT_NE(r.error().message.find("--status-file"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("--rotation-secret-env"), std::string::npos) << r.error().message;
}

TEST(GossipMemberOptions, name_is_required_and_unknown_flags_are_refused) {
  auto missing = parse({"--insecure"});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().code, 0);
  EXPECT_NE(missing.error().message.find("--name"), std::string::npos) << missing.error().message;
  auto unknown = parse({"--name", "a", "--bogus"});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().code, 0);
  EXPECT_NE(unknown.error().message.find("--bogus"), std::string::npos) << unknown.error().message;
}

TEST(GossipMemberOptions, flags_fill_the_struct) {
  auto r = parse({"--name",
                  "n1",
                  "--listen",
                  "127.0.0.1:9",
                  "--seed",
                  "127.0.0.1:1",
                  "--seed",
                  "127.0.0.1:2",
                  "--cluster",
                  "c",
                  "--secret-env",
                  "K",
                  "--rotation-secret-env",
                  "K2",
                  "--record-file",
                  "r.json",
                  "--port-file",
                  "p",
                  "--status-file",
                  "s",
                  "--log-level",
                  "warn"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->name, "n1");
  EXPECT_EQ(r->listen, "127.0.0.1:9");
  EXPECT_EQ(r->seeds, (std::vector<std::string>{"127.0.0.1:1", "127.0.0.1:2"}));
  EXPECT_EQ(r->cluster, "c");
  EXPECT_EQ(r->secret_env, "K");
  EXPECT_EQ(r->rotation_env, "K2");
  EXPECT_FALSE(r->insecure);
  EXPECT_EQ(r->record_file, "r.json");
  EXPECT_EQ(r->port_file, "p");
  EXPECT_EQ(r->status_file, "s");
  EXPECT_EQ(r->log_level, "warn");
}

TEST(GossipMemberApp, no_key_and_not_insecure_is_status_two_and_nothing_runs) {
  testing::TempDir dir;
  MemberOptions o;
  o.name = "m";
  o.port_file = dir.file("port");
  MemberApp app(o);
  auto r = app.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 2);
  EXPECT_EQ(r.error().message.rfind("cgn-gossip: ", 0), 0U) << r.error().message;
  EXPECT_NE(r.error().message.find("secret_env"), std::string::npos) << r.error().message;
  EXPECT_FALSE(std::filesystem::exists(o.port_file));
  app.stop();  // a no-op after a failed start
}

TEST(GossipMemberApp, a_port_file_that_cannot_be_written_fails_the_start_and_nothing_runs) {
  testing::TempDir dir;
  MemberOptions o;
  o.name = "m";
  o.insecure = true;
  o.port_file = dir.file("no-such-dir/port");
  MemberApp app(o);
  auto r = app.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 2);
  EXPECT_NE(r.error().message.find("--port-file"), std::string::npos) << r.error().message;
  app.stop();  // a no-op after a failed start
  // The member let go of its socket: the same name starts again on a fresh port.
  o.port_file = dir.file("port");
  MemberApp again(o);
  ASSERT_TRUE(again.start());
  again.stop();
}

TEST(GossipMemberApp, a_member_sees_the_record_another_publishes) {
  testing::TempDir dir;
  testing::write_file(dir.file("record.json"), "{\"node_id\":\"pub\",\"free_blocks\":7}\n");
  MemberOptions pub;
  pub.name = "pub";
  pub.insecure = true;
  pub.record_file = dir.file("record.json");
  pub.port_file = dir.file("pub.port");
  MemberApp publisher(pub);
  auto pub_port = publisher.start();
  ASSERT_TRUE(pub_port) << pub_port.error().message;
  EXPECT_EQ(testing::read_file(pub.port_file), std::to_string(*pub_port) + "\n");

  MemberOptions watch;
  watch.name = "watch";
  watch.insecure = true;
  watch.seeds = {"127.0.0.1:" + std::to_string(*pub_port)};
  watch.status_file = dir.file("status.json");
  MemberApp watcher(watch);
  ASSERT_TRUE(watcher.start());
  nlohmann::json last;
  const bool seen = testing::wait_until(
      [&] {
        last = nlohmann::json::parse(testing::read_file(watch.status_file), nullptr, false);
        if (!last.is_object() || last.value("name", "") != "watch") {
          return false;
        }
        for (const auto& m : last["members"]) {
          if (m.value("name", "") == "pub" && m.value("live", false) && m["kvs"].contains(kRecordKey)) {
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(20));
  EXPECT_TRUE(seen) << last.dump();
  EXPECT_TRUE(last.contains("rejected")) << last.dump();
  EXPECT_TRUE(last.contains("packets_in")) << last.dump();
  watcher.stop();
  watcher.stop();  // idempotent
  publisher.stop();
}

}  // namespace
}  // namespace cgn::gossip
