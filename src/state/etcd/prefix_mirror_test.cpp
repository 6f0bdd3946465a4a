#include "state/etcd/prefix_mirror.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "state/etcd/watcher.h"

namespace cgn::etcd {
namespace {

KeyValue kv(const std::string& key, const std::string& value, int64_t mod) {
  KeyValue k;
  k.key = key;
  k.value = value;
  k.mod_revision = mod;
  return k;
}

WatchEvent put(const std::string& key, const std::string& value, int64_t rev) {
  return WatchEvent{WatchEvent::Type::kPut, kv(key, value, rev)};
}

WatchEvent del(const std::string& key, int64_t rev) {
  return WatchEvent{WatchEvent::Type::kDelete, kv(key, "", rev)};
}

// Records the callback stream as text.
struct Log {
  std::vector<std::string> lines;
  MirrorCallbacks callbacks() {
    MirrorCallbacks cb;
    cb.on_put = [this](const KeyValue& k) { lines.push_back("put " + k.key + "=" + k.value); };
    cb.on_delete = [this](const std::string& k, int64_t rev) {
      lines.push_back("del " + k + "@" + std::to_string(rev));
    };
    cb.on_reset = [this](int64_t rev) { lines.push_back("reset@" + std::to_string(rev)); };
    return cb;
  }
};

TEST(MirrorState, applies_events_in_order) {
  MirrorState s;
  Log log;
  s.apply({put("/a", "1", 5), put("/b", "1", 6), put("/a", "2", 7), del("/b", 8)}, log.callbacks());
  EXPECT_EQ(log.lines, (std::vector<std::string>{"put /a=1", "put /b=1", "put /a=2", "del /b@8"}));
  ASSERT_EQ(s.map().size(), 1u);
  EXPECT_EQ(s.map().at("/a").value, "2");
  EXPECT_EQ(s.revision(), 8);
}

TEST(MirrorState, ignores_delete_of_unknown_key) {
  MirrorState s;
  Log log;
  s.apply({del("/never", 3)}, log.callbacks());
  EXPECT_TRUE(log.lines.empty());
  EXPECT_EQ(s.revision(), 3);
}

TEST(MirrorState, reset_turns_the_difference_into_puts_and_deletes) {
  MirrorState s;
  Log log;
  s.apply({put("/same", "1", 2), put("/changed", "1", 3), put("/gone", "1", 4)}, log.callbacks());
  log.lines.clear();

  s.reset({kv("/changed", "2", 9), kv("/new", "1", 10), kv("/same", "1", 2)}, 12, log.callbacks());
  EXPECT_EQ(log.lines,
            (std::vector<std::string>{"del /gone@12", "put /changed=2", "put /new=1", "reset@12"}));
  EXPECT_EQ(s.map().size(), 3u);
  EXPECT_EQ(s.revision(), 12);
}

TEST(MirrorState, reset_from_empty_loads_everything) {
  MirrorState s;
  Log log;
  s.reset({kv("/a", "1", 1)}, 1, log.callbacks());
  EXPECT_EQ(log.lines, (std::vector<std::string>{"put /a=1", "reset@1"}));
}

TEST(WatchCursor, now_watch_is_pinned_by_created_revision) {
  WatchCursor c(0);
  EXPECT_EQ(c.next_revision(), 0);
  c.on_created(41);
  EXPECT_EQ(c.next_revision(), 42);
  c.on_created(50);  // a later reconnect does not move it forward past unseen events
  EXPECT_EQ(c.next_revision(), 42);
}

TEST(WatchCursor, resumes_after_last_delivered_and_drops_repeats) {
  WatchCursor c(10);
  c.on_created(20);
  EXPECT_EQ(c.next_revision(), 10);
  auto first = c.accept({put("/a", "1", 10), put("/b", "1", 11)});
  EXPECT_EQ(first.size(), 2u);
  EXPECT_EQ(c.next_revision(), 12);
  // A resent revision (11) after a reconnect is not delivered again.
  auto second = c.accept({put("/b", "1", 11), del("/a", 12)});
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].kv.mod_revision, 12);
  EXPECT_EQ(c.next_revision(), 13);
}

TEST(WatchCursor, keeps_every_event_of_one_revision) {
  WatchCursor c(5);
  // One txn at revision 5 touching two keys: both are delivered.
  auto got = c.accept({put("/a", "1", 5), del("/b", 5)});
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(c.next_revision(), 6);
}

TEST(WatchCursor, progress_moves_the_resume_point) {
  WatchCursor c(5);
  c.on_progress(30);
  EXPECT_EQ(c.next_revision(), 31);
  c.on_progress(10);  // never backwards
  EXPECT_EQ(c.next_revision(), 31);
}

}  // namespace
}  // namespace cgn::etcd
