#include "core/tls/grpc_tls.h"

#include <fmt/format.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>

#include <fstream>
#include <sstream>

#include "core/http/client.h"
#include "core/http/server.h"

namespace cgn::tls {

Result<std::string, TlsError> read_pem(const std::string& path, std::string_view what) {
  std::ifstream f(path);
  if (!f) {
    return make_error(TlsError::kFile, fmt::format("{}: cannot read \"{}\"", what, path));
  }
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  if (text.find("-----BEGIN ") == std::string::npos) {
    return make_error(TlsError::kFile, fmt::format("{}: \"{}\" is not a PEM file", what, path));
  }
  return text;
}

namespace {

struct Pems {
  std::string ca;
  std::string cert;
  std::string key;
};

// The three PEM files [tls] names; the first that cannot be read is the error.
Result<Pems, TlsError> read_pems(const config::TlsConfig& tls) {
  auto ca = read_pem(tls.ca_file, "[tls] ca_file");
  auto cert = read_pem(tls.cert_file, "[tls] cert_file");
  auto key = read_pem(tls.key_file, "[tls] key_file");
  for (const auto* r : {&ca, &cert, &key}) {
    if (!*r) {
      return r->error();
    }
  }
  return Pems{std::move(*ca), std::move(*cert), std::move(*key)};
}

}  // namespace

Result<std::shared_ptr<grpc::ServerCredentials>, TlsError> server_credentials(const config::TlsConfig& tls) {
  if (!tls.enabled()) {
    return grpc::InsecureServerCredentials();
  }
  auto pems = read_pems(tls);
  if (!pems) {
    return pems.error();
  }
  grpc::SslServerCredentialsOptions o(tls.require_client_cert
                                          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                          : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  o.pem_root_certs = std::move(pems->ca);
  o.pem_key_cert_pairs.push_back({std::move(pems->key), std::move(pems->cert)});
  return grpc::SslServerCredentials(o);
}

Result<std::shared_ptr<grpc::ServerCredentials>, TlsError> server_credentials(
    const std::string& cert_file, const std::string& key_file, const std::string& client_ca_file,
    std::string_view section) {
  if (cert_file.empty()) {
    return grpc::InsecureServerCredentials();
  }
  auto cert = read_pem(cert_file, fmt::format("{} tls_cert", section));
  if (!cert) {
    return cert.error();
  }
  auto key = read_pem(key_file, fmt::format("{} tls_key", section));
  if (!key) {
    return key.error();
  }
  const bool mutual = !client_ca_file.empty();
  grpc::SslServerCredentialsOptions o(mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (mutual) {
    auto ca = read_pem(client_ca_file, fmt::format("{} tls_client_ca", section));
    if (!ca) {
      return ca.error();
    }
    o.pem_root_certs = std::move(*ca);
  }
  o.pem_key_cert_pairs.push_back({std::move(*key), std::move(*cert)});
  return grpc::SslServerCredentials(o);
}

Result<std::shared_ptr<grpc::ChannelCredentials>, TlsError> channel_credentials(
    const config::TlsConfig& tls) {
  if (!tls.enabled()) {
    return grpc::InsecureChannelCredentials();
  }
  auto pems = read_pems(tls);
  if (!pems) {
    return pems.error();
  }
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = std::move(pems->ca);
  o.pem_cert_chain = std::move(pems->cert);
  o.pem_private_key = std::move(pems->key);
  return grpc::SslCredentials(o);
}

Result<std::shared_ptr<grpc::ChannelCredentials>, TlsError> channel_credentials(const std::string& ca_file,
                                                                                const std::string& cert_file,
                                                                                const std::string& key_file) {
  auto ca = read_pem(ca_file, "[state.etcd] ca_file");
  if (!ca) {
    return ca.error();
  }
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = std::move(*ca);
  if (!cert_file.empty()) {
    auto cert = read_pem(cert_file, "[state.etcd] cert_file");
    if (!cert) {
      return cert.error();
    }
    auto key = read_pem(key_file, "[state.etcd] key_file");
    if (!key) {
      return key.error();
    }
    o.pem_cert_chain = std::move(*cert);
    o.pem_private_key = std::move(*key);
  }
  return grpc::SslCredentials(o);
}

bool peer_verified(const grpc::ServerContext& ctx) {
  auto auth = ctx.auth_context();
  return auth != nullptr && auth->IsPeerAuthenticated();
}

void apply(const config::TlsConfig& tls, http::ServerConfig& server) {
  if (!tls.enabled()) {
    return;
  }
  server.tls_cert_file = tls.cert_file;
  server.tls_key_file = tls.key_file;
  if (tls.require_client_cert) {
    server.tls_client_ca_file = tls.ca_file;
  }
}

void apply(const config::TlsConfig& tls, http::ClientConfig& client) {
  if (!tls.enabled()) {
    return;
  }
  client.tls_ca_file = tls.ca_file;
  client.tls_cert_file = tls.cert_file;
  client.tls_key_file = tls.key_file;
}

}  // namespace cgn::tls
