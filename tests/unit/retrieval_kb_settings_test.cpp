// KB settings: JSON round trip, strict validation, persistence next to the
// documents, and the defaults of a KB that has no kb.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "protocol/errc.hpp"
#include "protocol/kb_json.hpp"
#include "retrieval/kb_settings.hpp"
#include "retrieval/kb_store.hpp"

namespace ragtor {
namespace {

struct scratch_dir {
  std::filesystem::path path = std::filesystem::temp_directory_path()
                               / ("ragtor_kbs_" + std::to_string(std::random_device{}()));
  ~scratch_dir() { std::filesystem::remove_all(path); }
};

TEST(kb_settings, json_round_trip_and_persistence) {
  auto s = kb_settings_from_json(R"({"name":"harbour","description":"Ships","keywords":["a","b"],)"
                                 R"("default_agent_type":"graph_agent","top_k":7,)"
                                 R"("vector_weight":0.5,"keyword_weight":1,"bm25_threshold":2.5})");
  ASSERT_TRUE(s) << error_message(s.error());
  EXPECT_EQ(s->keywords, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s->top_k, 7);
  EXPECT_DOUBLE_EQ(s->keyword_weight, 1.0);
  EXPECT_DOUBLE_EQ(s->vector_threshold, 0.0) << "missing fields keep their defaults";
  EXPECT_EQ(s->fusion, "auto");
  auto again = kb_settings_from_json(to_json(*s));
  ASSERT_TRUE(again);
  EXPECT_EQ(to_json(*again), to_json(*s));

  scratch_dir dir;
  ASSERT_FALSE(save_kb_settings(dir.path, *s));
  auto loaded = load_kb_settings(dir.path, "harbour");
  ASSERT_TRUE(loaded);
  EXPECT_EQ(to_json(*loaded), to_json(*s));
  auto fresh = load_kb_settings(dir.path, "other");
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->name, "other");
  EXPECT_DOUBLE_EQ(fresh->vector_weight, -1) << "not given: the embedder kind decides";
  EXPECT_DOUBLE_EQ(fresh->keyword_weight, -1);
  EXPECT_EQ(fresh->fusion, "auto");
  EXPECT_TRUE(fresh->typo_tolerance);
}

TEST(kb_settings, rejects_bad_values_with_the_field_named) {
  for (auto [body, field] : std::vector<std::pair<const char*, const char*>>{
           {R"({"name":"x","top_k":101})", "top_k"},
           {R"({"name":"x","vector_weight":-2})", "vector_weight"},
           {R"({"name":"x","keyword_weight":101})", "keyword_weight"},
           {R"({"name":"x","fusion":"borda"})", "fusion"},
           {R"({"name":"x","typo_tolerance":1})", "typo_tolerance"},
           {R"({"name":"x","vector_weight":0,"keyword_weight":0})", "keyword_weight"},
           {R"({"name":"x","vector_threshold":2})", "vector_threshold"},
           {R"({"name":"x","default_agent_type":"x"})", "default_agent_type"},
           {R"({"name":"General"})", "reserved"},
           {R"({"name":"a:b"})", "name"},
           {R"({"name":"x","keywords":[""]})", "keywords"},
           {R"({"name":"x","keywords":[1]})", "keywords"},
           {R"({"name":"x","extra":1})", "extra"},
       }) {
    auto s = kb_settings_from_json(body);
    ASSERT_FALSE(s) << body;
    EXPECT_NE(error_message(s.error()).find(field), std::string::npos)
        << body << " -> " << error_message(s.error());
  }
}

TEST(kb_settings, ingest_documents_replaces_by_id_and_counts) {
  scratch_dir dir;
  ASSERT_FALSE(create_kb(dir.path, "kb"));
  EXPECT_TRUE(create_kb(dir.path, "kb")) << "a second create is a conflict";
  auto r1 =
      ingest_documents(dir.path, "kb", {{"a", "A", "alpha text", ""}, {"b", "B", "beta", ""}});
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->documents_added, 2u);
  auto r2 = ingest_documents(dir.path, "kb", {{"a", "A", "new alpha", ""}, {"c", "", "gamma", ""}});
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->documents_added, 1u);
  EXPECT_EQ(r2->documents_replaced, 1u);
  EXPECT_EQ(r2->documents, 3u);
  auto docs = load_kb_documents(dir.path, "kb");
  ASSERT_TRUE(docs);
  ASSERT_EQ(docs->size(), 3u);
  EXPECT_EQ((*docs)[0].text, "new alpha") << "replaced in place, order kept";
  EXPECT_FALSE(ingest_documents(dir.path, "kb", {{"", "", "no id", ""}}));
  EXPECT_EQ(load_kb_documents(dir.path, "kb")->size(), 3u);
}

// Several ingests applied at once (kb_admin's build of what queued): each
// batch as if ingested after the one before, with its own counts.
TEST(kb_settings, batches_of_documents_are_added_in_turn_each_with_its_report) {
  scratch_dir dir;
  ASSERT_FALSE(create_kb(dir.path, "kb"));
  ASSERT_TRUE(ingest_documents(dir.path, "kb", {{"a", "A", "alpha", ""}}));
  std::vector<std::vector<document>> batches{
      {{"b", "B", "beta", ""}, {"a", "A", "alpha two", ""}},
      {{"b", "B", "beta two", ""}, {"c", "C", "gamma", ""}, {"d", "D", "delta", ""}},
      {}};
  auto added = add_documents(dir.path, "kb", batches);
  ASSERT_TRUE(added);
  ASSERT_EQ(added->reports.size(), 3u);
  EXPECT_EQ(added->reports[0].documents_added, 1u);
  EXPECT_EQ(added->reports[0].documents_replaced, 1u);
  EXPECT_EQ(added->reports[1].documents_added, 2u);
  EXPECT_EQ(added->reports[1].documents_replaced, 1u) << "b, added by the batch before";
  EXPECT_EQ(added->reports[2].documents_added + added->reports[2].documents_replaced, 0u);
  for (auto& r : added->reports)
    EXPECT_EQ(r.documents, 4u) << "the KB after all of them";
  auto stored = load_kb_documents(dir.path, "kb");
  ASSERT_TRUE(stored);
  std::vector<std::string> texts;
  for (auto& d : *stored)
    texts.push_back(d.id + "=" + d.text);
  EXPECT_EQ(texts, (std::vector<std::string>{"a=alpha two", "b=beta two", "c=gamma", "d=delta"}));
  ASSERT_EQ(added->all.size(), stored->size());
  for (size_t i = 0; i < stored->size(); ++i)
    EXPECT_EQ(added->all[i].text, (*stored)[i].text);
  // One bad batch: nothing of any is written.
  batches = {{{"e", "E", "epsilon", ""}}, {{"", "", "no id", ""}}};
  EXPECT_FALSE(add_documents(dir.path, "kb", batches));
  EXPECT_EQ(load_kb_documents(dir.path, "kb")->size(), 4u);
}

TEST(kb_json, document_bodies_json_and_ndjson) {
  auto ok = parse_documents_body(R"({"documents":[{"id":"a","text":"t","title":"T"}]})", false, 10);
  ASSERT_TRUE(ok.ok);
  EXPECT_EQ(ok.value[0].title, "T");
  auto nd = parse_documents_body("{\"id\":\"a\",\"text\":\"t\"}\r\n\n{\"id\":\"b\",\"text\":\"u\"}",
                                 true, 10);
  ASSERT_TRUE(nd.ok) << nd.error.message;
  EXPECT_EQ(nd.value.size(), 2u);
  auto too_many =
      parse_documents_body("{\"id\":\"a\",\"text\":\"t\"}\n{\"id\":\"b\",\"text\":\"u\"}", true, 1);
  EXPECT_FALSE(too_many.ok);
  auto bad_type = parse_documents_body(R"({"documents":[{"id":"a","text":5}]})", false, 10);
  EXPECT_FALSE(bad_type.ok);
  EXPECT_EQ(bad_type.error.field, "text");
  EXPECT_NE(bad_type.error.message.find("documents[0]"), std::string::npos);
  EXPECT_FALSE(parse_documents_body("\xff", false, 10).ok);
}

}  // namespace
}  // namespace ragtor
