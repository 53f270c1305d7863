#include "retrieval/kb_settings.hpp"

#include <fstream>
#include <sstream>

#include "protocol/errc.hpp"
#include "retrieval/atomic_file.hpp"

namespace ragtor {

namespace fs = std::filesystem;

namespace {

fs::path settings_file(const fs::path& data_dir, std::string_view kb) {
  return data_dir / "kbs" / std::string{kb} / "kb.json";
}

}  // namespace

caf::expected<kb_settings> load_kb_settings(const fs::path& data_dir, std::string_view kb) {
  auto file = settings_file(data_dir, kb);
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    kb_settings s;
    s.name = std::string{kb};
    return s;
  }
  std::ifstream in{file, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in)
    return make_error(errc::unavailable, "cannot read " + file.string());
  auto s = kb_settings_from_json(ss.str());
  if (!s)
    return make_error(errc::invalid_request, file.string() + ": " + error_message(s.error()));
  if (s->name != kb)
    return make_error(errc::invalid_request, file.string() + ": \"name\" is \"" + s->name
                                                 + "\", expected \"" + std::string{kb} + "\"");
  return s;
}

caf::error save_kb_settings(const fs::path& data_dir, const kb_settings& s) {
  if (auto problem = validate(s))
    return make_error(errc::invalid_request, *problem);
  return write_file_atomically(settings_file(data_dir, s.name), to_json(s) + "\n");
}

}  // namespace ragtor
