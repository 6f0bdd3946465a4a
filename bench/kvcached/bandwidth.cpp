#include "bandwidth.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "targets.h"

namespace cgn::kvbench {
namespace {

using Clock = std::chrono::steady_clock;

template <class T>
Error<BenchError> target_error(const Error<T>& e) {
  return make_error(BenchError::kTarget, std::string(kvcached::to_string(e.code)) + ": " + e.message);
}

// The first error any thread met.
class FirstError {
 public:
  void set(Error<BenchError> e) {
    std::lock_guard lock(mu_);
    if (!err_) {
      err_ = std::move(e);
    }
    failed_.store(true, std::memory_order_relaxed);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  std::optional<Error<BenchError>> take() { return std::move(err_); }

 private:
  std::mutex mu_;
  std::atomic<bool> failed_{false};
  std::optional<Error<BenchError>> err_;
};

Result<std::vector<std::unique_ptr<BlockConn>>, BenchError> open_all(const ConnFactory& open,
                                                                     uint32_t threads) {
  std::vector<std::unique_ptr<BlockConn>> conns;
  for (uint32_t t = 0; t < threads; ++t) {
    auto c = open(t);
    if (!c) {
      return c.error();
    }
    conns.push_back(std::move(*c));
  }
  return conns;
}

// Runs body(t) on `threads` threads released together: the wall time from the first thread's
// start to the last thread's end (each thread reads the clock itself, so a releasing thread
// that is scheduled late cannot shorten the measurement).
double timed_parallel(uint32_t threads, const std::function<void(uint32_t)>& body) {
  std::barrier start(static_cast<std::ptrdiff_t>(threads));
  std::vector<Clock::time_point> begin(threads);
  std::vector<Clock::time_point> end(threads);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (uint32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      begin[t] = Clock::now();
      body(t);
      end[t] = Clock::now();
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  return std::chrono::duration<double>(*std::max_element(end.begin(), end.end()) -
                                       *std::min_element(begin.begin(), begin.end()))
      .count();
}

class MemcpyConn final : public BlockConn {
 public:
  MemcpyConn(uint64_t block_bytes, uint64_t blocks) : block_bytes_(block_bytes), blocks_(blocks) {
    region_.reset(new uint8_t[block_bytes * blocks]);
    std::memset(region_.get(), 0, block_bytes * blocks);  // fault every page in before timing
  }
  Status<BenchError> put(uint64_t id, std::span<const uint8_t> value) override {
    std::memcpy(slot(id), value.data(), value.size());
    return Ok{};
  }
  Result<uint64_t, BenchError> get(uint64_t id, std::span<uint8_t> out) override {
    std::memcpy(out.data(), slot(id), block_bytes_);
    return block_bytes_;
  }

 private:
  uint8_t* slot(uint64_t id) { return region_.get() + (id % blocks_) * block_bytes_; }
  uint64_t block_bytes_;
  uint64_t blocks_;
  std::unique_ptr<uint8_t[]> region_;
};

struct RedisDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisPtr = std::unique_ptr<redisContext, RedisDeleter>;
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

Result<RedisPtr, BenchError> redis_connect(const std::string& host, int port, const std::string& unix_path) {
  RedisPtr c(unix_path.empty() ? redisConnect(host.c_str(), port) : redisConnectUnix(unix_path.c_str()));
  const std::string where = unix_path.empty() ? host + ":" + std::to_string(port) : unix_path;
  if (!c) {
    return make_error(BenchError::kTarget, "redis " + where + ": out of memory");
  }
  if (c->err != 0) {
    return make_error(BenchError::kTarget, "redis " + where + ": " + c->errstr);
  }
  return c;
}

// The reply, or an error naming the context's failure or Redis's error reply.
Result<ReplyPtr, BenchError> redis_reply(redisContext* c, void* raw) {
  ReplyPtr r(static_cast<redisReply*>(raw));
  if (!r) {
    return make_error(BenchError::kTarget, std::string("redis: ") + c->errstr);
  }
  if (r->type == REDIS_REPLY_ERROR) {
    return make_error(BenchError::kTarget, std::string("redis: ") + std::string(r->str, r->len));
  }
  return r;
}

class RedisConn final : public BlockConn {
 public:
  explicit RedisConn(RedisPtr c) : c_(std::move(c)) {}
  Status<BenchError> put(uint64_t id, std::span<const uint8_t> value) override {
    const std::string key = "cgn:" + std::to_string(id);
    auto r = redis_reply(
        c_.get(), redisCommand(c_.get(), "SET %b %b", key.data(), key.size(), value.data(), value.size()));
    if (!r) {
      return r.error();
    }
    return Ok{};
  }
  Result<uint64_t, BenchError> get(uint64_t id, std::span<uint8_t> out) override {
    const std::string key = "cgn:" + std::to_string(id);
    auto r = redis_reply(c_.get(), redisCommand(c_.get(), "GET %b", key.data(), key.size()));
    if (!r) {
      return r.error();
    }
    if ((*r)->type != REDIS_REPLY_STRING) {
      return make_error(BenchError::kTarget, "redis: no value under " + key);
    }
    const auto len = static_cast<uint64_t>((*r)->len);
    if (len > out.size()) {
      return make_error(BenchError::kTarget, "redis: value under " + key + " larger than the buffer");
    }
    std::memcpy(out.data(), (*r)->str, len);
    return len;
  }

 private:
  RedisPtr c_;
};

class GrpcConn final : public BlockConn {
 public:
  explicit GrpcConn(std::unique_ptr<kvcached::KvClient> c) : c_(std::move(c)), ns_(bench_namespace()) {}
  Status<BenchError> put(uint64_t id, std::span<const uint8_t> value) override {
    auto r = c_->put(ns_, block_digest(id), value);
    if (!r) {
      return target_error(r.error());
    }
    return Ok{};
  }
  Result<uint64_t, BenchError> get(uint64_t id, std::span<uint8_t> out) override {
    auto r = c_->get(ns_, block_digest(id), out);
    if (!r) {
      return target_error(r.error());
    }
    return *r;
  }

 private:
  std::unique_ptr<kvcached::KvClient> c_;
  kvcache::BlockNamespace ns_;
};

// The fast path's batch calls: kMaxBatchKeys keys a frame, every key's failure reported.
template <class Results>
Status<BenchError> all_ok(const Results& results, std::span<const uint64_t> ids, const char* what) {
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) {
      return make_error(BenchError::kTarget, std::string(what) + " of block " + std::to_string(ids[i]) +
                                                 ": " + std::string(kvcached::to_string(*results[i].error)));
    }
  }
  return Ok{};
}

class LocalConn final : public BlockConn {
 public:
  LocalConn(std::unique_ptr<kvcached::LocalClient> c, kvcache::KeyDeriver keys)
      : c_(std::move(c)), keys_(std::move(keys)) {}
  Status<BenchError> put(uint64_t id, std::span<const uint8_t> value) override {
    auto r = c_->put(keys_.key(block_digest(id)), value);
    if (!r) {
      return target_error(r.error());
    }
    return Ok{};
  }
  Result<uint64_t, BenchError> get(uint64_t id, std::span<uint8_t> out) override {
    auto r = c_->get(keys_.key(block_digest(id)), out);
    if (!r) {
      return target_error(r.error());
    }
    return *r;
  }
  Status<BenchError> put_many(std::span<const uint64_t> ids,
                              std::span<const std::span<const uint8_t>> values) override {
    auto r = c_->put_many(keys_of(ids), values);
    if (!r) {
      return target_error(r.error());
    }
    return all_ok(*r, ids, "put");
  }
  Result<std::vector<uint64_t>, BenchError> get_many(std::span<const uint64_t> ids,
                                                     std::span<const std::span<uint8_t>> outs) override {
    auto r = c_->get_many(keys_of(ids), outs);
    if (!r) {
      return target_error(r.error());
    }
    if (auto st = all_ok(*r, ids, "get"); !st) {
      return st.error();
    }
    std::vector<uint64_t> lengths;
    for (const auto& k : *r) {
      lengths.push_back(k.length);
    }
    return lengths;
  }

 private:
  const std::vector<kvcache::BlockKey>& keys_of(std::span<const uint64_t> ids) {
    keys_buf_.clear();
    for (const uint64_t id : ids) {
      keys_buf_.push_back(keys_.key(block_digest(id)));
    }
    return keys_buf_;
  }
  std::vector<kvcache::BlockKey> keys_buf_;
  std::unique_ptr<kvcached::LocalClient> c_;
  kvcache::KeyDeriver keys_;
};

// A pooled connection, used but not owned.
class BorrowedConn final : public BlockConn {
 public:
  explicit BorrowedConn(BlockConn& c) : c_(c) {}
  Status<BenchError> put(uint64_t id, std::span<const uint8_t> value) override { return c_.put(id, value); }
  Result<uint64_t, BenchError> get(uint64_t id, std::span<uint8_t> out) override { return c_.get(id, out); }
  Status<BenchError> put_many(std::span<const uint64_t> ids,
                              std::span<const std::span<const uint8_t>> values) override {
    return c_.put_many(ids, values);
  }
  Result<std::vector<uint64_t>, BenchError> get_many(std::span<const uint64_t> ids,
                                                     std::span<const std::span<uint8_t>> outs) override {
    return c_.get_many(ids, outs);
  }

 private:
  BlockConn& c_;
};

void stamp(std::span<uint8_t> block, uint64_t id) {
  std::memcpy(block.data(), &id, sizeof id);
}
uint64_t stamp_of(std::span<const uint8_t> block) {
  uint64_t id = 0;
  std::memcpy(&id, block.data(), sizeof id);
  return id;
}

}  // namespace

Result<BandwidthResult, BenchError> measure_bandwidth(const ConnFactory& open, const BandwidthSpec& spec) {
  if (spec.block_bytes < 8 || spec.threads == 0 || spec.blocks_per_thread == 0) {
    return make_error(BenchError::kInput, "block bytes >= 8, threads >= 1 and blocks >= 1 required");
  }
  auto conns = open_all(open, spec.threads);
  if (!conns) {
    return conns.error();
  }
  // Each thread's buffers: one per block of a batch, at most kMaxBatchBufferBytes together (the
  // one-block paths and memcpy copy from one buffer that stays in cache; a batch's buffers should
  // too, or the batch is measured against a colder source).
  const uint64_t batch = std::clamp<uint64_t>(
      std::min<uint64_t>(spec.batch, kMaxBatchBufferBytes / spec.block_bytes), 1, spec.blocks_per_thread);
  std::vector<std::vector<std::vector<uint8_t>>> bufs(spec.threads);
  for (uint32_t t = 0; t < spec.threads; ++t) {
    bufs[t].resize(batch);
    for (auto& b : bufs[t]) {
      b.resize(spec.block_bytes);
      fill_block(spec.first_id + t, b);
    }
  }
  FirstError err;
  const auto id_of = [&](uint32_t t, uint64_t i) { return spec.first_id + t * spec.blocks_per_thread + i; };
  const auto check = [&](uint64_t id, uint64_t got, std::span<const uint8_t> buf) {
    if (got != spec.block_bytes || stamp_of(buf) != id) {
      err.set(make_error(BenchError::kVerify, "block " + std::to_string(id) + " read back wrong (" +
                                                  std::to_string(got) + " bytes, stamp " +
                                                  std::to_string(stamp_of(buf)) + ")"));
    }
  };
  BandwidthResult res;
  res.put.seconds = timed_parallel(spec.threads, [&](uint32_t t) {
    BlockConn& c = *(*conns)[t];
    auto& buf = bufs[t];
    std::vector<uint64_t> ids;
    std::vector<std::span<const uint8_t>> values;
    for (uint64_t i = 0; i < spec.blocks_per_thread && !err.failed(); i += batch) {
      const uint64_t n = std::min(batch, spec.blocks_per_thread - i);
      if (batch == 1) {
        const uint64_t id = id_of(t, i);
        stamp(buf[0], id);
        if (auto st = c.put(id, buf[0]); !st) {
          err.set(make_error(BenchError::kTarget,
                             "put of block " + std::to_string(id) + ": " + st.error().message));
        }
        continue;
      }
      ids.clear();
      values.clear();
      for (uint64_t j = 0; j < n; ++j) {
        ids.push_back(id_of(t, i + j));
        stamp(buf[j], ids.back());
        values.emplace_back(buf[j]);
      }
      if (auto st = c.put_many(ids, values); !st) {
        err.set(make_error(BenchError::kTarget, "put_many: " + st.error().message));
      }
    }
  });
  res.put.bytes = spec.block_bytes * spec.blocks_per_thread * spec.threads;
  res.get.seconds = timed_parallel(spec.threads, [&](uint32_t t) {
    BlockConn& c = *(*conns)[t];
    auto& buf = bufs[t];
    std::vector<uint64_t> ids;
    std::vector<std::span<uint8_t>> outs;
    for (uint32_t round = 0; round < spec.get_rounds && !err.failed(); ++round) {
      for (uint64_t i = 0; i < spec.blocks_per_thread && !err.failed(); i += batch) {
        const uint64_t n = std::min(batch, spec.blocks_per_thread - i);
        if (batch == 1) {
          const uint64_t id = id_of(t, i);
          auto got = c.get(id, buf[0]);
          if (!got) {
            err.set(make_error(BenchError::kTarget,
                               "get of block " + std::to_string(id) + ": " + got.error().message));
          } else {
            check(id, *got, buf[0]);
          }
          continue;
        }
        ids.clear();
        outs.clear();
        for (uint64_t j = 0; j < n; ++j) {
          ids.push_back(id_of(t, i + j));
          outs.emplace_back(buf[j]);
        }
        auto got = c.get_many(ids, outs);
        if (!got) {
          err.set(make_error(BenchError::kTarget, "get_many: " + got.error().message));
          continue;
        }
        for (uint64_t j = 0; j < n; ++j) {
          check(ids[j], (*got)[j], buf[j]);
        }
      }
    }
  });
  res.get.bytes = spec.block_bytes * spec.blocks_per_thread * spec.threads * spec.get_rounds;
  if (auto e = err.take()) {
    return *e;
  }
  return res;
}

Result<Rate, BenchError> measure_reads(const ConnFactory& open, std::span<const uint64_t> ids,
                                       uint64_t block_bytes, uint32_t threads) {
  if (threads == 0 || ids.empty()) {
    return make_error(BenchError::kInput, "no blocks to read");
  }
  auto conns = open_all(open, threads);
  if (!conns) {
    return conns.error();
  }
  std::vector<std::vector<uint8_t>> bufs(threads, std::vector<uint8_t>(block_bytes));
  FirstError err;
  Rate rate;
  rate.seconds = timed_parallel(threads, [&](uint32_t t) {
    const size_t per = (ids.size() + threads - 1) / threads;
    for (size_t i = t * per; i < std::min(ids.size(), (t + 1) * per) && !err.failed(); ++i) {
      auto got = (*conns)[t]->get(ids[i], bufs[t]);
      if (!got) {
        err.set(make_error(BenchError::kTarget,
                           "get of block " + std::to_string(ids[i]) + ": " + got.error().message));
      } else if (*got != block_bytes) {
        err.set(make_error(BenchError::kVerify, "block " + std::to_string(ids[i]) + " has " +
                                                    std::to_string(*got) + " bytes, not " +
                                                    std::to_string(block_bytes)));
      }
    }
  });
  rate.bytes = block_bytes * ids.size();
  if (auto e = err.take()) {
    return *e;
  }
  return rate;
}

ConnFactory ConnPool::factory() {
  return [this](uint32_t t) -> Result<std::unique_ptr<BlockConn>, BenchError> {
    while (conns_.size() <= t) {
      auto c = open_(static_cast<uint32_t>(conns_.size()));
      if (!c) {
        return c.error();
      }
      conns_.push_back(std::move(*c));
    }
    return std::unique_ptr<BlockConn>(std::make_unique<BorrowedConn>(*conns_[t]));
  };
}

ConnFactory memcpy_conns(uint64_t block_bytes, uint64_t blocks) {
  return [=](uint32_t) -> Result<std::unique_ptr<BlockConn>, BenchError> {
    return std::unique_ptr<BlockConn>(std::make_unique<MemcpyConn>(block_bytes, blocks));
  };
}

ConnFactory redis_conns(const std::string& host, int port, const std::string& unix_path) {
  return [=](uint32_t) -> Result<std::unique_ptr<BlockConn>, BenchError> {
    auto c = redis_connect(host, port, unix_path);
    if (!c) {
      return c.error();
    }
    return std::unique_ptr<BlockConn>(std::make_unique<RedisConn>(std::move(*c)));
  };
}

Status<BenchError> redis_flushall(const std::string& host, int port, const std::string& unix_path) {
  auto c = redis_connect(host, port, unix_path);
  if (!c) {
    return c.error();
  }
  auto r = redis_reply(c->get(), redisCommand(c->get(), "FLUSHALL"));
  if (!r) {
    return r.error();
  }
  return Ok{};
}

ConnFactory grpc_conns(const std::string& target) {
  return [=](uint32_t) -> Result<std::unique_ptr<BlockConn>, BenchError> {
    auto c = kvcached::KvClient::connect(target, config::TlsConfig{});
    if (!c) {
      return target_error(c.error());
    }
    return std::unique_ptr<BlockConn>(std::make_unique<GrpcConn>(std::move(*c)));
  };
}

Status<BenchError> BlockConn::put_many(std::span<const uint64_t> ids,
                                       std::span<const std::span<const uint8_t>> values) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (auto st = put(ids[i], values[i]); !st) {
      return st;
    }
  }
  return Ok{};
}

Result<std::vector<uint64_t>, BenchError> BlockConn::get_many(std::span<const uint64_t> ids,
                                                              std::span<const std::span<uint8_t>> outs) {
  std::vector<uint64_t> lengths;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto got = get(ids[i], outs[i]);
    if (!got) {
      return got.error();
    }
    lengths.push_back(*got);
  }
  return lengths;
}

ConnFactory local_conns(const std::string& socket_path, bool prefault) {
  return [=](uint32_t) -> Result<std::unique_ptr<BlockConn>, BenchError> {
    auto c = kvcached::LocalClient::connect(socket_path, kvcached::LocalConnectOptions{.prefault = prefault});
    if (!c) {
      return target_error(c.error());
    }
    auto keys = kvcache::KeyDeriver::create(bench_namespace());
    if (!keys) {
      return make_error(BenchError::kInput, keys.error().message);
    }
    return std::unique_ptr<BlockConn>(std::make_unique<LocalConn>(std::move(*c), *keys));
  };
}

uint64_t drop_file_cache(const std::string& dir) {
  uint64_t files = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) {
      continue;
    }
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      continue;
    }
    ::fdatasync(fd);  // dirty pages cannot be dropped
    if (::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0) {
      ++files;
    }
    ::close(fd);
  }
  return files;
}

Result<Rate, BenchError> sequential_read(const std::string& dir, uint64_t buffer_bytes, bool direct) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file()) {
      files.push_back(e.path());
    }
  }
  if (ec) {
    return make_error(BenchError::kInput, dir + ": " + ec.message());
  }
  if (direct && buffer_bytes % 4096 != 0) {
    return make_error(BenchError::kInput, "O_DIRECT reads need a multiple of 4096 bytes");
  }
  drop_file_cache(dir);
  void* mem = nullptr;
  if (::posix_memalign(&mem, 4096, buffer_bytes) != 0) {
    return make_error(BenchError::kInput, "out of memory");
  }
  std::unique_ptr<uint8_t, decltype(&std::free)> buf(static_cast<uint8_t*>(mem), &std::free);
  Rate rate;
  const auto t0 = Clock::now();
  for (const auto& p : files) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
    if (fd < 0) {
      return make_error(BenchError::kInput, p.string() + ": " + std::strerror(errno));
    }
    for (;;) {
      const ssize_t n = ::read(fd, buf.get(), buffer_bytes);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n < 0) {
        const int saved = errno;
        ::close(fd);
        return make_error(BenchError::kInput, p.string() + ": " + std::strerror(saved));
      }
      if (n == 0) {
        break;
      }
      rate.bytes += static_cast<uint64_t>(n);
    }
    ::close(fd);
  }
  rate.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return rate;
}

}  // namespace cgn::kvbench
