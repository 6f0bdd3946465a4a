#include "kvcached/kv_client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <cstring>

#include "cognitora/v1/kvcached.grpc.pb.h"
#include "core/tls/grpc_channel.h"
#include "core/tls/grpc_tls.h"
#include "kvcached/wire.h"

namespace cgn::kvcached {

namespace pb = cognitora::v1;

namespace {

Error<ClientError> call_error(std::string_view method, const grpc::Status& st) {
  ClientError code = ClientError::kUnavailable;
  switch (st.error_code()) {
    case grpc::StatusCode::NOT_FOUND:
      code = ClientError::kNotFound;
      break;
    case grpc::StatusCode::INVALID_ARGUMENT:
      code = ClientError::kInvalid;
      break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      code = ClientError::kNoSpace;
      break;
    case grpc::StatusCode::ABORTED:
      code = ClientError::kBusy;
      break;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      code = ClientError::kConnect;
      break;
    default:
      break;
  }
  return make_error(code, fmt::format("KvCache.{}: {} (gRPC status {})", method, st.error_message(),
                                      static_cast<int>(st.error_code())));
}

}  // namespace

Result<std::unique_ptr<KvClient>, ClientError> KvClient::connect(const std::string& target,
                                                                 const config::TlsConfig& tls) {
  auto creds = tls::channel_credentials(tls);
  if (!creds) {
    return make_error(ClientError::kConnect, fmt::format("KvCache on {}: {}", target, creds.error().message));
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
  args.SetMaxSendMessageSize(static_cast<int>(kMaxMessageBytes));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  // A put is safe to send twice (a resident block is refreshed, not written again), a lookup
  // leases the same run again.
  tls::retry_once(args, "cognitora.v1.KvCache");
  std::unique_ptr<KvClient> c(new KvClient());
  c->channel_ = grpc::CreateCustomChannel(target, *creds, args);
  return c;
}

KvClient::~KvClient() = default;

bool KvClient::connected() const {
  return channel_->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY;
}

namespace {

void set_deadline(grpc::ClientContext& ctx, uint32_t timeout_ms) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
}

}  // namespace

Result<bool, ClientError> KvClient::put(const kvcache::BlockNamespace& ns, const Digest& digest,
                                        std::span<const uint8_t> value) {
  auto stub = pb::KvCache::NewStub(channel_);
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout_ms_);
  pb::PutBlockResponse resp;
  auto writer = stub->PutBlock(&ctx, &resp);
  pb::PutBlockRequest msg;
  set_namespace(ns, *msg.mutable_namespace_());
  msg.set_digest(digest.data(), digest.size());
  msg.set_length(value.size());
  size_t pos = 0;
  do {
    const size_t n = std::min(kChunkBytes, value.size() - pos);
    msg.set_data(value.data() + pos, n);
    pos += n;
    if (!writer->Write(msg)) {
      break;  // the daemon answered early (already resident) or failed: Finish says which
    }
    msg.Clear();
  } while (pos < value.size());
  writer->WritesDone();
  const grpc::Status st = writer->Finish();
  if (!st.ok()) {
    return call_error("PutBlock", st);
  }
  return resp.already_resident();
}

namespace {

// Streams a GetBlock into `sink(length)` -> the destination span.
template <class Sink>
Result<uint64_t, ClientError> stream_get(const std::shared_ptr<grpc::Channel>& channel, uint32_t timeout_ms,
                                         const kvcache::BlockNamespace& ns, const Digest& digest, Sink sink) {
  auto stub = pb::KvCache::NewStub(channel);
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout_ms);
  pb::GetBlockRequest req;
  set_namespace(ns, *req.mutable_namespace_());
  req.set_digest(digest.data(), digest.size());
  auto reader = stub->GetBlock(&ctx, req);
  pb::GetBlockChunk chunk;
  std::span<uint8_t> dst;
  uint64_t length = 0;
  uint64_t filled = 0;
  bool first = true;
  std::optional<Error<ClientError>> failed;
  while (reader->Read(&chunk)) {
    if (failed) {
      continue;
    }
    if (first) {
      first = false;
      length = chunk.length();
      auto d = sink(length);
      if (!d) {
        failed = d.error();
        ctx.TryCancel();
        continue;
      }
      dst = *d;
    }
    if (chunk.data().size() > length - filled) {
      failed = make_error(ClientError::kProtocol, "GetBlock: more bytes than the block's length");
      ctx.TryCancel();
      continue;
    }
    std::memcpy(dst.data() + filled, chunk.data().data(), chunk.data().size());
    filled += chunk.data().size();
  }
  const grpc::Status st = reader->Finish();
  if (failed) {
    return *failed;
  }
  if (!st.ok()) {
    return call_error("GetBlock", st);
  }
  if (first || filled != length) {
    return make_error(ClientError::kProtocol,
                      fmt::format("GetBlock: {} bytes of a block of length {}", filled, length));
  }
  return length;
}

}  // namespace

Result<std::vector<uint8_t>, ClientError> KvClient::get(const kvcache::BlockNamespace& ns,
                                                        const Digest& digest) {
  std::vector<uint8_t> out;
  auto n = stream_get(channel_, timeout_ms_, ns, digest,
                      [&](uint64_t length) -> Result<std::span<uint8_t>, ClientError> {
                        if (length > (uint64_t{1} << 36)) {
                          return make_error(ClientError::kProtocol, "GetBlock: an implausible length");
                        }
                        out.resize(length);
                        return std::span<uint8_t>(out);
                      });
  if (!n) {
    return n.error();
  }
  return out;
}

Result<uint64_t, ClientError> KvClient::get(const kvcache::BlockNamespace& ns, const Digest& digest,
                                            std::span<uint8_t> out) {
  return stream_get(
      channel_, timeout_ms_, ns, digest, [&](uint64_t length) -> Result<std::span<uint8_t>, ClientError> {
        if (length > out.size()) {
          return make_error(ClientError::kTooLarge,
                            fmt::format("the block has {} bytes; the buffer {}", length, out.size()));
        }
        return out.first(length);
      });
}

Result<KvLookup, ClientError> KvClient::batch_lookup(const kvcache::BlockNamespace& ns,
                                                     const std::vector<std::vector<Digest>>& requests,
                                                     uint32_t lease_ms) {
  auto stub = pb::KvCache::NewStub(channel_);
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout_ms_);
  pb::BatchLookupRequest req;
  set_namespace(ns, *req.mutable_namespace_());
  req.set_lease_ms(lease_ms);
  for (const auto& r : requests) {
    auto* e = req.add_requests();
    for (const auto& d : r) {
      e->add_digests(d.data(), d.size());
    }
  }
  pb::BatchLookupResponse resp;
  const grpc::Status st = stub->BatchLookup(&ctx, req, &resp);
  if (!st.ok()) {
    return call_error("BatchLookup", st);
  }
  if (static_cast<size_t>(resp.results_size()) != requests.size()) {
    return make_error(ClientError::kProtocol, "BatchLookup: a result count that does not match the requests");
  }
  KvLookup out;
  out.lease_until_unix_ms = resp.lease_until_unix_ms();
  for (const auto& r : resp.results()) {
    std::vector<kvcache::Tier> run;
    for (const auto& t : r.tiers()) {
      run.push_back(parse_tier(t));
    }
    out.runs.push_back(std::move(run));
  }
  return out;
}

Result<kvcache::StoreStats, ClientError> KvClient::stats() {
  auto stub = pb::KvCache::NewStub(channel_);
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout_ms_);
  pb::StatsRequest req;
  pb::StatsResponse resp;
  const grpc::Status st = stub->Stats(&ctx, req, &resp);
  if (!st.ok()) {
    return call_error("Stats", st);
  }
  return decode_stats(resp);
}

}  // namespace cgn::kvcached
