#include "retrieval/kb_store.hpp"
#include "protocol/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <span>
#include <sstream>
#include <unordered_map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <simdjson.h>

#include "protocol/chat_request_json.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/log.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/atomic_file.hpp"
#include "retrieval/html_text.hpp"

namespace ragtor {

namespace fs = std::filesystem;

namespace {

const log::component lg{"retrieval"};

fs::path kb_dir(const fs::path& data_dir, std::string_view kb) {
  return data_dir / "kbs" / std::string{kb};
}

fs::path kb_file(const fs::path& data_dir, std::string_view kb) {
  return kb_dir(data_dir, kb) / "documents.jsonl";
}

bool ingestible(const fs::path& p) {
  auto ext = p.extension().string();
  return ext == ".txt" || ext == ".md" || ext == ".jsonl" || ext == ".html" || ext == ".htm";
}

bool hidden(const fs::path& p) {
  auto name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// The file's bytes; *stripped (when asked) is how many of them a byte
// order mark took.
caf::expected<std::string> slurp(const fs::path& file, size_t* stripped = nullptr) {
  std::ifstream in{file, std::ios::binary};
  if (!in)
    return make_error(errc::invalid_request, "cannot read " + file.string());
  // Read in one go into a string of the file's size (a KB's documents
  // file is tens of MB), then whatever a growing file has more.
  std::error_code ec;
  auto size = fs::is_regular_file(file, ec) ? fs::file_size(file, ec) : 0;
  std::string body(ec ? 0 : size, '\0');
  in.read(body.data(), static_cast<std::streamsize>(body.size()));
  body.resize(static_cast<size_t>(in.gcount()));
  if (in.eof())
    in.clear();
  else if (in) {
    std::ostringstream rest;
    rest << in.rdbuf();
    body += rest.str();
  }
  if (in.bad())
    return make_error(errc::invalid_request, "cannot read " + file.string());
  // Editors on some systems start UTF-8 files with a byte order mark; it is
  // not text and would end up in the title.
  bool bom = body.starts_with("\xEF\xBB\xBF");
  if (bom)
    body.erase(0, 3);
  if (stripped)
    *stripped = bom ? 3 : 0;
  return body;
}

// Title of a text document: its first "# " heading, else its first
// non-blank line (shortened: a first line can be a whole paragraph).
std::string title_of(std::string_view text) {
  std::string_view first;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.starts_with("# "))
      return std::string{trim(line.substr(2))};
    if (first.empty())
      first = trim(line);
  }
  if (first.size() > 200) {
    size_t cut = 200;
    while (cut > 0 && (static_cast<unsigned char>(first[cut]) & 0xC0) == 0x80)
      --cut;  // not inside a UTF-8 sequence
    first = first.substr(0, cut);
  }
  return std::string{first};
}

// The documents of a .jsonl body. With `kept` (a KB's documents file,
// whose lines ragtor appends): a last line without its newline that is not
// a document is an append cut short, never acknowledged; it is ignored
// with a warning, and *kept is the size of the body before it (else of the
// whole body).
caf::expected<std::vector<document>> read_jsonl(const fs::path& file, std::string_view body,
                                                size_t* kept = nullptr) {
  std::vector<document> out;
  simdjson::ondemand::parser parser;
  size_t line_no = 0, line_start = 0;
  const size_t size = body.size();
  if (kept)
    *kept = size;
  bool unterminated = false;
  auto bad = [&](const std::string& why) -> caf::expected<std::vector<document>> {
    if (kept && unterminated) {
      lg->warn("{}:{}: an unfinished last line (an ingest cut short) is ignored: {}", file.string(),
               line_no, why);
      *kept = line_start;
      return std::move(out);
    }
    return make_error(errc::invalid_request,
                      file.string() + ":" + std::to_string(line_no) + ": " + why);
  };
  while (!body.empty()) {
    ++line_no;
    line_start = size - body.size();
    auto nl = body.find('\n');
    unterminated = nl == std::string_view::npos;
    auto line = body.substr(0, nl);
    body.remove_prefix(nl == std::string_view::npos ? body.size() : nl + 1);
    if (trim(line).empty())
      continue;
    simdjson::padded_string padded{line};
    simdjson::ondemand::document json;
    simdjson::ondemand::object obj;
    if (parser.iterate(padded).get(json) || json.get_object().get(obj))
      return bad("not a JSON object");
    document d;
    bool has_id = false, has_text = false;
    for (auto field : obj) {
      std::string_view key;
      if (field.unescaped_key().get(key))
        return bad("not a JSON object");
      std::string* target = key == "id"       ? &d.id
                            : key == "title"  ? &d.title
                            : key == "text"   ? &d.text
                            : key == "source" ? &d.source
                                              : nullptr;
      if (!target)
        continue;  // other fields (metadata of other tools) are ignored
      std::string_view value;
      if (field.value().get_string().get(value))
        return bad("\"" + std::string{key} + "\" must be a string");
      *target = std::string{value};
      has_id |= key == "id";
      has_text |= key == "text";
    }
    // Ondemand parsing is lazy: a truncated object or trailing garbage only
    // shows up when asking whether the whole line was consumed.
    if (json.current_location().error() != simdjson::OUT_OF_BOUNDS)
      return bad("not a JSON object");
    if (!has_id || d.id.empty())
      return bad("\"id\" is required and must not be empty");
    if (!has_text || d.text.empty())
      return bad("\"text\" is required and must not be empty");
    if (d.source.empty())
      d.source = file.string();
    out.push_back(std::move(d));
  }
  return out;
}

// `docs` as lines of a documents file, one JSON object each.
std::string document_lines(std::span<const document> docs) {
  std::string body;
  for (auto& d : docs) {
    json_writer w;
    w.begin_object()
        .field("id", d.id)
        .field("title", d.title)
        .field("text", d.text)
        .field("source", d.source)
        .end_object();
    body += w.str();
    body += '\n';
  }
  return body;
}

// Every document as one JSON line, written atomically.
caf::error write_kb(const fs::path& data_dir, std::string_view kb,
                    const std::vector<document>& docs) {
  return write_file_atomically(kb_file(data_dir, kb), document_lines(docs));
}

// A KB's documents file as read: its documents, its size on disk, and the
// size of what they were read from (less an unfinished last line).
struct documents_file {
  bool exists = false;
  std::vector<document> docs;
  size_t size = 0, kept = 0;
  bool ends_in_newline = true;
};

caf::expected<documents_file> read_documents_file(const fs::path& file) {
  documents_file out;
  std::error_code ec;
  if (!fs::exists(file, ec))
    return out;
  out.exists = true;
  size_t bom = 0;
  auto body = slurp(file, &bom);
  if (!body)
    return std::move(body.error());
  size_t kept = 0;
  auto docs = read_jsonl(file, *body, &kept);
  if (!docs)
    return std::move(docs.error());
  out.docs = std::move(*docs);
  out.size = bom + body->size();
  out.kept = bom + kept;
  out.ends_in_newline = kept == 0 || (*body)[kept - 1] == '\n';
  return out;
}

// Appends documents new to the KB (ids it does not have) to its file as
// read in `before`: an unfinished last line is cut first, a last document
// without its newline (written by hand) gets one. Fails, changing nothing,
// when the file is no longer as read (another process wrote it).
caf::error append_documents(const fs::path& file, const documents_file& before,
                            std::span<const document> docs) {
  auto lines = document_lines(docs);
  int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0)
    return make_error(errc::unavailable,
                      "cannot append to " + file.string() + ": " + std::strerror(errno));
  auto fail = [&](std::string what, std::string why = std::strerror(errno)) {
    ::close(fd);
    return make_error(errc::unavailable, what + " " + file.string() + ": " + why);
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return fail("cannot stat");
  if (static_cast<size_t>(st.st_size) != before.size)
    return fail("cannot append to", "changed since it was read");
  if (before.kept < before.size && ::ftruncate(fd, static_cast<off_t>(before.kept)) != 0)
    return fail("cannot cut the unfinished last line of");
  if (!before.ends_in_newline)
    lines.insert(lines.begin(), '\n');
  if (auto err = write_all(fd, lines)) {
    ::close(fd);
    return err;
  }
  if (::fdatasync(fd) != 0)
    return fail("cannot sync");
  if (::close(fd) != 0)
    return make_error(errc::unavailable,
                      "cannot append to " + file.string() + ": " + std::strerror(errno));
  return {};
}

// The ingestible files named by `paths`, sorted so ingestion order (and
// so which of two equal ids wins) does not depend on directory order.
caf::expected<std::vector<fs::path>> collect_files(const std::vector<fs::path>& paths) {
  std::vector<fs::path> files;
  for (auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      fs::recursive_directory_iterator it{p, ec}, end;
      for (; !ec && it != end; it.increment(ec)) {
        if (hidden(it->path())) {
          if (it->is_directory(ec))
            it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file(ec) && ingestible(it->path()))
          files.push_back(it->path());
      }
      if (ec)
        return make_error(errc::invalid_request, p.string() + ": " + ec.message());
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
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

}  // namespace

caf::expected<std::vector<document>> read_documents(const fs::path& file) {
  auto body = slurp(file);
  if (!body)
    return std::move(body.error());
  if (!simdjson::validate_utf8(body->data(), body->size()))
    return make_error(errc::invalid_request, file.string() + ": not valid UTF-8");
  if (file.extension() == ".jsonl")
    return read_jsonl(file, *body);
  document d;
  d.id = file.stem().string();
  d.source = file.string();
  if (auto ext = file.extension(); ext == ".html" || ext == ".htm") {
    auto converted = html_to_text(*body);
    d.text = std::move(converted.text);
    d.title = converted.title.empty() ? title_of(d.text) : std::move(converted.title);
  } else {
    d.title = title_of(*body);
    d.text = std::move(*body);
  }
  return std::vector<document>{std::move(d)};
}

caf::expected<std::vector<document>> load_kb_documents(const fs::path& data_dir,
                                                       std::string_view kb) {
  if (!is_valid_kb_name(kb))
    return make_error(errc::invalid_request, "invalid knowledge base name");
  auto read = read_documents_file(kb_file(data_dir, kb));
  if (!read)
    return std::move(read.error());
  return std::move(read->docs);
}

caf::expected<added_documents> add_documents(const fs::path& data_dir, const std::string& kb,
                                             std::vector<std::vector<document>> batches) {
  if (!is_valid_kb_name(kb))
    return make_error(errc::invalid_request, kb_name_rule);
  for (auto& docs : batches)
    for (auto& d : docs)
      if (d.id.empty())
        return make_error(errc::invalid_request, "every document needs a non-empty id");
  auto file = kb_file(data_dir, kb);
  auto read = read_documents_file(file);
  if (!read)
    return std::move(read.error());
  auto* stored = &read->docs;
  const size_t had = stored->size();
  bool replaced_stored = false;                      // a document the file has now
  std::unordered_map<std::string, size_t> position;  // id -> index in *stored
  position.reserve(had);
  for (size_t i = 0; i < had; ++i)
    position[(*stored)[i].id] = i;
  added_documents out;
  for (auto& docs : batches) {
    auto& report = out.reports.emplace_back();
    for (auto& d : docs) {
      if (auto i = position.find(d.id); i != position.end()) {
        replaced_stored |= i->second < had;
        (*stored)[i->second] = std::move(d);
        ++report.documents_replaced;
      } else {
        position.emplace(d.id, stored->size());
        stored->push_back(std::move(d));
        ++report.documents_added;
      }
    }
  }
  // Only new documents: appended (a replaced one's old text must leave
  // the disk, so a replacement rewrites the file).
  caf::error appended = make_error(errc::unavailable, "not appended");
  if (!replaced_stored && read->exists)
    appended = append_documents(file, *read, std::span{*stored}.subspan(had));
  if (appended)
    if (auto err = write_kb(data_dir, kb, *stored))
      return err;
  for (auto& report : out.reports)
    report.documents = stored->size();
  out.all = std::move(*stored);
  return out;
}

caf::expected<ingest_report> ingest_documents(const fs::path& data_dir, const std::string& kb,
                                              std::vector<document> docs,
                                              const chunker_options& chunking) {
  std::vector<std::vector<document>> batches;
  batches.push_back(std::move(docs));
  auto added = add_documents(data_dir, kb, std::move(batches));
  if (!added)
    return std::move(added.error());
  auto report = added->reports.front();
  for (auto& d : added->all)
    report.chunks += chunk_document(d, chunking).size();
  return report;
}

caf::expected<ingest_report> ingest_paths(const fs::path& data_dir, const std::string& kb,
                                          const std::vector<fs::path>& paths,
                                          const std::function<void(size_t, size_t)>& progress,
                                          const chunker_options& chunking) {
  if (!is_valid_kb_name(kb))
    return make_error(errc::invalid_request, kb_name_rule);
  auto files = collect_files(paths);
  if (!files)
    return std::move(files.error());
  std::vector<document> docs;
  for (size_t f = 0; f < files->size(); ++f) {
    auto read = read_documents((*files)[f]);
    if (!read)
      return std::move(read.error());
    for (auto& d : *read)
      docs.push_back(std::move(d));
    if (progress)
      progress(f + 1, files->size());
  }
  return ingest_documents(data_dir, kb, std::move(docs), chunking);
}

bool kb_exists(const fs::path& data_dir, std::string_view kb) {
  std::error_code ec;
  return is_valid_kb_name(kb) && fs::exists(kb_file(data_dir, kb), ec);
}

caf::error create_kb(const fs::path& data_dir, std::string_view kb) {
  if (!is_valid_kb_name(kb))
    return make_error(errc::invalid_request, kb_name_rule);
  if (kb_exists(data_dir, kb))
    return make_error(errc::conflict, "knowledge base \"" + std::string{kb} + "\" already exists");
  return write_kb(data_dir, kb, {});
}

std::vector<std::string> list_kbs(const fs::path& data_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it{data_dir / "kbs", ec}, end; !ec && it != end; it.increment(ec)) {
    auto name = it->path().filename().string();
    std::error_code ignored;
    if (is_valid_kb_name(name) && it->is_directory(ignored)
        && fs::exists(it->path() / "documents.jsonl", ignored))
      out.push_back(std::move(name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ragtor
