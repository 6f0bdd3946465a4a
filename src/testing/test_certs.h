// Certificates for TLS tests, made with the OpenSSL library at run time (nothing checked in):
// a certificate authority, and leaf certificates it signs for 127.0.0.1 / localhost, valid or
// expired. Keys are ECDSA P-256; files are PEM in the directory given.
#pragma once

#include <memory>
#include <string>

namespace cgn::testing {

struct CertFiles {
  std::string cert;  // PEM certificate
  std::string key;   // PEM private key (unencrypted)
};

// One CA. Not thread-safe; for a test's main thread.
class TestCa {
 public:
  // Writes <dir>/<name>-ca.pem (and its key, kept in memory for signing).
  TestCa(const std::string& dir, const std::string& name);
  ~TestCa();
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;

  const std::string& ca_file() const { return ca_file_; }
  // A leaf for subject CN `name` with subjectAltName DNS:localhost, IP:127.0.0.1 and both
  // serverAuth and clientAuth usage, valid from now + not_before_s to now + not_after_s (a negative
  // not_after_s gives an expired certificate). Files <dir>/<name>.pem and <dir>/<name>-key.pem.
  CertFiles issue(const std::string& name, long not_before_s = -3600, long not_after_s = 86400);

  struct Impl;

 private:
  std::string dir_;
  std::string ca_file_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgn::testing
