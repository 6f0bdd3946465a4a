#include "core/config_doc_cli.h"

#include <fmt/format.h>

#include <fstream>
#include <ostream>
#include <sstream>

#include "core/config.h"
#include "core/config_schema.h"

namespace cgn::config {

namespace {

// The problems a DocUpdate names that --check and --write share; true when there are none.
bool report_blocks(const std::string& path, const DocUpdate& u, std::ostream& err) {
  for (const std::string& m : u.missing) {
    err << fmt::format("{}: no generated block for [{}]; add the markers where its table belongs\n", path, m);
  }
  for (const std::string& m : u.stray) {
    err << fmt::format("{}: a generated block names [{}], which no declaration has; remove it\n", path, m);
  }
  return u.missing.empty() && u.stray.empty();
}

}  // namespace

int run_config_doc_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::vector<DocTable> tables = reference_tables();
  if (args.empty()) {
    for (const DocTable& t : tables) {
      out << fmt::format("### `[{}]`\n\n{}\n", t.path, render_markdown(t));
    }
    return 0;
  }
  const std::string& mode = args[0];
  if (args.size() != 2 || (mode != "--check" && mode != "--write")) {
    err << "usage: cgn-config-doc [--check FILE | --write FILE]\n";
    return 2;
  }
  const std::string& path = args[1];
  std::ifstream in(path);
  if (!in) {
    err << "cgn-config-doc: cannot read " << path << "\n";
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const DocUpdate u = update_reference(ss.str(), tables);
  const bool complete = report_blocks(path, u, err);
  if (mode == "--check") {
    for (const std::string& d : u.drifted) {
      err << fmt::format("{}: the table of [{}] differs from the declarations\n", path, d);
    }
    if (!u.drifted.empty()) {
      err << "regenerate with: build/bin/cgn-config-doc --write docs/configuration.md\n";
    }
    return u.drifted.empty() && complete ? 0 : 1;
  }
  std::ofstream file(path, std::ios::trunc);
  file << u.text;
  return file && complete ? 0 : 1;
}

}  // namespace cgn::config
