#include "tests/support/chat_client.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/support/ragtor_process.hpp"

namespace ragtor::test {

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in{path, std::ios::binary};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fixture_doc> load_fixture_docs() {
  std::vector<fixture_doc> docs;
  for (const auto& file : fixture_kb_files()) {
    auto text = read_text(file);
    if (file.extension() == ".jsonl") {
      std::istringstream lines{text};
      std::string line;
      while (std::getline(lines, line)) {
        if (line.empty())
          continue;
        auto j = json::parse(line);
        docs.push_back({j.str("/id"), j.str("/title"), j.str("/text"), file});
      }
    } else {
      std::string title;
      if (text.starts_with("# "))
        title = text.substr(2, text.find('\n') - 2);
      docs.push_back({file.filename().string(), title, text, file});
    }
  }
  return docs;
}

const std::set<std::string, std::less<>> known_statuses = {
    "start", "route_decision", "progress", "token", "execution_log", "error", "done"};

}  // namespace

std::string chat_body(const std::string& user_id, const std::string& session_id,
                      const std::string& message, const std::string& kb_prefix,
                      const std::vector<json_field>& extra) {
  std::vector<json_field> fields{
      {"user_id", user_id}, {"session_id", session_id}, {"message", message}};
  if (!kb_prefix.empty())
    fields.push_back({"kb_prefix", kb_prefix});
  fields.insert(fields.end(), extra.begin(), extra.end());
  return json_object(fields);
}

std::string stream_result::answer() const {
  if (!done || !done->has("/content/answer"))
    return {};
  return done->str("/content/answer");
}

std::string stream_result::statuses() const {
  std::string out;
  for (const auto& e : events) {
    if (!out.empty())
      out += ',';
    out += e.has("/status") && e.is_string("/status") ? e.str("/status") : "?";
  }
  return out;
}

std::vector<json> stream_result::execution_logs(std::string_view node) const {
  std::vector<json> out;
  for (const auto& e : events)
    if (e.str("/status") == "execution_log" && (node.empty() || e.str("/content/node") == node))
      out.push_back(e.at("/content"));
  return out;
}

std::vector<std::string> stream_result::executed_nodes() const {
  std::vector<std::string> out;
  for (auto& log : execution_logs())
    out.push_back(log.str("/node"));
  return out;
}

stream_result read_stream(sse_stream& stream, std::chrono::milliseconds timeout) {
  stream_result r;
  r.status = stream.status();
  r.headers = stream.headers();
  r.chunked = stream.chunked();
  auto deadline = clock_type::now() + timeout;
  if (r.status != 200) {
    r.error_body = stream.read_body(timeout);
    r.ended = true;
    return r;
  }
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    auto ev = stream.next_event(std::max(left, std::chrono::milliseconds{0}));
    if (!ev) {
      r.ended = stream.ended();
      r.timed_out = stream.timed_out();
      return r;
    }
    r.raw.push_back(*ev);
    if (ev->is_comment)
      continue;
    if (r.done)
      r.violations.push_back("event after done: " + ev->data);
    try {
      auto j = json::parse(ev->data);
      auto status = j.has("/status") && j.is_string("/status") ? j.str("/status") : "";
      if (status == "token") {
        if (j.has("/content") && j.is_string("/content"))
          r.tokens += j.str("/content");
        else
          r.violations.push_back("token without string content: " + ev->data);
      } else if (status == "error") {
        r.errors.push_back(j);
      } else if (status == "done" && !r.done) {
        r.done = j;
      }
      r.events.push_back(std::move(j));
    } catch (const json_error& e) {
      r.violations.push_back(std::string{"unparsable event data: "} + e.what());
    }
  }
}

stream_result chat_stream(uint16_t port, const std::string& body,
                          std::chrono::milliseconds timeout) {
  auto stream = open_sse(port, chat_stream_path, body, timeout);
  return read_stream(stream, timeout);
}

::testing::AssertionResult well_formed_stream(const stream_result& r) {
  std::vector<std::string> problems = r.violations;
  if (r.status != 200)
    problems.push_back("status " + std::to_string(r.status) + ", body " + r.error_body);
  auto type = r.headers.count("content-type") ? r.headers.at("content-type") : "";
  if (!type.starts_with("text/event-stream"))
    problems.push_back("Content-Type is \"" + type + "\"");
  if (!r.chunked)
    problems.push_back("not chunked transfer encoding");
  if (r.timed_out)
    problems.push_back("timed out before the stream ended");
  if (!r.ended)
    problems.push_back("stream did not end");
  size_t starts = 0;
  size_t dones = 0;
  for (const auto& e : r.events) {
    if (!e.has("/status") || !e.is_string("/status")) {
      problems.push_back("event without string status: " + e.dump());
      continue;
    }
    auto status = e.str("/status");
    starts += status == "start";
    dones += status == "done";
    if (!known_statuses.contains(status))
      problems.push_back("unknown status \"" + status + "\"");
    if (status == "error" && (!e.has("/message") || !e.has("/code")))
      problems.push_back("error event without message/code: " + e.dump());
  }
  if (r.events.empty()) {
    problems.push_back("no events");
  } else {
    const auto& first = r.events.front();
    if (!first.has("/status") || first.str("/status") != "start")
      problems.push_back("first event is not start: " + first.dump());
    else if (!first.has("/request_id") || !first.is_string("/request_id")
             || first.str("/request_id").empty())
      problems.push_back("start without request_id: " + first.dump());
    if (!r.events.back().has("/status") || r.events.back().str("/status") != "done")
      problems.push_back("last event is not done: " + r.events.back().dump());
  }
  if (starts != 1)
    problems.push_back(std::to_string(starts) + " start events");
  if (dones != 1)
    problems.push_back(std::to_string(dones) + " done events");
  if (r.done) {
    const auto& d = *r.done;
    for (const char* p : {"/request_id", "/content/answer", "/content/conversation_id",
                          "/content/message_id", "/content/citations", "/content/partial"})
      if (!d.has(p))
        problems.push_back(std::string{"done lacks "} + p);
    if (d.has("/content/answer") && r.tokens != d.str("/content/answer"))
      problems.push_back("tokens \"" + r.tokens + "\" != answer \"" + d.str("/content/answer")
                         + "\"");
    if (!r.events.empty() && r.events.front().has("/request_id") && d.has("/request_id")
        && r.events.front().str("/request_id") != d.str("/request_id"))
      problems.push_back("start and done request_ids differ");
  }
  if (problems.empty())
    return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure()
                 << "malformed stream (events: " << r.statuses() << "):";
  for (const auto& p : problems)
    failure << "\n  - " << p;
  return failure;
}

std::filesystem::path fixture_kb_dir() {
  return source_dir() / "tests" / "data" / "kb";
}

std::vector<std::filesystem::path> fixture_kb_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator{fixture_kb_dir()})
    if (entry.is_regular_file())
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

const std::vector<fixture_doc>& fixture_docs() {
  static const std::vector<fixture_doc> docs = load_fixture_docs();
  return docs;
}

const fixture_doc* find_fixture_doc(const std::string& doc_id) {
  for (const auto& d : fixture_docs())
    if (d.doc_id == doc_id)
      return &d;
  // File documents: the server may name them by stem or by a longer path.
  for (const auto& d : fixture_docs()) {
    if (d.file.extension() == ".jsonl")
      continue;
    auto name = d.file.filename().string();
    auto stem = d.file.stem().string();
    if (doc_id == stem || doc_id.ends_with("/" + name) || doc_id.ends_with("/" + stem)
        || doc_id.ends_with(":" + name) || doc_id.ends_with(":" + stem))
      return &d;
  }
  return nullptr;
}

::testing::AssertionResult verbatim_citations(const json& citations) {
  auto items = citations.items();
  if (items.empty())
    return ::testing::AssertionFailure() << "no citations";
  std::vector<std::string> problems;
  for (const auto& c : items) {
    if (!c.has("/doc_id") || !c.has("/quote") || !c.has("/chunk_id") || !c.has("/title")
        || !c.has("/verified")) {
      problems.push_back("citation lacks doc_id/chunk_id/title/quote/verified: " + c.dump());
      continue;
    }
    auto doc_id = c.str("/doc_id");
    auto quote = c.str("/quote");
    const auto* doc = find_fixture_doc(doc_id);
    if (doc == nullptr)
      problems.push_back("doc_id \"" + doc_id + "\" is no fixture document");
    else if (quote.empty())
      problems.push_back("empty quote for " + doc_id);
    else if (doc->text.find(quote) == std::string::npos)
      problems.push_back("quote \"" + quote + "\" is not verbatim in " + doc_id);
  }
  if (problems.empty())
    return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure() << "citations " << citations.dump() << ":";
  for (const auto& p : problems)
    failure << "\n  - " << p;
  return failure;
}

}  // namespace ragtor::test
