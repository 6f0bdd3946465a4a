#include "power/power_grpc.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "cognitora/v1/power.grpc.pb.h"
#include "core/tls/grpc_channel.h"
#include "core/tls/grpc_server.h"
#include "core/tls/grpc_tls.h"

namespace cgn::power {

namespace pb = cognitora::v1;

namespace {

void device_to_proto(const DeviceReading& d, pb::PowerDevice& o) {
  const PowerSample& s = d.latest;
  o.set_source(s.source);
  o.set_kind(s.kind);
  o.set_device(s.device);
  if (s.watts) {
    o.set_watts(*s.watts);
  }
  o.set_average(s.window == Window::kAverage);
  o.set_window_ms(static_cast<uint32_t>(s.window_length.count()));
  if (s.counter_uj) {
    o.set_counter_uj(*s.counter_uj);
  }
  if (s.counter_range_uj) {
    o.set_counter_range_uj(*s.counter_range_uj);
  }
  if (s.power_limit_watts) {
    o.set_power_limit_watts(*s.power_limit_watts);
  }
  if (s.gpu) {
    o.mutable_gpu()->set_name(s.gpu->name);
    o.mutable_gpu()->set_uuid(s.gpu->uuid);
    if (s.gpu->memory_bytes) {
      o.mutable_gpu()->set_memory_bytes(*s.gpu->memory_bytes);
    }
  }
  o.set_energy_uj(d.energy_uj);
  o.set_energy_from_counter(d.from_counter);
}

DeviceReading device_from_proto(const pb::PowerDevice& o) {
  DeviceReading d;
  PowerSample& s = d.latest;
  s.source = o.source();
  s.kind = o.kind();
  s.device = o.device();
  if (o.has_watts()) {
    s.watts = o.watts();
  }
  s.window = o.average() ? Window::kAverage : Window::kInstant;
  s.window_length = std::chrono::milliseconds(o.window_ms());
  if (o.has_counter_uj()) {
    s.counter_uj = o.counter_uj();
  }
  if (o.has_counter_range_uj()) {
    s.counter_range_uj = o.counter_range_uj();
  }
  if (o.has_power_limit_watts()) {
    s.power_limit_watts = o.power_limit_watts();
  }
  if (o.has_gpu()) {
    GpuInfo g;
    g.name = o.gpu().name();
    g.uuid = o.gpu().uuid();
    if (o.gpu().has_memory_bytes()) {
      g.memory_bytes = o.gpu().memory_bytes();
    }
    s.gpu = g;
  }
  d.energy_uj = o.energy_uj();
  d.from_counter = o.energy_from_counter();
  return d;
}

}  // namespace

void to_proto(const Snapshot& s, pb::PowerReadReply& out) {
  for (const auto& d : s.devices) {
    device_to_proto(d, *out.add_devices());
  }
  for (const auto& src : s.sources) {
    pb::PowerSource* o = out.add_sources();
    o->set_name(src.name);
    o->set_kind(src.kind);
    o->set_up(src.up);
    o->set_reads(src.reads);
    o->set_errors(src.errors);
    o->set_last_error(src.last_error);
  }
  out.set_polls(s.polls);
}

Snapshot from_proto(const pb::PowerReadReply& in) {
  Snapshot s;
  for (const auto& d : in.devices()) {
    s.devices.push_back(device_from_proto(d));
  }
  for (const auto& o : in.sources()) {
    s.sources.push_back(SourceStatus{o.name(), o.kind(), o.up(), o.reads(), o.errors(), o.last_error()});
  }
  s.polls = in.polls();
  return s;
}

class PowerGrpcServer::Service final : public pb::Power::Service {
 public:
  explicit Service(const Reader& reader) : reader_(reader) {}
  grpc::Status Read(grpc::ServerContext*, const pb::PowerReadRequest*, pb::PowerReadReply* reply) override {
    to_proto(reader_.snapshot(), *reply);
    return grpc::Status::OK;
  }

 private:
  const Reader& reader_;
};

Result<std::unique_ptr<PowerGrpcServer>, GrpcError> PowerGrpcServer::start(const std::string& listen,
                                                                           const config::TlsConfig& tls,
                                                                           const Reader& reader) {
  std::unique_ptr<PowerGrpcServer> s(new PowerGrpcServer());
  s->service_ = std::make_unique<Service>(reader);
  auto started = tls::start_grpc_server(
      "Power gRPC", listen, tls, [&s](grpc::ServerBuilder& b) { b.RegisterService(s->service_.get()); });
  if (!started) {
    return make_error(
        started.error().code == tls::GrpcServerError::kTls ? GrpcError::kTls : GrpcError::kListen,
        started.error().message);
  }
  s->server_ = std::move(started->server);
  s->port_ = started->port;
  return s;
}

PowerGrpcServer::~PowerGrpcServer() {
  stop(std::chrono::milliseconds(0));
}

void PowerGrpcServer::stop(std::chrono::milliseconds grace) {
  if (!server_) {
    return;
  }
  // Read answers from memory at once, so there is nothing to wait for; a deadline would also be
  // waited out for clients that merely stay connected.
  (void)grace;
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

struct PowerClient::Stub {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Power::Stub> stub;
};

Result<std::unique_ptr<PowerClient>, GrpcError> PowerClient::connect(const std::string& target,
                                                                     const config::TlsConfig& tls) {
  auto creds = tls::channel_credentials(tls);
  if (!creds) {
    return make_error(GrpcError::kTls, fmt::format("Power client: {}", creds.error().message));
  }
  std::unique_ptr<PowerClient> c(new PowerClient());
  // The daemon is local: after an outage, reconnect within a second or two rather than after
  // gRPC's default backoff (up to 120 s), so its readings return soon after it does.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // A read is safe to send twice: the first after a daemon restart is not lost.
  tls::retry_once(args, "cognitora.v1.Power");
  auto channel = grpc::CreateCustomChannel(target, *creds, args);
  c->stub_ = std::make_unique<Stub>(Stub{channel, pb::Power::NewStub(channel)});
  return c;
}

PowerClient::~PowerClient() = default;

Result<Snapshot, GrpcError> PowerClient::read(std::chrono::milliseconds timeout) const {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  pb::PowerReadRequest req;
  pb::PowerReadReply reply;
  grpc::Status st = stub_->stub->Read(&ctx, req, &reply);
  if (!st.ok()) {
    return make_error(GrpcError::kCall, fmt::format("Power.Read: {} ({})", static_cast<int>(st.error_code()),
                                                    st.error_message()));
  }
  return from_proto(reply);
}

}  // namespace cgn::power
