#include "retrieval/kb_store.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include <simdjson.h>

#include "protocol/chat_request_json.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "retrieval/chunker.hpp"

namespace ragtor {

namespace fs = std::filesystem;

namespace {

fs::path kb_file(const fs::path& data_dir, std::string_view kb) {
  return data_dir / "kbs" / std::string{kb} / "documents.jsonl";
}

bool ingestible(const fs::path& p) {
  auto ext = p.extension().string();
  return ext == ".txt" || ext == ".md" || ext == ".jsonl";
}

caf::expected<std::string> slurp(const fs::path& file) {
  std::ifstream in{file, std::ios::binary};
  if (!in)
    return make_error(errc::invalid_request, "cannot read " + file.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Title of a text document: its first "# " heading, else its first line.
std::string title_of(const std::string& text) {
  std::istringstream in{text};
  std::string line, first;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0)
      return line.substr(2);
    if (first.empty() && line.find_first_not_of(" \t\r") != std::string::npos)
      first = line;
  }
  return first.substr(0, 200);
}

caf::expected<std::vector<document>> read_jsonl(const fs::path& file, const std::string& body) {
  std::vector<document> out;
  simdjson::dom::parser parser;
  std::istringstream in{body};
  std::string line;
  size_t line_no = 0;
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_request,
                      file.string() + ":" + std::to_string(line_no) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    simdjson::dom::element obj;
    if (parser.parse(line).get(obj) || !obj.is_object())
      return bad("not a JSON object");
    document d;
    std::string_view sv;
    if (obj["id"].get(sv))
      return bad("\"id\" must be a string");
    d.id = std::string{sv};
    if (obj["text"].get(sv))
      return bad("\"text\" must be a string");
    d.text = std::string{sv};
    if (auto t = obj["title"]; !t.error()) {
      if (t.get(sv))
        return bad("\"title\" must be a string");
      d.title = std::string{sv};
    }
    if (d.id.empty() || d.text.empty())
      return bad("\"id\" and \"text\" must not be empty");
    d.source = file.string();
    if (auto src = obj["source"]; !src.error() && !src.get(sv))
      d.source = std::string{sv};
    out.push_back(std::move(d));
  }
  return out;
}

caf::error write_kb(const fs::path& data_dir, std::string_view kb,
                    const std::vector<document>& docs) {
  auto file = kb_file(data_dir, kb);
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec)
    return make_error(errc::unavailable, "cannot create " + file.parent_path().string());
  auto tmp = file;
  tmp += ".tmp";
  {
    std::ofstream out{tmp, std::ios::binary | std::ios::trunc};
    for (auto& d : docs) {
      json_writer w;
      w.begin_object()
          .field("id", d.id)
          .field("title", d.title)
          .field("text", d.text)
          .field("source", d.source)
          .end_object();
      out << w.str() << '\n';
    }
    out.flush();
    if (!out)
      return make_error(errc::unavailable, "cannot write " + tmp.string());
  }
  fs::rename(tmp, file, ec);
  if (ec)
    return make_error(errc::unavailable, "cannot replace " + file.string());
  return {};
}

}  // namespace

caf::expected<std::vector<document>> read_documents(const fs::path& file) {
  auto body = slurp(file);
  if (!body)
    return std::move(body.error());
  if (!is_valid_utf8(*body))
    return make_error(errc::invalid_request, file.string() + ": not valid UTF-8");
  if (file.extension() == ".jsonl")
    return read_jsonl(file, *body);
  document d;
  d.id = file.stem().string();
  d.title = title_of(*body);
  d.text = std::move(*body);
  d.source = file.string();
  return std::vector<document>{std::move(d)};
}

caf::expected<std::vector<document>> load_kb_documents(const fs::path& data_dir,
                                                       std::string_view kb) {
  auto file = kb_file(data_dir, kb);
  if (!fs::exists(file))
    return std::vector<document>{};
  auto body = slurp(file);
  if (!body)
    return std::move(body.error());
  return read_jsonl(file, *body);
}

caf::expected<ingest_report> ingest_paths(const fs::path& data_dir, const std::string& kb,
                                          const std::vector<fs::path>& paths,
                                          const std::function<void(size_t, size_t)>& progress) {
  if (!is_valid_id(kb, 128))
    return make_error(errc::invalid_request,
                      "knowledge base names are 1-128 characters of [A-Za-z0-9_.:@-]");
  std::vector<fs::path> files;
  for (auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (auto& e : fs::recursive_directory_iterator(p, ec))
        if (e.is_regular_file() && ingestible(e.path()))
          files.push_back(e.path());
    } else if (fs::is_regular_file(p, ec)) {
      if (!ingestible(p))
        return make_error(errc::invalid_request,
                          p.string() + ": unsupported file type (use .txt, .md or .jsonl)");
      files.push_back(p);
    } else {
      return make_error(errc::invalid_request, p.string() + ": no such file or directory");
    }
  }
  std::sort(files.begin(), files.end());
  auto stored = load_kb_documents(data_dir, kb);
  if (!stored)
    return std::move(stored.error());
  std::map<std::string, size_t> index;  // id -> position in *stored
  for (size_t i = 0; i < stored->size(); ++i)
    index[(*stored)[i].id] = i;
  ingest_report report;
  for (size_t f = 0; f < files.size(); ++f) {
    auto docs = read_documents(files[f]);
    if (!docs)
      return std::move(docs.error());
    for (auto& d : *docs) {
      if (auto i = index.find(d.id); i != index.end()) {
        (*stored)[i->second] = std::move(d);
        ++report.documents_replaced;
      } else {
        index[d.id] = stored->size();
        stored->push_back(std::move(d));
        ++report.documents_added;
      }
    }
    if (progress)
      progress(f + 1, files.size());
  }
  if (auto err = write_kb(data_dir, kb, *stored))
    return err;
  for (auto& d : *stored)
    report.chunks += chunk_document(d, chunker_options{}).size();
  return report;
}

std::vector<std::string> list_kbs(const fs::path& data_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(data_dir / "kbs", ec))
    if (e.is_directory() && fs::exists(e.path() / "documents.jsonl"))
      out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ragtor
