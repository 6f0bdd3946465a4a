#include "testing/test_certs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <stdexcept>

namespace cgn::testing {

namespace {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

void check(bool ok, const char* what) {
  if (!ok) {
    throw std::runtime_error(std::string("test certificates: ") + what);
  }
}

Key new_key() {
  Key k(EVP_EC_gen("P-256"));
  check(k != nullptr, "EVP_EC_gen");
  return k;
}

void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  check(ext != nullptr, "X509V3_EXT_conf_nid");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

Cert make_cert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key, long not_before_s,
               long not_after_s, bool ca) {
  static long serial = 1;
  Cert c(X509_new());
  check(c != nullptr, "X509_new");
  X509_set_version(c.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(c.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(c.get()), not_before_s);
  X509_gmtime_adj(X509_getm_notAfter(c.get()), not_after_s);
  X509_set_pubkey(c.get(), key);
  X509_NAME* name = X509_get_subject_name(c.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(c.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509* iss = issuer != nullptr ? issuer : c.get();
  if (ca) {
    add_ext(c.get(), iss, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(c.get(), iss, NID_key_usage, "critical,keyCertSign,cRLSign");
    add_ext(c.get(), iss, NID_subject_key_identifier, "hash");
  } else {
    add_ext(c.get(), iss, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(c.get(), iss, NID_key_usage, "critical,digitalSignature");
    add_ext(c.get(), iss, NID_ext_key_usage, "serverAuth,clientAuth");
    add_ext(c.get(), iss, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
    add_ext(c.get(), iss, NID_authority_key_identifier, "keyid");
  }
  check(X509_sign(c.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) > 0, "X509_sign");
  return c;
}

void write_cert(const std::string& path, X509* c) {
  FILE* f = std::fopen(path.c_str(), "w");
  check(f != nullptr, "open cert file");
  PEM_write_X509(f, c);
  std::fclose(f);
}

void write_key(const std::string& path, EVP_PKEY* k) {
  FILE* f = std::fopen(path.c_str(), "w");
  check(f != nullptr, "open key file");
  PEM_write_PrivateKey(f, k, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
}

}  // namespace

struct TestCa::Impl {
  Key key;
  Cert cert;
};

TestCa::TestCa(const std::string& dir, const std::string& name)
    : dir_(dir), ca_file_(dir + "/" + name + "-ca.pem"), impl_(std::make_unique<Impl>()) {
  impl_->key = new_key();
  impl_->cert = make_cert(impl_->key.get(), name + " test CA", nullptr, nullptr, -3600, 86400, true);
  write_cert(ca_file_, impl_->cert.get());
}

TestCa::~TestCa() = default;

CertFiles TestCa::issue(const std::string& name, long not_before_s, long not_after_s) {
  Key k = new_key();
  Cert c = make_cert(k.get(), name, impl_->cert.get(), impl_->key.get(), not_before_s, not_after_s, false);
  CertFiles out{dir_ + "/" + name + ".pem", dir_ + "/" + name + "-key.pem"};
  write_cert(out.cert, c.get());
  write_key(out.key, k.get());
  return out;
}

}  // namespace cgn::testing
