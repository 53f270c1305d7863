// The knowledge-base API over real HTTP (DESIGN §5, issue: retrieval
// engine): create, list, info, document ingestion as JSON and NDJSON with
// replace-by-id semantics, hit testing via /search, and that a KB created
// and filled through the API is immediately usable by chat turns and
// survives a restart. Bad input is a clear 4xx and changes nothing.
#include <algorithm>
#include <cstdio>
#include <thread>

#include <gtest/gtest.h>

#include "retrieval/kb_catalog.hpp"
#include "retrieval/kb_settings.hpp"
#include "retrieval/kb_store.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

class kb_api_test : public ragtor_server_test {
protected:
  env_vars server_env() const override {
    return {{"RAGTOR_SERVER__MAX_INGEST_BYTES", "4096"}, {"RAGTOR_ADMIN__TOKEN", admin_token}};
  }
  static constexpr const char* admin_token = "kb-test-admin";

  json call(std::string_view method, const std::string& path, const std::string& body,
            int expected_status, const header_list& headers = {}) {
    auto res = request(port(), method, path, body, headers);
    EXPECT_EQ(res.status, expected_status) << method << " " << path << ": " << res.body;
    return json::parse(res.body.empty() ? "{}" : res.body);
  }

  // The entities and relations tables hold exactly the graph of `kb`'s
  // documents as its files have them, and kb_graph_state their counts.
  void expect_graph_tables_match_files(const std::string& kb) {
    auto settings = load_kb_settings(data_dir(), kb);
    auto docs = load_kb_documents(data_dir(), kb);
    ASSERT_TRUE(settings && docs);
    auto snap = kb_catalog::build_snapshot(*settings, *docs, kb_build_options{});
    auto expected = snap->graph.rows(kb, snap->chunks);
    std::vector<std::string> entities, relations;
    for (auto& e : expected.entities)
      entities.push_back(e.id + "|" + e.name + "|" + e.kind + "|" + e.description);
    for (auto& r : expected.relations)
      relations.push_back(r.id + "|" + r.source + "|" + r.target + "|" + r.kind + "|"
                          + std::to_string(r.weight) + "|" + r.chunk_id);
    std::sort(entities.begin(), entities.end());
    std::sort(relations.begin(), relations.end());
    EXPECT_EQ(db().text_rows("SELECT id, name, kind, description FROM entities "
                             "WHERE kb = '"
                             + kb + "' ORDER BY id"),
              entities);
    EXPECT_EQ(db().text_rows("SELECT id, source_entity, target_entity, kind, "
                             "printf('%.6f', weight), chunk_id FROM relations "
                             "WHERE kb = '"
                             + kb + "' ORDER BY id"),
              relations);
    EXPECT_EQ(db().scalar("SELECT entities FROM kb_graph_state WHERE kb = '" + kb + "'"),
              static_cast<int64_t>(entities.size()));
    EXPECT_EQ(db().scalar("SELECT relations FROM kb_graph_state WHERE kb = '" + kb + "'"),
              static_cast<int64_t>(relations.size()));
  }
};

constexpr const char* ships_doc =
    R"({"id":"ships","title":"Harbour ships","text":"The schooner Marigold carries saffron )"
    R"(from Port Quellin every spring. Its captain is Odile Varga."})";

TEST_F(kb_api_test, create_ingest_search_and_chat) {
  auto created = call("POST", "/api/v1/kbs",
                      R"({"name":"harbour","description":"Ships and trade of Port Quellin",)"
                      R"("keywords":["ships","saffron"],"top_k":3})",
                      201);
  EXPECT_EQ(created.str("/settings/name"), "harbour");
  EXPECT_EQ(created.integer("/documents"), 0);
  EXPECT_EQ(created.integer("/settings/top_k"), 3);

  // Listed next to the fixture KB.
  auto list = call("GET", "/api/v1/kbs", "", 200);
  std::vector<std::string> names;
  for (auto& kb : list.items("/kbs"))
    names.push_back(kb.str("/settings/name"));
  EXPECT_EQ(names, (std::vector<std::string>{"harbour", "test"}));

  // JSON ingestion.
  auto report = call("POST", "/api/v1/kbs/harbour/documents",
                     std::string{R"({"documents":[)"} + ships_doc + "]}", 200);
  EXPECT_EQ(report.integer("/documents_added"), 1);
  EXPECT_EQ(report.integer("/documents_replaced"), 0);
  EXPECT_GE(report.integer("/chunks"), 1);
  EXPECT_GT(db().scalar("SELECT COUNT(*) FROM entities WHERE kb = 'harbour'"), 0)
      << "a KB's first graph is written whole: the store held none to change";

  // NDJSON ingestion: one new document and one replacement.
  auto nd = call("POST", "/api/v1/kbs/harbour/documents",
                 "{\"id\":\"tea\",\"text\":\"Quellin tea is brewed with salt.\"}\n\n"
                 "{\"id\":\"ships\",\"title\":\"Harbour ships\",\"text\":\"The schooner Marigold "
                 "now carries indigo. Its captain is Odile Varga.\"}\n",
                 200, {{"Content-Type", "application/x-ndjson"}});
  EXPECT_EQ(nd.integer("/documents_added"), 1);
  EXPECT_EQ(nd.integer("/documents_replaced"), 1);
  EXPECT_EQ(nd.integer("/documents"), 2);

  // The ingest answered after the entity graph reached the entities and
  // relations tables: the replaced document's names are there, the old
  // ones gone.
  auto entity_count = [&](const std::string& name) {
    return db().scalar("SELECT COUNT(*) FROM entities WHERE kb = 'harbour' AND name = '" + name
                       + "'");
  };
  EXPECT_EQ(entity_count("Odile Varga"), 1);
  EXPECT_EQ(entity_count("Port Quellin"), 0);
  EXPECT_GT(db().scalar("SELECT COUNT(*) FROM relations WHERE kb = 'harbour' AND chunk_id LIKE "
                        "'ships#%'"),
            0);
  EXPECT_GT(db().scalar("SELECT COUNT(*) FROM entities WHERE kb = 'test'"), 0)
      << "KBs present at start are stored before serving";
  // This ingest sent only the rows that changed since the last one: the
  // tables hold exactly the graph of the KB's documents now.
  expect_graph_tables_match_files("harbour");

  auto info = call("GET", "/api/v1/kbs/harbour", "", 200);
  EXPECT_EQ(info.integer("/documents"), 2);
  EXPECT_EQ(info.str("/settings/description"), "Ships and trade of Port Quellin");

  // Hit testing returns a RetrievalResult; the replaced text is what is found.
  auto hits = call("POST", "/api/v1/kbs/harbour/search",
                   R"({"query":"What does the schooner Marigold carry?"})", 200);
  auto items = hits.items("/retrieval_results");
  ASSERT_FALSE(items.empty());
  EXPECT_EQ(items[0].str("/metadata/doc_id"), "ships");
  EXPECT_NE(items[0].str("/evidence").find("indigo"), std::string::npos);
  EXPECT_EQ(items[0].str("/evidence").find("saffron"), std::string::npos);
  EXPECT_EQ(items[0].str("/metadata/kb_prefix"), "harbour");
  EXPECT_FALSE(hits.items("/reference/chunks").empty());
  EXPECT_FALSE(hits.items("/trace").empty());
  auto wide = call("POST", "/api/v1/kbs/harbour/search",
                   R"({"query":"What does the schooner Marigold carry?","top_k":10})", 200);
  EXPECT_EQ(items.size(), std::min<size_t>(3, wide.items("/retrieval_results").size()))
      << "the KB's top_k (3) applies";
  auto one =
      call("POST", "/api/v1/kbs/harbour/search", R"({"query":"Marigold tea","top_k":1})", 200);
  EXPECT_EQ(one.items("/retrieval_results").size(), 1u);

  // A chat turn against the new KB cites it.
  auto r =
      chat_stream(port(), chat_body("alice", "s1", "What does the Marigold carry?", "harbour"));
  ASSERT_TRUE(well_formed_stream(r));
  ASSERT_TRUE(r.done);
  EXPECT_NE(r.done->str("/content/answer").find("indigo"), std::string::npos) << r.done->dump();

  // Everything survives a restart, which loads the index files the
  // ingest's snapshot left (written after its answer, on a thread of their
  // own, by the time the server stopped) instead of building them again.
  stop_server();
  start_server();
  auto log = server().stderr_tail(100000);
  EXPECT_NE(log.find("knowledge base \"harbour\": "), std::string::npos) << log;
  EXPECT_NE(log.find("indexes loaded in"), std::string::npos) << log;
  EXPECT_EQ(log.find("indexes built in"), std::string::npos) << log;
  auto again = call("POST", "/api/v1/kbs/harbour/search", R"({"query":"indigo"})", 200);
  ASSERT_FALSE(again.items("/retrieval_results").empty());
  EXPECT_EQ(call("GET", "/api/v1/kbs/harbour", "", 200).integer("/settings/top_k"), 3);
}

// Ingests that reach the store while the KB is being built are applied in
// the next build, together (docs/performance.md); each client still gets
// its own report, every document is searchable, and the tables hold the
// graph of the KB's documents after all of them.
TEST_F(kb_api_test, concurrent_ingests_each_get_their_own_report) {
  call("POST", "/api/v1/kbs", R"({"name":"fleet"})", 201);
  constexpr int clients = 6;
  auto doc = [](const std::string& id, const std::string& text) {
    return R"({"id":")" + id + R"(","title":"Fleet )" + id + R"(","text":")" + text + R"("})";
  };
  // One document per client, which that client replaces.
  std::string seed = R"({"documents":[)";
  for (int i = 0; i < clients; ++i)
    seed += (i ? "," : "") + doc("old" + std::to_string(i), "Old ledger entry of Port Quellin.");
  call("POST", "/api/v1/kbs/fleet/documents", seed + "]}", 200);
  // Client i replaces old<i> and adds i + 1 documents of its own, each
  // with a word no other document has.
  auto word = [](int i, int j) {
    return "cargo" + std::string(1, static_cast<char>('a' + i)) + std::to_string(j);
  };
  std::vector<http_response> replies(clients);
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i)
    threads.emplace_back([&, i] {
      auto body = std::string{R"({"documents":[)"}
                  + doc("old" + std::to_string(i), "The schooner Marigold logged a storm.");
      for (int j = 0; j <= i; ++j)
        body += ","
                + doc("c" + std::to_string(i) + "d" + std::to_string(j),
                      "Captain Odile Varga loaded " + word(i, j) + " at Port Quellin.");
      replies[i] = request(port(), "POST", "/api/v1/kbs/fleet/documents", body + "]}");
    });
  for (auto& t : threads)
    t.join();
  constexpr int total = clients + clients * (clients + 1) / 2;
  for (int i = 0; i < clients; ++i) {
    ASSERT_EQ(replies[i].status, 200) << replies[i].body;
    auto r = json::parse(replies[i].body);
    EXPECT_EQ(r.integer("/documents_added"), i + 1) << "client " << i;
    EXPECT_EQ(r.integer("/documents_replaced"), 1) << "client " << i;
    EXPECT_GE(r.integer("/documents"), clients + i + 1) << "client " << i;
    EXPECT_LE(r.integer("/documents"), total) << "client " << i;
  }
  EXPECT_EQ(call("GET", "/api/v1/kbs/fleet", "", 200).integer("/documents"), total);
  for (int i = 0; i < clients; ++i)
    for (int j = 0; j <= i; ++j) {
      auto hits = call("POST", "/api/v1/kbs/fleet/search",
                       R"({"query":")" + word(i, j) + R"(","agent_type":"hybrid_agent"})", 200);
      auto items = hits.items("/retrieval_results");
      ASSERT_FALSE(items.empty()) << word(i, j);
      EXPECT_EQ(items[0].str("/metadata/doc_id"),
                "c" + std::to_string(i) + "d" + std::to_string(j));
    }
  auto old = call("POST", "/api/v1/kbs/fleet/search", R"({"query":"old ledger entry"})", 200);
  for (auto& item : old.items("/retrieval_results"))
    EXPECT_EQ(item.str("/evidence").find("ledger"), std::string::npos)
        << "every old document was replaced: " << item.dump();
  expect_graph_tables_match_files("fleet");
  // The admin console counts every ingest, and the builds they took.
  auto listed = request(port(), "GET", "/admin/api/actors?kind=kb_admin", {},
                        {{"Authorization", std::string{"Bearer "} + admin_token}});
  ASSERT_EQ(listed.status, 200) << listed.body;
  auto admin = json::parse(listed.body).items("/actors").at(0);
  EXPECT_EQ(admin.integer("/ingests"), 1 + clients) << admin.dump();
  EXPECT_GE(admin.integer("/builds"), 2);
  EXPECT_LE(admin.integer("/builds"), admin.integer("/ingests"));
}

TEST_F(kb_api_test, bad_requests_are_refused_and_change_nothing) {
  call("POST", "/api/v1/kbs", R"({"name":"harbour"})", 201);
  // Duplicates, bad and reserved names, unknown fields, bad values.
  EXPECT_EQ(call("POST", "/api/v1/kbs", R"({"name":"harbour"})", 409).str("/error/code"),
            "conflict");
  EXPECT_EQ(call("POST", "/api/v1/kbs", R"({"name":"test"})", 409).str("/error/code"), "conflict");
  for (auto body : {R"({"name":"a:b"})", R"({"name":"bad name"})", R"({"name":"general"})",
                    R"({"name":"x","colour":"red"})", R"({"name":"x","top_k":-1})",
                    R"({"name":"x","default_agent_type":"magic_agent"})",
                    R"({"name":"x","keywords":"ships"})", R"({"description":"no name"})"})
    EXPECT_EQ(call("POST", "/api/v1/kbs", body, 400).str("/error/code"), "invalid_request") << body;
  EXPECT_EQ(call("GET", "/api/v1/kbs", "", 200).items("/kbs").size(), 2u);

  // Unknown KBs are 404 everywhere.
  call("GET", "/api/v1/kbs/nope", "", 404);
  call("POST", "/api/v1/kbs/nope/documents", std::string{R"({"documents":[)"} + ships_doc + "]}",
       404);
  call("POST", "/api/v1/kbs/nope/search", R"({"query":"x"})", 404);
  call("POST", "/api/v1/kbs/harbour/unknown", "{}", 404);
  call("DELETE", "/api/v1/kbs/harbour", "", 405);

  // Bad document bodies name the problem; nothing is stored.
  auto e1 = call("POST", "/api/v1/kbs/harbour/documents", R"({"documents":[{"id":"a"}]})", 400);
  EXPECT_EQ(e1.str("/error/field"), "text");
  auto e2 =
      call("POST", "/api/v1/kbs/harbour/documents", "{\"id\":\"a\",\"text\":\"fine\"}\n{broken\n",
           400, {{"Content-Type", "application/x-ndjson"}});
  EXPECT_NE(e2.str("/error/message").find("line 2"), std::string::npos) << e2.dump();
  call("POST", "/api/v1/kbs/harbour/documents", R"({"documents":[]})", 400);
  call("POST", "/api/v1/kbs/harbour/documents", R"({"docs":[]})", 400);
  // Over server.max_ingest_bytes (4096 here): 413.
  std::string big = R"({"documents":[{"id":"big","text":")" + std::string(5000, 'x') + "\"}]}";
  EXPECT_EQ(call("POST", "/api/v1/kbs/harbour/documents", big, 413).str("/error/code"),
            "payload_too_large");
  EXPECT_EQ(call("GET", "/api/v1/kbs/harbour", "", 200).integer("/documents"), 0);

  // Search input is validated too.
  call("POST", "/api/v1/kbs/harbour/search", R"({"query":""})", 400);
  call("POST", "/api/v1/kbs/harbour/search", R"({"query":"x","top_k":0})", 400);
  EXPECT_EQ(call("POST", "/api/v1/kbs/harbour/search", R"({"query":"x","agent_type":"nope"})", 400)
                .str("/error/field"),
            "agent_type");
}

// A body of `n` NDJSON documents (about 1 KB each); line `bad_line` (if
// any) is not JSON.
std::string ndjson_documents_body(int n, int bad_line = 0) {
  std::string body;
  for (int i = 1; i <= n; ++i) {
    if (i == bad_line) {
      body += "{\"id\": oops}\n";
      continue;
    }
    body += "{\"id\":\"d" + std::to_string(i) + "\",\"text\":\"Document " + std::to_string(i)
            + " is about lighthouse number " + std::to_string(i) + ". " + std::string(900, 'x')
            + "\"}\n";
  }
  return body;
}

// POSTs `body` to the KB's documents with chunked transfer encoding in
// pieces of 100,000 bytes (the way a streaming client sends a large file).
http_response post_chunked(uint16_t port, const std::string& kb, const std::string& body) {
  std::string raw = "POST /api/v1/kbs/" + kb +
                    "/documents HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\n"
                    "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  raw.reserve(body.size() + body.size() / 1000 + 100);
  for (size_t pos = 0; pos < body.size(); pos += 100000) {
    auto piece = body.substr(pos, 100000);
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
    raw += size + piece + "\r\n";
  }
  raw += "0\r\n\r\n";
  return request_raw(port, raw);
}

// Default limits (server.max_ingest_bytes 64 MiB).
class kb_ingest_stream_test : public ragtor_server_test {
protected:
  json call(std::string_view method, const std::string& path, const std::string& body,
            int expected_status) {
    auto res = request(port(), method, path, body);
    EXPECT_EQ(res.status, expected_status) << method << " " << path << ": " << res.body;
    return json::parse(res.body.empty() ? "{}" : res.body);
  }
};

TEST_F(kb_ingest_stream_test, large_ndjson_bodies_are_parsed_as_they_stream_in) {
  call("POST", "/api/v1/kbs", R"({"name":"big"})", 201);
  auto body = ndjson_documents_body(3000);
  ASSERT_GT(body.size(), 2'500'000u);
  auto res = post_chunked(port(), "big", body);
  ASSERT_EQ(res.status, 200) << res.body;
  auto report = json::parse(res.body);
  EXPECT_EQ(report.integer("/documents_added"), 3000);
  EXPECT_EQ(call("GET", "/api/v1/kbs/big", "", 200).integer("/documents"), 3000);
  auto hits = call("POST", "/api/v1/kbs/big/search",
                   R"({"query":"lighthouse number 2718","top_k":1})", 200);
  ASSERT_EQ(hits.items("/retrieval_results").size(), 1u);
  EXPECT_EQ(hits.items("/retrieval_results")[0].str("/metadata/doc_id"), "d2718");

  // A bad line deep in a large body: refused naming the line, nothing
  // ingested, and the server stays healthy.
  auto bad = post_chunked(port(), "big", ndjson_documents_body(3500, 2500));
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("line 2500"), std::string::npos) << bad.body;
  EXPECT_EQ(call("GET", "/api/v1/kbs/big", "", 200).integer("/documents"), 3000);
  EXPECT_TRUE(healthy());
}

}  // namespace
}  // namespace ragtor::test
