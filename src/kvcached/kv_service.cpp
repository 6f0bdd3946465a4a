#include "kvcached/kv_service.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "cognitora/v1/kvcached.grpc.pb.h"
#include "core/log.h"
#include "core/tls/grpc_server.h"
#include "core/tls/grpc_status.h"
#include "kvcached/key_cache.h"
#include "kvcached/kvcached_metrics.h"
#include "kvcached/wire.h"

namespace cgn::kvcached {

namespace pb = cognitora::v1;

namespace {

grpc::Status store_status(const Error<kvcache::StoreError>& e) {
  using kvcache::StoreError;
  switch (e.code) {
    case StoreError::kNotFound:
    case StoreError::kCorrupt:
      return {grpc::StatusCode::NOT_FOUND, e.message.empty() ? "no such block" : e.message};
    case StoreError::kTooLarge:
      return {grpc::StatusCode::INVALID_ARGUMENT, e.message};
    case StoreError::kNoSpace:
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, e.message};
    case StoreError::kBusy:
      return {grpc::StatusCode::ABORTED, e.message};
    case StoreError::kStopped:
      return {grpc::StatusCode::UNAVAILABLE, e.message};
    case StoreError::kConfig:
    case StoreError::kIo:
    case StoreError::kDiskFull:
      return {grpc::StatusCode::INTERNAL, e.message};
  }
  return {grpc::StatusCode::INTERNAL, e.message};
}

grpc::Status invalid(const std::string& message) {
  return {grpc::StatusCode::INVALID_ARGUMENT, message};
}

}  // namespace

uint64_t to_unix_ms(Nanos store_time, const Clock& clock) {
  if (store_time == 0) {
    return 0;
  }
  const auto now_unix = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  const int64_t ms = now_unix + (store_time - clock.now()) / kNanosPerMilli;
  return ms > 0 ? static_cast<uint64_t>(ms) : 1;
}

class KvGrpcServer::Service final : public pb::KvCache::Service {
 public:
  Service(kvcache::BlockStore& store, uint64_t max_block_bytes, KvcachedMetrics& metrics, const Clock& clock)
      : store_(store), max_block_bytes_(max_block_bytes), metrics_(metrics), clock_(clock) {}

  grpc::Status PutBlock(grpc::ServerContext* ctx, grpc::ServerReader<pb::PutBlockRequest>* reader,
                        pb::PutBlockResponse* resp) override {
    const InFlight call(*this);
    return counted("PutBlock", call.refused() ? stopping() : put_block(*ctx, *reader, *resp));
  }

  grpc::Status GetBlock(grpc::ServerContext* ctx, const pb::GetBlockRequest* req,
                        grpc::ServerWriter<pb::GetBlockChunk>* writer) override {
    const InFlight call(*this);
    return counted("GetBlock", call.refused() ? stopping() : get_block(*ctx, *req, *writer));
  }

  grpc::Status BatchLookup(grpc::ServerContext* /*ctx*/, const pb::BatchLookupRequest* req,
                           pb::BatchLookupResponse* resp) override {
    const InFlight call(*this);
    return counted("BatchLookup", call.refused() ? stopping() : batch_lookup(*req, *resp));
  }

  grpc::Status Stats(grpc::ServerContext* /*ctx*/, const pb::StatsRequest* /*req*/,
                     pb::StatsResponse* resp) override {
    const InFlight call(*this);
    if (call.refused()) {
      return counted("Stats", stopping());
    }
    encode_stats(store_.stats(), *resp);
    return counted("Stats", grpc::Status::OK);
  }

  // New calls are refused from now on; true once no call is running (or at `deadline`: false).
  bool drain(std::chrono::steady_clock::time_point deadline) {
    draining_ = true;
    while (in_flight_.load() > 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

 private:
  // Counts a running call; refused() when the server is draining.
  class InFlight {
   public:
    explicit InFlight(Service& s) : s_(s) {
      ++s_.in_flight_;
      refused_ = s_.draining_.load();
    }
    ~InFlight() { --s_.in_flight_; }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
    bool refused() const { return refused_; }

   private:
    Service& s_;
    bool refused_ = false;
  };

  static grpc::Status stopping() { return {grpc::StatusCode::UNAVAILABLE, "cgn-kvcached is stopping"}; }

  grpc::Status counted(std::string_view method, grpc::Status st) {
    metrics_.grpc_request(method, tls::grpc_status_name(st.error_code()));
    return st;
  }

  grpc::Status put_block(grpc::ServerContext& ctx, grpc::ServerReader<pb::PutBlockRequest>& reader,
                         pb::PutBlockResponse& resp) {
    pb::PutBlockRequest msg;
    if (!reader.Read(&msg)) {
      return invalid("an empty PutBlock stream (the first message carries the header)");
    }
    auto header = decode_put_header(msg, max_block_bytes_);
    if (!header) {
      return invalid(header.error().message);
    }
    const kvcache::BlockKey key = keys_.get(header->ns).key(header->digest);
    auto started = store_.put_start(key, header->length);
    if (!started) {
      return store_status(started.error());
    }
    if (!started->has_value()) {
      resp.set_already_resident(true);
      return grpc::Status::OK;
    }
    kvcache::PutHandle handle = std::move(**started);  // dropped without put_end: nothing visible
    const std::span<uint8_t> dst = handle.data();
    uint64_t filled = 0;
    for (bool first = true;; first = false) {
      if (!first) {
        if (auto st = check_put_continuation(msg); !st) {
          return invalid(st.error().message);
        }
      }
      const std::string& data = msg.data();
      if (data.size() > header->length - filled) {
        return invalid(fmt::format("the stream carries more than length ({}) bytes", header->length));
      }
      std::memcpy(dst.data() + filled, data.data(), data.size());
      filled += data.size();
      if (!reader.Read(&msg)) {
        break;
      }
    }
    if (ctx.IsCancelled()) {
      return {grpc::StatusCode::CANCELLED, "the PutBlock stream was cancelled; nothing was stored"};
    }
    if (filled != header->length) {
      return invalid(
          fmt::format("the stream carried {} bytes for a block of length {}", filled, header->length));
    }
    if (auto st = store_.put_end(std::move(handle)); !st) {
      return store_status(st.error());
    }
    return grpc::Status::OK;
  }

  grpc::Status get_block(grpc::ServerContext& ctx, const pb::GetBlockRequest& req,
                         grpc::ServerWriter<pb::GetBlockChunk>& writer) {
    auto r = decode_get(req);
    if (!r) {
      return invalid(r.error().message);
    }
    auto read = store_.get(keys_.get(r->ns).key(r->digest));
    if (!read) {
      return store_status(read.error());
    }
    const std::span<const uint8_t> bytes = read->data();
    pb::GetBlockChunk chunk;
    chunk.set_length(bytes.size());
    chunk.set_tier(std::string(kvcache::to_string(read->tier())));
    size_t pos = 0;
    do {
      const size_t n = std::min(kChunkBytes, bytes.size() - pos);
      chunk.set_data(bytes.data() + pos, n);
      pos += n;
      if (!writer.Write(chunk)) {
        return {grpc::StatusCode::CANCELLED, "the client went away"};
      }
      chunk.clear_length();
      chunk.clear_tier();
    } while (pos < bytes.size() && !ctx.IsCancelled());
    return grpc::Status::OK;
  }

  grpc::Status batch_lookup(const pb::BatchLookupRequest& req, pb::BatchLookupResponse& resp) {
    auto r = decode_lookup(req);
    if (!r) {
      return invalid(r.error().message);
    }
    const kvcache::KeyDeriver keys = keys_.get(r->ns);
    const Nanos lease = static_cast<Nanos>(r->lease_ms) * kNanosPerMilli;
    Nanos lease_until = 0;
    std::vector<kvcache::BlockKey> derived;
    for (const auto& digests : r->requests) {
      derived.clear();
      for (const auto& d : digests) {
        derived.push_back(keys.key(d));
      }
      const kvcache::LookupResult found = store_.lookup(derived, lease);
      auto* out = resp.add_results();
      for (auto t : found.tiers) {
        out->add_tiers(std::string(kvcache::to_string(t)));
      }
      lease_until = std::max(lease_until, found.lease_until);
    }
    resp.set_lease_until_unix_ms(to_unix_ms(lease_until, clock_));
    return grpc::Status::OK;
  }

  kvcache::BlockStore& store_;
  const uint64_t max_block_bytes_;
  KvcachedMetrics& metrics_;
  const Clock& clock_;
  KeyCache keys_;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> draining_{false};
};

Result<std::unique_ptr<KvGrpcServer>, ServiceError> KvGrpcServer::start(
    const std::string& listen, const config::TlsConfig& tls, kvcache::BlockStore& store,
    uint64_t max_block_bytes, KvcachedMetrics& metrics, const Clock& clock) {
  std::unique_ptr<KvGrpcServer> s(new KvGrpcServer());
  s->service_ = std::make_unique<Service>(store, max_block_bytes, metrics, clock);
  auto started = tls::start_grpc_server("KvCache gRPC", listen, tls, [&s](grpc::ServerBuilder& b) {
    b.RegisterService(s->service_.get());
    b.SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
    b.SetMaxSendMessageSize(static_cast<int>(kMaxMessageBytes));
  });
  if (!started) {
    return make_error(ServiceError::kListen, started.error().message);
  }
  s->server_ = std::move(started->server);
  s->port_ = started->port;
  return s;
}

KvGrpcServer::~KvGrpcServer() {
  stop(std::chrono::milliseconds(0));
}

void KvGrpcServer::stop(std::chrono::milliseconds grace) {
  if (!server_) {
    return;
  }
  // Running calls may finish within the grace; then the server shuts down at once (a plain
  // Shutdown(deadline) would also wait out the deadline for clients that merely stay connected).
  service_->drain(std::chrono::steady_clock::now() + grace);
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

}  // namespace cgn::kvcached
