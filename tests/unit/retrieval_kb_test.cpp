// Knowledge bases on disk (ingest, replace, errors with file:line) and the
// catalog of searchable snapshots built from them.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "protocol/errc.hpp"
#include "protocol/token_count.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/kb_catalog.hpp"
#include "retrieval/kb_store.hpp"

using namespace ragtor;
namespace fs = std::filesystem;

namespace {

// A directory of its own per test, removed afterwards.
struct temp_dir {
  fs::path path;
  temp_dir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    path = fs::temp_directory_path()
           / ("ragtor-kb-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-"
              + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& body) const {
    fs::create_directories((path / name).parent_path());
    std::ofstream{path / name, std::ios::binary} << body;
  }
};

std::string read(const fs::path& file) {
  std::ifstream in{file, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_invalid_request(const caf::error& e) {
  return code_of(e) == errc::invalid_request;
}

const document* find(const std::vector<document>& docs, std::string_view id) {
  for (auto& d : docs)
    if (d.id == id)
      return &d;
  return nullptr;
}

}  // namespace

TEST(kb_store, reads_markdown_text_and_jsonl_files) {
  temp_dir src;
  src.write("guide.md", "\xEF\xBB\xBFIntro line\n# Kettle guide\n\nThe kettle whistles.\n");
  src.write("notes.txt", "\n  Plain notes about saucepans.  \nSecond line.\n");
  src.write("more.jsonl",
            "{\"id\":\"j1\",\"title\":\"Spoons\",\"text\":\"Silver spoons "
            "tarnish.\",\"extra\":{\"a\":[1]}}\n"
            "\n"
            "{\"text\":\"Forks have tines.\",\"id\":\"j2\"}\n");
  auto md = read_documents(src.path / "guide.md");
  ASSERT_TRUE(md) << error_message(md.error());
  ASSERT_EQ(md->size(), 1u);
  EXPECT_EQ((*md)[0].id, "guide");
  EXPECT_EQ((*md)[0].title, "Kettle guide");
  EXPECT_EQ((*md)[0].text, "Intro line\n# Kettle guide\n\nThe kettle whistles.\n") << "BOM removed";
  auto txt = read_documents(src.path / "notes.txt");
  ASSERT_TRUE(txt);
  EXPECT_EQ((*txt)[0].id, "notes");
  EXPECT_EQ((*txt)[0].title, "Plain notes about saucepans.");
  auto jl = read_documents(src.path / "more.jsonl");
  ASSERT_TRUE(jl) << error_message(jl.error());
  ASSERT_EQ(jl->size(), 2u);
  EXPECT_EQ((*jl)[0].id, "j1");
  EXPECT_EQ((*jl)[0].title, "Spoons");
  EXPECT_EQ((*jl)[0].text, "Silver spoons tarnish.");
  EXPECT_EQ((*jl)[1].id, "j2");
  EXPECT_EQ((*jl)[1].title, "");
}

TEST(kb_store, ingests_a_directory_and_replaces_documents_by_id) {
  temp_dir src, data;
  src.write("guide.md", "# Kettle guide\n\nThe kettle whistles at boiling point.\n");
  src.write("notes.txt", "Plain notes about saucepans.\n");
  src.write("sub/more.jsonl",
            "{\"id\":\"j1\",\"title\":\"Spoons\",\"text\":\"Silver spoons tarnish.\"}\n"
            "{\"id\":\"j2\",\"text\":\"Forks have tines.\"}\n");
  src.write("ignored.pdf", "not text");
  src.write(".hidden/secret.md", "# Secret\n\nNot for the KB.\n");
  std::vector<std::pair<size_t, size_t>> calls;
  auto r = ingest_paths(data.path, "kitchen", {src.path},
                        [&](size_t done, size_t total) { calls.emplace_back(done, total); });
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(r->documents_added, 4u);
  EXPECT_EQ(r->documents_replaced, 0u);
  EXPECT_EQ(r->chunks, 4u);
  EXPECT_EQ(calls, (std::vector<std::pair<size_t, size_t>>{{1, 3}, {2, 3}, {3, 3}}));
  EXPECT_EQ(list_kbs(data.path), std::vector<std::string>{"kitchen"});
  auto stored = load_kb_documents(data.path, "kitchen");
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->size(), 4u);
  EXPECT_EQ(find(*stored, "secret"), nullptr) << "hidden directories are skipped";

  auto cat = kb_catalog::load(data.path, {});
  ASSERT_TRUE(cat) << error_message(cat.error());
  auto snap = (*cat)->get("kitchen");
  ASSERT_TRUE(snap);
  auto hits = snap->search("silver spoon", 3);
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].doc_id, "j1");
  EXPECT_EQ(hits[0].result_id, "j1#0");
  EXPECT_EQ(hits[0].source_id, "j1#0");
  EXPECT_EQ(hits[0].granularity, "chunk");
  EXPECT_EQ(hits[0].source_type, "chunk");
  EXPECT_EQ(hits[0].evidence_tokens,
            static_cast<int32_t>(approx_tokens_xml_escaped(hits[0].evidence)))
      << "the chunk's count, for the prompt";
  EXPECT_EQ(hits[0].source, "bm25");
  EXPECT_EQ(hits[0].evidence, "Silver spoons tarnish.");
  EXPECT_EQ(hits[0].title, "Spoons");
  EXPECT_EQ(hits[0].kb_prefix, "kitchen");
  EXPECT_GT(hits[0].score, 0.0);

  // Re-ingesting a changed document replaces it; the others stay.
  src.write("sub/more.jsonl", "{\"id\":\"j1\",\"title\":\"Ladles\",\"text\":\"Wooden ladles.\"}\n");
  auto r2 = ingest_paths(data.path, "kitchen", {src.path / "sub/more.jsonl"}, {});
  ASSERT_TRUE(r2) << error_message(r2.error());
  EXPECT_EQ(r2->documents_replaced, 1u);
  EXPECT_EQ(r2->documents_added, 0u);
  auto after = load_kb_documents(data.path, "kitchen");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->size(), 4u);
  ASSERT_NE(find(*after, "j1"), nullptr);
  EXPECT_EQ(find(*after, "j1")->text, "Wooden ladles.");
  EXPECT_EQ(read(data.path / "kbs/kitchen/documents.jsonl").find("Silver"), std::string::npos)
      << "the old text is gone from disk";
  auto snap2 = (*kb_catalog::load(data.path, {}))->get("kitchen");
  ASSERT_TRUE(snap2);
  EXPECT_TRUE(snap2->search("silver", 3).empty());
  EXPECT_FALSE(snap2->search("wooden ladle", 3).empty());
  EXPECT_FALSE(snap2->search("kettle", 3).empty());
  for (auto& e : fs::directory_iterator(data.path / "kbs/kitchen"))
    EXPECT_EQ(e.path().filename(), "documents.jsonl") << "temp file left behind";
}

TEST(kb_store, stored_documents_round_trip_exactly) {
  temp_dir data, src;
  std::string tricky =
      "Quotes \" and \\ backslashes,\ttabs, \x01 control,\nnew lines, 中文, emoji 🎉.";
  src.write("t.jsonl",
            "{\"id\":\"t\",\"title\":\"T \\\"q\\\"\",\"text\":\"Quotes \\\" and \\\\ "
            "backslashes,\\ttabs, \\u0001 control,\\nnew lines, 中文, emoji 🎉.\"}\n");
  auto r = ingest_paths(data.path, "rt", {src.path / "t.jsonl"}, {});
  ASSERT_TRUE(r) << error_message(r.error());
  auto docs = load_kb_documents(data.path, "rt");
  ASSERT_TRUE(docs) << error_message(docs.error());
  ASSERT_EQ(docs->size(), 1u);
  EXPECT_EQ((*docs)[0].text, tricky);
  EXPECT_EQ((*docs)[0].title, "T \"q\"");
  EXPECT_EQ((*docs)[0].source, (src.path / "t.jsonl").string());
}

TEST(kb_store, a_bad_jsonl_line_is_reported_with_file_and_line) {
  temp_dir src, data;
  auto check = [&](const std::string& body, size_t line) {
    src.write("bad.jsonl", body);
    auto r = ingest_paths(data.path, "kb", {src.path / "bad.jsonl"}, {});
    ASSERT_FALSE(r) << body;
    EXPECT_TRUE(is_invalid_request(r.error())) << error_message(r.error());
    auto where = (src.path / "bad.jsonl").string() + ":" + std::to_string(line) + ":";
    EXPECT_NE(error_message(r.error()).find(where), std::string::npos)
        << error_message(r.error()) << " should name " << where;
  };
  check("{\"id\":\"a\",\"text\":\"ok\"}\n{\"id\":3,\"text\":\"x\"}\n", 2);
  check("{\"id\":\"a\",\"text\":\"ok\"}\n\n{\"id\":\"b\",\"text\":\"x\"", 3);  // truncated
  check("{\"id\":\"a\",\"text\":\"ok\"} trailing\n", 1);
  check("[1, 2]\n", 1);
  check("{\"id\":\"a\"}\n", 1);                // no text
  check("{\"id\":\"\",\"text\":\"x\"}\n", 1);  // empty id
  check("{\"id\":\"a\",\"text\":\"x\",\"title\":7}\n", 1);
  check("not json at all\n", 1);
  EXPECT_TRUE(list_kbs(data.path).empty()) << "a failed ingest must not create the KB";
}

TEST(kb_store, a_failed_ingest_leaves_the_kb_unchanged) {
  temp_dir src, data;
  src.write("good/a.md", "# A\n\nApples.\n");
  ASSERT_TRUE(ingest_paths(data.path, "kb", {src.path / "good"}, {}));
  auto before = read(data.path / "kbs/kb/documents.jsonl");
  src.write("mixed/b.md", "# B\n\nBananas.\n");
  src.write("mixed/c.jsonl", "{oops\n");
  EXPECT_FALSE(ingest_paths(data.path, "kb", {src.path / "mixed"}, {}));
  EXPECT_EQ(read(data.path / "kbs/kb/documents.jsonl"), before);
}

// New documents are appended to the file; what was there stays byte for
// byte, and reading it gives what a rewrite would have.
TEST(kb_store, new_documents_are_appended_to_the_file) {
  temp_dir data;
  auto doc = [](std::string id, std::string text) {
    return document{std::move(id), "Title " + text, std::move(text), "src"};
  };
  ASSERT_TRUE(ingest_documents(data.path, "kb", {doc("a", "Apples."), doc("b", "Bananas.")}));
  auto file = data.path / "kbs/kb/documents.jsonl";
  auto before = read(file);
  auto inode = [&] {
    struct stat st {};
    return ::stat(file.c_str(), &st) == 0 ? st.st_ino : 0;
  };
  auto inode_before = inode();
  std::vector<std::vector<document>> batches{{doc("c", "Cherries."), doc("d", "Dates.")},
                                             {doc("e", "Eggs."), doc("c", "Currants.")}};
  auto added = add_documents(data.path, "kb", std::move(batches));
  ASSERT_TRUE(added) << error_message(added.error());
  EXPECT_EQ(added->reports[1].documents_replaced, 1u) << "c, from the batch before";
  auto after = read(file);
  ASSERT_TRUE(after.starts_with(before)) << after;
  EXPECT_EQ(inode_before, inode()) << "the file was appended to, not replaced";
  auto appended = after.substr(before.size());
  EXPECT_EQ(std::count(appended.begin(), appended.end(), '\n'), 3) << appended;
  EXPECT_EQ(appended.find("Cherries"), std::string::npos) << "only c's last version is written";
  auto docs = load_kb_documents(data.path, "kb");
  ASSERT_TRUE(docs);
  std::vector<std::string> ids, texts;
  for (auto& d : *docs) {
    ids.push_back(d.id);
    texts.push_back(d.text);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(texts,
            (std::vector<std::string>{"Apples.", "Bananas.", "Currants.", "Dates.", "Eggs."}));
  ASSERT_EQ(added->all.size(), docs->size());
  for (size_t i = 0; i < docs->size(); ++i)
    EXPECT_EQ(added->all[i].text, (*docs)[i].text);
}

// An append cut short by a crash leaves an unfinished last line: that
// ingest was never acknowledged. Reading ignores it, the next append cuts
// it; a last document without its newline (written by hand) is kept.
TEST(kb_store, an_unfinished_last_line_is_ignored_and_cut_by_the_next_append) {
  temp_dir data;
  auto doc = [](std::string id, std::string text) {
    return document{std::move(id), "", std::move(text), "src"};
  };
  ASSERT_TRUE(ingest_documents(data.path, "kb", {doc("a", "Apples.")}));
  auto file = data.path / "kbs/kb/documents.jsonl";
  auto whole = read(file);
  std::ofstream{file, std::ios::binary | std::ios::app} << "{\"id\":\"b\",\"text\":\"Bana";
  auto docs = load_kb_documents(data.path, "kb");
  ASSERT_TRUE(docs) << error_message(docs.error());
  ASSERT_EQ(docs->size(), 1u);
  EXPECT_EQ((*docs)[0].id, "a");
  auto snap = (*kb_catalog::load(data.path, {}))->get("kb");
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->documents, 1u);

  ASSERT_TRUE(ingest_documents(data.path, "kb", {doc("c", "Cherries.")}));
  auto after = read(file);
  EXPECT_TRUE(after.starts_with(whole)) << after;
  EXPECT_EQ(after.find("Bana"), std::string::npos) << after;
  docs = load_kb_documents(data.path, "kb");
  ASSERT_TRUE(docs) << error_message(docs.error());
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[1].text, "Cherries.");

  // A whole document on the last line, without its newline.
  std::ofstream{file, std::ios::binary | std::ios::app} << "{\"id\":\"d\",\"text\":\"Dates.\"}";
  docs = load_kb_documents(data.path, "kb");
  ASSERT_TRUE(docs);
  ASSERT_EQ(docs->size(), 3u);
  ASSERT_TRUE(ingest_documents(data.path, "kb", {doc("e", "Eggs.")}));
  docs = load_kb_documents(data.path, "kb");
  ASSERT_TRUE(docs) << error_message(docs.error());
  std::vector<std::string> ids;
  for (auto& d : *docs)
    ids.push_back(d.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "c", "d", "e"}));

  // Anywhere but on the last line, a bad line is still an error.
  std::ofstream{file, std::ios::binary | std::ios::app} << "{\"id\":\"f\"\n";
  EXPECT_FALSE(load_kb_documents(data.path, "kb"));

  // A file that starts with a byte order mark (written by an editor) is
  // cut where its bytes are, not where its text is.
  std::ofstream{file, std::ios::binary | std::ios::trunc}
      << "\xEF\xBB\xBF{\"id\":\"a\",\"text\":\"Apples.\"}\n{\"id\":\"b\",\"te";
  ASSERT_TRUE(ingest_documents(data.path, "kb", {doc("c", "Cherries.")}));
  docs = load_kb_documents(data.path, "kb");
  ASSERT_TRUE(docs) << error_message(docs.error());
  ids.clear();
  for (auto& d : *docs)
    ids.push_back(d.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "c"}));
  EXPECT_TRUE(read(file).starts_with("\xEF\xBB\xBF{\"id\":\"a\",\"text\":\"Apples.\"}\n{"));
}

TEST(kb_store, rejects_bad_names_paths_and_encodings) {
  temp_dir src, data;
  src.write("ok.md", "# Ok\n\nFine.\n");
  src.write("latin1.txt", "caf\xE9\n");
  src.write("doc.pdf", "%PDF");
  std::string too_long(129, 'k');
  for (std::string name : {std::string{"bad name!"}, std::string{}, std::string{".."},
                           std::string{"."}, std::string{"a/b"}, std::string{"a:b"}, too_long}) {
    auto r = ingest_paths(data.path, name, {src.path / "ok.md"}, {});
    ASSERT_FALSE(r) << "accepted KB name '" << name << "'";
    EXPECT_TRUE(is_invalid_request(r.error())) << error_message(r.error());
  }
  EXPECT_TRUE(is_valid_kb_name("demo"));
  EXPECT_TRUE(is_valid_kb_name("team-a.docs@v1.2_x"));
  EXPECT_FALSE(is_valid_kb_name("team-a:docs")) << "':' separates worker_name segments";
  EXPECT_TRUE(is_valid_kb_name(std::string(128, 'k')));
  EXPECT_FALSE(ingest_paths(data.path, "kb", {src.path / "missing.md"}, {}));
  EXPECT_FALSE(ingest_paths(data.path, "kb", {src.path / "doc.pdf"}, {}));
  auto r = ingest_paths(data.path, "kb", {src.path / "latin1.txt"}, {});
  ASSERT_FALSE(r);
  EXPECT_NE(error_message(r.error()).find("UTF-8"), std::string::npos);
  EXPECT_TRUE(list_kbs(data.path).empty());
  EXPECT_TRUE(list_kbs(data.path / "nowhere").empty());
}

TEST(kb_catalog, snapshots_are_swapped_whole) {
  auto cat = std::make_shared<kb_catalog>();
  EXPECT_EQ(cat->get("demo"), nullptr);
  EXPECT_TRUE(cat->names().empty());
  std::vector<document> v1 = {{"a", "Apples", "Apples are red. They grow on trees.", ""}};
  cat->put(kb_catalog::build_snapshot("demo", v1, {}));
  auto old = cat->get("demo");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->chunks.size(), 1u);
  EXPECT_EQ(old->index.size(), 1u);
  std::vector<document> v2 = {{"b", "Bananas", "Bananas are yellow.", ""},
                              {"c", "Cherries", "Cherries are small.", ""}};
  cat->put(kb_catalog::build_snapshot("demo", v2, {}));
  cat->put(kb_catalog::build_snapshot("other", v1, {}));
  cat->put(nullptr);
  EXPECT_EQ(cat->names(), (std::vector<std::string>{"demo", "other"}));
  auto now = cat->get("demo");
  EXPECT_EQ(now->chunks.size(), 2u);
  EXPECT_TRUE(now->search("apples", 5).empty());
  // A reader holding the old snapshot still searches the old data.
  auto hits = old->search("red apples", 5);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].doc_id, "a");
  EXPECT_EQ(hits[0].kb_prefix, "demo");
  EXPECT_TRUE(now->search("", 5).empty());
}

TEST(kb_catalog, demo_kb_answers_questions_about_ragtor) {
  // The shipped demo KB ingests cleanly and finds the right document.
  temp_dir data;
  auto kb_dir = fs::path{__FILE__}.parent_path().parent_path().parent_path() / "examples/kb";
  if (!fs::exists(kb_dir))
    GTEST_SKIP() << kb_dir << " not found";
  auto r = ingest_paths(data.path, "demo", {kb_dir}, {});
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_GE(r->documents_added, 4u);
  auto cat = kb_catalog::load(data.path, {});
  ASSERT_TRUE(cat);
  auto snap = (*cat)->get("demo");
  ASSERT_TRUE(snap);
  auto top_doc = [&](std::string_view q) {
    auto hits = snap->search(q, 3);
    return hits.empty() ? std::string{} : hits[0].doc_id;
  };
  EXPECT_EQ(top_doc("which SSE events does the stream endpoint send"), "http_api");
  EXPECT_EQ(top_doc("override a setting with an environment variable"), "configuration");
  EXPECT_EQ(top_doc("how do I run the tests"), "running_ragtor");
  EXPECT_EQ(top_doc("what does the agent pool do"), "architecture");
  EXPECT_EQ(top_doc("BM25 hybrid vector search"), "retrieval");
}
