// cgn-digest: prints the prefix digests of an OpenAI request body, one lowercase hex digest per
// line, exactly as the router and the agent compute them. For operators (which prefix does a
// request hit?) and for tests that check two processes agree. Thin main over core/digest_cli.h.
#include "core/digest_cli.h"
#include "core/version.h"

int main(int argc, char** argv) {
  if (auto v = cgn::print_version_if_asked(argc, argv, "cgn-digest")) {
    return *v;
  }
  auto options = cgn::parse_digest_options(argc, argv);
  if (!options) {
    return cgn::print_cli_exit(options.error());
  }
  return cgn::run_digest_command(*options);
}
