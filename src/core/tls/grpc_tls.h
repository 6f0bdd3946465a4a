// The one credentials helper for the links inside the cluster ([tls], docs/security.md): every
// gRPC server and channel (the agent's Agent service and the router's calls to it, the kvcached
// and power services, the router's Generate API) takes its credentials from here, and the
// router -> agent HTTP hop its settings. With [tls] unset everything is plaintext, as before.
//
// Pure functions over the configuration and the PEM files it names; thread-safe. Errors name the
// file and the key it came from.
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "core/result.h"

namespace grpc {
class ServerCredentials;
class ChannelCredentials;
class ServerContext;
}  // namespace grpc

namespace cgn::http {
struct ServerConfig;  // core/http/server.h
struct ClientConfig;  // core/http/client.h
}  // namespace cgn::http

namespace cgn::tls {

enum class TlsError : uint8_t { kFile };

// The contents of a PEM file; the error names `what` (the config key) and the path.
Result<std::string, TlsError> read_pem(const std::string& path, std::string_view what);

// Server credentials from [tls]: insecure when it is not enabled; else the certificate and key,
// and, with require_client_cert, clients must present a certificate ca_file verifies.
Result<std::shared_ptr<grpc::ServerCredentials>, TlsError> server_credentials(const config::TlsConfig& tls);

// Server credentials for a listener with certificates of its own (the router's [router.grpc]):
// insecure when `cert_file` is empty; else the certificate and key and, when `client_ca_file` is
// set, clients must present a certificate it verifies (mutual TLS). Errors name
// `section`'s keys tls_cert, tls_key and tls_client_ca.
Result<std::shared_ptr<grpc::ServerCredentials>, TlsError> server_credentials(
    const std::string& cert_file, const std::string& key_file, const std::string& client_ca_file,
    std::string_view section);

// Channel credentials from [tls]: insecure when it is not enabled; else the server is verified
// against ca_file (and its name against the target's host) and this process presents its
// certificate as a client certificate.
Result<std::shared_ptr<grpc::ChannelCredentials>, TlsError> channel_credentials(const config::TlsConfig& tls);

// Channel credentials for an https:// etcd: ca_file verifies etcd; cert_file/key_file (both or
// neither) are the client certificate etcd may require.
Result<std::shared_ptr<grpc::ChannelCredentials>, TlsError> channel_credentials(const std::string& ca_file,
                                                                                const std::string& cert_file,
                                                                                const std::string& key_file);

// Whether the caller of a gRPC call presented a client certificate the server verified (then it
// stands in for the cluster token).
bool peer_verified(const grpc::ServerContext& ctx);

// The router -> agent HTTP hop: the agent's listener with [tls]'s certificate (and client
// verification with require_client_cert), the router's client trusting ca_file and presenting
// its certificate. No-ops when [tls] is not enabled.
void apply(const config::TlsConfig& tls, http::ServerConfig& server);
void apply(const config::TlsConfig& tls, http::ClientConfig& client);

}  // namespace cgn::tls
