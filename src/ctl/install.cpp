#include "ctl/install.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "core/digest.h"
#include "ctl/packaged_files.h"

namespace cgn::ctl {

namespace fs = std::filesystem;

namespace {

struct RoleUnit {
  std::string role;
  std::string unit;
};

// Each role is one unit; its configuration is whatever /etc/cognitora file the unit names.
const std::vector<RoleUnit>& role_units() {
  static const std::vector<RoleUnit> kRoles = {{"router", "cgn-router.service"},
                                               {"agent", "cgn-agent.service"},
                                               {"kvcached", "cgn-kvcached.service"},
                                               {"power", "cgn-power.service"},
                                               {"etcd", "etcd.service"}};
  return kRoles;
}

std::optional<std::string_view> packaged(std::string_view rel) {
  for (const auto& f : packaged_files()) {
    if (f.path == rel) {
      return f.text;
    }
  }
  return std::nullopt;
}

// `abs` (an absolute path on the target system) under `root`.
fs::path under(const std::string& root, const std::string& abs) {
  return fs::path(root.empty() ? "/" : root) / fs::path(abs).relative_path();
}

std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string hash_of(std::string_view text) {
  return to_hex(blake3_hash(text));
}

// One thing install does to one path.
struct Step {
  enum Kind { kWrite, kUpdate, kSame, kKeep, kLink, kLinkSame, kLinkKeep } kind;
  std::string path;  // on the target system
  std::string text;  // kWrite/kUpdate/kSame: the contents; kLink*: the target
  std::string why;   // kKeep, kLinkKeep
};

struct Plan {
  std::vector<Step> steps;
  std::vector<std::string> units;  // to enable
  std::vector<std::string> notes;
};

Step plan_file(const std::string& root, const InstallManifest& m, const std::string& path,
               std::string_view text) {
  Step s{Step::kWrite, path, std::string(text), ""};
  const auto current = read_text(under(root, path));
  if (!current) {
    return s;
  }
  if (*current == text) {
    s.kind = Step::kSame;
    return s;
  }
  const auto it = m.files.find(path);
  if (it != m.files.end() && it->second == hash_of(*current)) {
    s.kind = Step::kUpdate;  // ours and untouched since: the new version replaces it
    return s;
  }
  s.kind = Step::kKeep;
  s.why = it != m.files.end() ? "changed since cgn-ctl install wrote it"
                              : "not written by cgn-ctl install (the operator's or the package's)";
  return s;
}

Step plan_link(const std::string& root, const std::string& path, const std::string& target) {
  const fs::path p = under(root, path);
  std::error_code ec;
  if (!fs::is_symlink(p, ec)) {
    if (fs::exists(p, ec)) {
      return {Step::kLinkKeep, path, target, "a file that is not a symlink"};
    }
    return {Step::kLink, path, target, ""};
  }
  const auto now = fs::read_symlink(p, ec).string();
  if (now == target) {
    return {Step::kLinkSame, path, target, ""};
  }
  return {Step::kLinkKeep, path, target, "points to " + now};
}

// The values of `key=` in the [Install] section of a unit's text, split on spaces.
std::vector<std::string> install_values(std::string_view unit, std::string_view key) {
  std::vector<std::string> out;
  std::istringstream in{std::string(unit)};
  std::string line;
  bool in_install = false;
  while (std::getline(in, line)) {
    if (line.starts_with("[")) {
      in_install = line.starts_with("[Install]");
    } else if (in_install && line.starts_with(std::string(key) + "=")) {
      std::istringstream words(line.substr(key.size() + 1));
      for (std::string w; words >> w;) {
        out.push_back(w);
      }
    }
  }
  return out;
}

// The /etc/cognitora files a unit (or drop-in) names outside its comments.
std::vector<std::string> config_files_named(std::string_view unit) {
  std::vector<std::string> out;
  std::istringstream in{std::string(unit)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("#") || line.starts_with(";")) {
      continue;
    }
    static constexpr std::string_view kDir = "/etc/cognitora/";
    for (size_t at = line.find(kDir); at != std::string::npos; at = line.find(kDir, at + kDir.size())) {
      const size_t begin = at + kDir.size();
      size_t end = begin;
      while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) != 0 ||
                                   line[end] == '.' || line[end] == '_' || line[end] == '-')) {
        ++end;
      }
      if (end > begin) {
        out.push_back(line.substr(begin, end - begin));
      }
    }
  }
  return out;
}

// The unit file a package installed under root, if any.
std::optional<std::string> system_unit(const std::string& root, const std::string& unit) {
  for (const char* dir : {"/etc/systemd/system/", "/lib/systemd/system/", "/usr/lib/systemd/system/"}) {
    if (fs::exists(under(root, dir + unit))) {
      return dir + unit;
    }
  }
  return std::nullopt;
}

// The steps for one role; the error's code is the exit code.
Result<bool, int> plan_role(Ctx& ctx, const std::string& root, const InstallManifest& m, const RoleUnit& r,
                            Plan& plan) {
  std::string unit_path;
  std::string unit_text;
  std::vector<std::string> texts;  // ours, where configuration file names come from
  const std::string shown_root = root.empty() ? "/" : root;
  if (const auto ours = packaged("systemd/" + r.unit)) {
    const auto pkg = system_unit(root, r.unit);
    if (pkg && !pkg->starts_with("/etc/")) {
      unit_path = *pkg;
      unit_text = read_text(under(root, *pkg)).value_or("");
      plan.notes.push_back(r.unit + ": the installed package's " + *pkg + " (not written)");
    } else {
      unit_path = "/etc/systemd/system/" + r.unit;
      unit_text = std::string(*ours);
      plan.steps.push_back(plan_file(root, m, unit_path, *ours));
    }
    texts.push_back(std::string(*ours));
  } else {
    const std::string prefix = "systemd/" + r.unit + ".d/";
    std::vector<PackagedFile> dropins;
    for (const auto& f : packaged_files()) {
      if (f.path.starts_with(prefix)) {
        dropins.push_back(f);
      }
    }
    if (dropins.empty()) {
      return make_error(
          ctx.fail(kUsage, "role " + r.role + ": this cgn-ctl was built without packaging/systemd/" + r.unit +
                               " (a newer release has it)"),
          "no unit");
    }
    const auto pkg = system_unit(root, r.unit);
    if (!pkg) {
      return make_error(ctx.fail(kFailed, "role " + r.role + ": " + r.unit + " is not installed under " +
                                              shown_root + " (install Debian's etcd-server first)"),
                        "no unit");
    }
    unit_path = *pkg;
    unit_text = read_text(under(root, *pkg)).value_or("");
    for (const auto& d : dropins) {
      const std::string path =
          "/etc/systemd/system/" + r.unit + ".d/" + std::string(d.path.substr(prefix.size()));
      plan.steps.push_back(plan_file(root, m, path, d.text));
      texts.push_back(std::string(d.text));
    }
  }
  std::set<std::string> configs;
  for (const auto& t : texts) {
    for (const auto& name : config_files_named(t)) {
      configs.insert(name);
    }
  }
  for (const auto& name : configs) {
    const auto text = packaged("etc/cognitora/" + name);
    if (!text) {
      return make_error(
          ctx.fail(kFailed, r.unit + " names /etc/cognitora/" + name +
                                ", which this cgn-ctl does not carry (packaging/etc/cognitora)"),
          "no config");
    }
    plan.steps.push_back(plan_file(root, m, "/etc/cognitora/" + name, *text));
  }
  plan.units.push_back(r.unit);
  for (const auto& [key, suffix] :
       {std::pair{"WantedBy", ".wants/"}, std::pair{"RequiredBy", ".requires/"}}) {
    for (const auto& target : install_values(unit_text, key)) {
      plan.steps.push_back(plan_link(root, "/etc/systemd/system/" + target + suffix + r.unit, unit_path));
    }
  }
  for (const auto& alias : install_values(unit_text, "Alias")) {
    plan.steps.push_back(plan_link(root, "/etc/systemd/system/" + alias, unit_path));
  }
  return true;
}

bool use_systemctl(const std::string& root) {
  return root.empty() && run_program({"sh", "-c", "command -v systemctl >/dev/null"}) == 0;
}

// Creates the parents of `path` (under root) that are missing, recording each in `m.dirs`.
bool make_parents(const std::string& root, const std::string& path, InstallManifest& m, std::string& why) {
  std::vector<fs::path> missing;
  for (fs::path p = fs::path(path).parent_path(); p != p.root_path(); p = p.parent_path()) {
    if (fs::exists(under(root, p.string()))) {
      break;
    }
    missing.push_back(p);
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    std::error_code ec;
    fs::create_directory(under(root, it->string()), ec);
    if (ec) {
      why = "cannot create " + under(root, it->string()).string() + ": " + ec.message();
      return false;
    }
    m.dirs.push_back(it->string());
  }
  return true;
}

// Writes `text` to `path` under root through a temporary file and a rename (mode 0644).
bool write_file(const std::string& root, const std::string& path, std::string_view text, InstallManifest& m,
                std::string& why) {
  if (!make_parents(root, path, m, why)) {
    return false;
  }
  const fs::path dest = under(root, path);
  const fs::path tmp = dest.string() + ".cgn-ctl-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) {
      why = "cannot write " + dest.string();
      return false;
    }
  }
  std::error_code ec;
  fs::permissions(tmp, fs::perms(0644), ec);
  fs::rename(tmp, dest, ec);
  if (ec) {
    fs::remove(tmp);
    why = "cannot write " + dest.string() + ": " + ec.message();
    return false;
  }
  return true;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) {
    v.push_back(s);
  }
}

Result<InstallManifest, int> load_manifest(Ctx& ctx, const std::string& root) {
  const auto text = read_text(under(root, kInstallManifest));
  if (!text) {
    return InstallManifest{};
  }
  auto m = InstallManifest::parse(*text);
  if (!m) {
    return make_error(ctx.fail(kFailed, under(root, kInstallManifest).string() + ": " + m.error().message),
                      "manifest");
  }
  return std::move(*m);
}

// Prints the step (dry run: with the contents to be written); applies it with `apply`.
bool do_step(Ctx& ctx, const std::string& root, const Step& s, bool apply, bool links, InstallManifest& m) {
  std::ostream& out = ctx.out();
  std::string why;
  switch (s.kind) {
    case Step::kWrite:
    case Step::kUpdate:
      if (!apply) {
        out << "would " << (s.kind == Step::kWrite ? "write " : "update ") << s.path << ":\n" << s.text;
        out << (s.text.ends_with('\n') ? "" : "\n") << "\n";
        return true;
      }
      if (!write_file(root, s.path, s.text, m, why)) {
        ctx.fail(kFailed, why);
        return false;
      }
      m.files[s.path] = hash_of(s.text);
      out << (s.kind == Step::kWrite ? "wrote " : "updated ") << s.path << "\n";
      return true;
    case Step::kSame:
      out << "unchanged " << s.path << "\n";
      return true;
    case Step::kKeep:
      out << "kept " << s.path << ": " << s.why << "; differs from the packaged file, not overwritten\n";
      return true;
    case Step::kLinkSame:
      out << (links ? "linked " + s.path + " -> " + s.text + " (already)\n" : "");
      return true;
    case Step::kLinkKeep:
      out << (links ? "kept " + s.path + ": " + s.why + ", not " + s.text + "\n" : "");
      return true;
    case Step::kLink:
      if (!links) {
        return true;
      }
      if (!apply) {
        out << "would link " << s.path << " -> " << s.text << "\n";
        return true;
      }
      std::error_code ec;
      if (make_parents(root, s.path, m, why)) {
        fs::create_symlink(s.text, under(root, s.path), ec);
        why = ec ? "cannot link " + under(root, s.path).string() + ": " + ec.message() : "";
      }
      if (!why.empty()) {
        ctx.fail(kFailed, why);
        return false;
      }
      m.links[s.path] = s.text;
      out << "linked " << s.path << " -> " << s.text << "\n";
      return true;
  }
  return true;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) {
    s += (s.empty() ? "" : " ") + x;
  }
  return s;
}

}  // namespace

const std::vector<std::string>& install_roles() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (const auto& r : role_units()) {
      v.push_back(r.role);
    }
    return v;
  }();
  return kNames;
}

std::string InstallManifest::dump() const {
  nlohmann::json j = {{"written_by", "cgn-ctl install"},
                      {"roles", roles},
                      {"files", files},
                      {"links", links},
                      {"dirs", dirs},
                      {"enabled", enabled}};
  return j.dump(2) + "\n";
}

Result<InstallManifest, std::string> InstallManifest::parse(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("written_by", "") != "cgn-ctl install") {
    return make_error(std::string("manifest"), std::string("not a cgn-ctl install manifest"));
  }
  try {
    InstallManifest m;
    m.roles = j.at("roles").get<std::vector<std::string>>();
    m.files = j.at("files").get<std::map<std::string, std::string>>();
    m.links = j.at("links").get<std::map<std::string, std::string>>();
    m.dirs = j.at("dirs").get<std::vector<std::string>>();
    m.enabled = j.at("enabled").get<std::vector<std::string>>();
    return m;
  } catch (const nlohmann::json::exception& e) {
    return make_error(std::string("manifest"), std::string("malformed manifest: ") + e.what());
  }
}

int run_install(Ctx& ctx, const InstallOptions& o) {
  auto m = load_manifest(ctx, o.root);
  if (!m) {
    return m.error().code;
  }
  Plan plan;
  for (const auto& r : role_units()) {
    if (std::find(o.roles.begin(), o.roles.end(), r.role) == o.roles.end()) {
      continue;
    }
    if (auto ok = plan_role(ctx, o.root, *m, r, plan); !ok) {
      return ok.error().code;
    }
  }
  const bool systemctl = use_systemctl(o.root);
  const std::string root = o.root.empty() ? "/" : o.root;
  ctx.out() << "cgn-ctl install " << joined(o.roles) << " under " << root
            << (o.apply ? "" : " (dry run: nothing is written; --apply writes it)") << "\n";
  for (const auto& n : plan.notes) {
    ctx.out() << n << "\n";
  }
  for (const auto& s : plan.steps) {
    if (!do_step(ctx, o.root, s, o.apply, !systemctl, *m)) {
      return kFailed;
    }
  }
  if (systemctl) {
    ctx.out() << (o.apply ? "running" : "would run") << " systemctl daemon-reload; systemctl enable "
              << joined(plan.units) << "\n";
    if (o.apply && (run_program({"systemctl", "daemon-reload"}) != 0 || [&] {
          std::vector<std::string> argv = {"systemctl", "enable"};
          argv.insert(argv.end(), plan.units.begin(), plan.units.end());
          return run_program(argv);
        }() != 0)) {
      return ctx.fail(kFailed, "systemctl enable " + joined(plan.units) + " failed");
    }
    for (const auto& u : plan.units) {
      add_unique(m->enabled, u);
    }
  }
  if (!o.apply) {
    ctx.out() << "would record what it writes in " << kInstallManifest << "\n";
    return kOk;
  }
  for (const auto& r : o.roles) {
    add_unique(m->roles, r);
  }
  std::string why;
  // Its folder first, so that the manifest lists the folders made for it too.
  if (!make_parents(o.root, kInstallManifest, *m, why) ||
      !write_file(o.root, kInstallManifest, m->dump(), *m, why)) {
    return ctx.fail(kFailed, why);
  }
  ctx.out() << "recorded " << kInstallManifest << " (cgn-ctl uninstall removes what it lists)\n";
  return kOk;
}

int run_uninstall(Ctx& ctx, const std::string& root, bool apply) {
  auto m = load_manifest(ctx, root);
  if (!m) {
    return m.error().code;
  }
  std::ostream& out = ctx.out();
  const std::string shown = root.empty() ? "/" : root;
  if (!fs::exists(under(root, kInstallManifest))) {
    out << "cgn-ctl uninstall: nothing to do: no " << kInstallManifest << " under " << shown << "\n";
    return kOk;
  }
  out << "cgn-ctl uninstall under " << shown
      << (apply ? "" : " (dry run: nothing is removed; --apply removes it)") << "\n";
  const std::string verb = apply ? "removed " : "would remove ";
  std::error_code ec;
  if (!m->enabled.empty() && use_systemctl(root)) {
    out << (apply ? "running" : "would run") << " systemctl disable " << joined(m->enabled) << "\n";
    std::vector<std::string> argv = {"systemctl", "disable"};
    argv.insert(argv.end(), m->enabled.begin(), m->enabled.end());
    if (apply && run_program(argv) != 0) {
      return ctx.fail(kFailed, "systemctl disable " + joined(m->enabled) + " failed");
    }
  }
  for (const auto& [path, target] : m->links) {
    const fs::path p = under(root, path);
    if (fs::is_symlink(p, ec) && fs::read_symlink(p, ec).string() == target) {
      out << verb << path << "\n";
      if (apply) {
        fs::remove(p, ec);
      }
    } else {
      out << "left " << path << ": not the link install made\n";
    }
  }
  for (const auto& [path, hash] : m->files) {
    const auto text = read_text(under(root, path));
    if (!text) {
      out << "gone already: " << path << "\n";
    } else if (hash_of(*text) != hash) {
      out << "kept " << path << ": changed since cgn-ctl install wrote it\n";
    } else {
      out << verb << path << "\n";
      if (apply) {
        fs::remove(under(root, path), ec);
      }
    }
  }
  out << verb << kInstallManifest << "\n";
  if (!apply) {
    return kOk;
  }
  fs::remove(under(root, kInstallManifest), ec);
  for (auto it = m->dirs.rbegin(); it != m->dirs.rend(); ++it) {
    const fs::path p = under(root, *it);
    if (fs::is_directory(p, ec) && fs::is_empty(p, ec)) {
      fs::remove(p, ec);
      out << "removed directory " << *it << "\n";
    } else if (fs::exists(p, ec)) {
      out << "left directory " << *it << ": not empty\n";
    }
  }
  if (!m->enabled.empty() && use_systemctl(root)) {
    run_program({"systemctl", "daemon-reload"});
  }
  return kOk;
}

}  // namespace cgn::ctl
