// Plain-code parts of the model gateway: the SSE line parser, the wire
// JSON, the token counter, the prompt builder's sections and budget, the
// streaming citation parser, and structured-output parsing.
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "llm/citation_parser.hpp"
#include "llm/openai_wire.hpp"
#include "llm/prompt_builder.hpp"
#include "llm/rerank.hpp"
#include "llm/router_prompt.hpp"
#include "llm/structured_output.hpp"
#include "protocol/token_count.hpp"

namespace ragtor::llm {
namespace {

TEST(sse_parser, events_survive_every_split_point) {
  std::string wire =
      ": keep-alive\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata:line1\ndata: line2\n\n"
      "data: [DONE]\n\n";
  std::vector<std::string> expected{"{\"a\":1}", "line1\nline2", "[DONE]"};
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    sse_parser p;
    auto a = p.push(std::string_view{wire}.substr(0, cut));
    auto b = p.push(std::string_view{wire}.substr(cut));
    a.insert(a.end(), b.begin(), b.end());
    EXPECT_EQ(a, expected) << "cut at " << cut;
  }
}

TEST(openai_wire, tool_calls_are_parsed_leniently) {
  auto c = parse_completion(
      R"({"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[)"
      R"({"id":"a","type":"function","function":{"name":"grade","arguments":"{\"query\":\"x\"}"}},)"
      R"({"type":"function","function":{"name":"rerank","arguments":{"query":"y"}}},)"
      R"({"id":"z","type":"function","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->text, "");
  EXPECT_EQ(c->finish_reason, "tool_calls");
  ASSERT_EQ(c->tool_calls.size(), 2u) << "a call without a function name is skipped";
  EXPECT_EQ(c->tool_calls[0].id, "a");
  EXPECT_EQ(c->tool_calls[0].arguments, R"({"query":"x"})");
  EXPECT_EQ(c->tool_calls[1].name, "rerank");
  EXPECT_EQ(c->tool_calls[1].arguments, R"({"query":"y"})") << "object arguments become JSON text";
  EXPECT_EQ(c->tool_calls[1].id, "call_2");
  auto plain = parse_completion(R"({"choices":[{"message":{"content":"hi"}}]})");
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->tool_calls.empty());

  chat_params p;
  p.messages = {{"user", "q"}};
  chat_message a{"assistant", ""};
  a.tool_calls = {{"c1", "grade", R"({"query":"q"})"}};
  p.messages.push_back(a);
  chat_message t{"tool", "ok"};
  t.tool_call_id = "c1";
  p.messages.push_back(t);
  p.tools_json = R"([{"type":"function"}])";
  p.tool_choice = "required";
  auto body = build_chat_body("m", p, false);
  EXPECT_NE(body.find(R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"grade","arguments":"{\"query\":\"q\"}"}}]})"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find(R"({"role":"tool","content":"ok","tool_call_id":"c1"})"), std::string::npos)
      << body;
  EXPECT_NE(body.find(R"("tools":[{"type":"function"}],"tool_choice":"required")"),
            std::string::npos)
      << body;
  chat_params none;
  none.messages = {{"user", "q"}};
  EXPECT_EQ(build_chat_body("m", none, false).find("tools"), std::string::npos);
}

TEST(openai_wire, chunks_completions_embeddings_and_errors) {
  auto c = parse_stream_chunk(
      R"({"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->delta, "Hi");
  auto u =
      parse_stream_chunk(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}})");
  ASSERT_TRUE(u && u->tokens);
  EXPECT_EQ(u->tokens->completion_tokens, 4);
  auto f = parse_stream_chunk(R"({"choices":[{"delta":{},"finish_reason":"length"}]})");
  EXPECT_EQ(f->finish_reason, "length");
  EXPECT_EQ(parse_stream_chunk(R"({"error":{"message":"boom"}})")->error, "boom");
  EXPECT_FALSE(parse_stream_chunk("{not json"));
  auto comp = parse_completion(
      R"({"choices":[{"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}]})");
  ASSERT_TRUE(comp);
  EXPECT_EQ(comp->text, "x");
  auto emb =
      parse_embeddings(R"({"data":[{"index":1,"embedding":[0.5]},{"index":0,"embedding":[1,2]}]})");
  ASSERT_TRUE(emb);
  EXPECT_EQ((*emb)[0], (std::vector<float>{1, 2})) << "ordered by index";
  EXPECT_EQ(parse_error_body(R"({"error":{"message":"rate limited"}})"), "rate limited");
  chat_params p;
  p.messages = {{"user", "quote \" and \n newline"}};
  p.max_tokens = 5;
  auto body = build_chat_body("m", p, true);
  EXPECT_NE(body.find(R"("stream":true,"stream_options":{"include_usage":true})"),
            std::string::npos);
  EXPECT_NE(body.find(R"(quote \" and \n newline)"), std::string::npos);
}

TEST(openai_wire, rerank_bodies_both_ways) {
  EXPECT_EQ(build_rerank_body("r", "tea \"hot\"", {"a", "b"}, 2),
            R"({"model":"r","query":"tea \"hot\"","documents":["a","b"],"top_n":2})");
  // Cohere/Jina/vLLM: {"results": [...]}, sorted best first whatever the
  // server's order; out-of-range, repeated and scoreless entries dropped.
  auto hits = parse_rerank(
      R"({"id":"x","results":[{"index":0,"relevance_score":0.1},{"index":2,"relevance_score":0.9},)"
      R"({"index":2,"relevance_score":0.95},{"index":7,"relevance_score":1.0},{"index":1}]})",
      3);
  ASSERT_TRUE(hits);
  ASSERT_EQ(hits->size(), 2u);
  EXPECT_EQ((*hits)[0].index, 2u);
  EXPECT_DOUBLE_EQ((*hits)[0].score, 0.9);
  EXPECT_EQ((*hits)[1].index, 0u);
  // TEI: a bare array with "score".
  auto tei = parse_rerank(R"([{"index":1,"score":2.5},{"index":0,"score":-1}])", 2);
  ASSERT_TRUE(tei);
  EXPECT_EQ((*tei)[0].index, 1u);
  EXPECT_FALSE(parse_rerank(R"({"results":[]})", 2));
  EXPECT_FALSE(parse_rerank(R"({"data":[{"index":0,"relevance_score":1}]})", 2));
  EXPECT_FALSE(parse_rerank("not json", 2));
}

TEST(token_count, counts_words_cjk_and_symbols) {
  EXPECT_EQ(approx_tokens(""), 0u);
  EXPECT_EQ(approx_tokens("tea"), 1u);
  EXPECT_EQ(approx_tokens("tea pot!"), 3u);
  EXPECT_EQ(approx_tokens("internationalisation"), 5u);
  EXPECT_EQ(approx_tokens("泡茶的水温"), 5u);
  EXPECT_LT(approx_tokens("a short text"), approx_tokens("a short text that keeps going on"));
  // ASCII takes a table look-up, the rest is decoded: mixed runs count
  // the same either way (a word may continue from ASCII into é).
  EXPECT_EQ(approx_tokens("café_au_lait, s'il\tvous\r\nplaît"), 11u);
  EXPECT_EQ(approx_tokens("tea泡茶 tea"), 4u);
  EXPECT_EQ(approx_tokens("a\xE4"), 1u) << "a cut-off lead byte at the end joins the word";
}

// The rule, written plainly: code points decoded one by one (a lead byte
// whose sequence is cut off is one byte); a word (ASCII letters, digits,
// '_', or a code point from U+0080 below U+2E80) is ceil(bytes / 4)
// tokens; white space nothing; any other code point one.
size_t tokens_by_the_rule(std::string_view s) {
  size_t tokens = 0, word = 0;
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
    if (i + len > s.size())
      len = 1;
    uint32_t cp = len == 1 ? b : b & (0xFFu >> (len + 1));
    for (size_t k = 1; k < len; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    bool is_word = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9')
                   || cp == '_' || (cp >= 0x80 && cp < 0x2E80);
    if (is_word) {
      word += len;
    } else {
      tokens += (word + 3) / 4;
      word = 0;
      if (cp != ' ' && cp != '\t' && cp != '\n' && cp != '\r')
        ++tokens;
    }
    i += len;
  }
  return tokens + (word + 3) / 4;
}

// Mostly-ASCII text is counted 64 bytes at a time from bit masks; every
// other block byte by byte. Random texts of every length up to 400 bytes,
// from pieces that put words, spaces, symbols, accented letters, CJK,
// emoji and broken UTF-8 on and across the blocks' edges, count as the
// rule says.
TEST(token_count, blocks_count_as_the_rule_says) {
  const std::vector<std::string> pieces{
      "a", "Z", "9", "_", " ", "\t", "\n", "\r", ".", "&", "<", "\x01", "\x7f", "\v",
      "caf\xC3\xA9", "\xE6\xB3\xA1", "\xF0\x9F\x98\x80", "\x80", "\xE4", "tea",
      std::string(63, 'w'), std::string(64, 'x'), std::string(65, 'y'), "  ", "word_word"};
  std::mt19937 rng{20261128};
  for (int n = 0; n < 3000; ++n) {
    std::string s;
    auto target = rng() % 400;
    while (s.size() < target)
      s += pieces[rng() % pieces.size()];
    // Mostly ASCII, as prompts are: most texts drop their non-ASCII pieces.
    if (n % 3 != 0)
      std::erase_if(s, [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
    ASSERT_EQ(approx_tokens(s), tokens_by_the_rule(s)) << "text " << n << ": " << s;
  }
  for (size_t lead = 0; lead < 70; ++lead)
    for (size_t len : {1, 4, 5, 63, 64, 65, 127, 128, 129, 200}) {
      auto s = std::string(lead, ' ') + std::string(len, 'q') + "!";
      ASSERT_EQ(approx_tokens(s), (len + 3) / 4 + 1) << lead << " spaces, a word of " << len;
      auto t = std::string(lead, 'p') + "," + std::string(len, 'q');
      ASSERT_EQ(approx_tokens(t), (lead + 3) / 4 + 1 + (len + 3) / 4) << lead << ", " << len;
    }
}

// The text with &, <, > and " as entities, one character at a time.
std::string escaped_naively(std::string_view s) {
  std::string out;
  for (char c : s)
    out += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&quot;"
                                                                      : std::string(1, c);
  return out;
}

// A text's count as a prompt writes it (XML-escaped) is its count
// escaped, without escaping it: random valid UTF-8 with the four special
// characters anywhere, next to words, spaces, symbols and CJK.
TEST(token_count, the_escaped_count_is_the_count_of_the_escaped_text) {
  const std::vector<std::string> pieces{"a",
                                        "Z",
                                        "9",
                                        "_",
                                        " ",
                                        "\n",
                                        ".",
                                        "&",
                                        "<",
                                        ">",
                                        "\"",
                                        "'",
                                        "tea",
                                        "caf\xC3\xA9",
                                        "\xE6\xB3\xA1",
                                        "&&",
                                        "<b>",
                                        "x&y",
                                        std::string(70, 'w')};
  std::mt19937 rng{20261129};
  for (int n = 0; n < 2000; ++n) {
    std::string s;
    auto target = rng() % 300;
    while (s.size() < target)
      s += pieces[rng() % pieces.size()];
    ASSERT_EQ(approx_tokens_xml_escaped(s), approx_tokens(escaped_naively(s))) << s;
  }
}

// Special characters anywhere in a long document, on and across the
// 16-byte steps the escaping passes over, are all escaped.
TEST(prompt_builder, documents_are_escaped_wherever_their_special_characters_fall) {
  std::mt19937 rng{7};
  const std::string specials = "&<>\"";
  for (int n = 0; n < 300; ++n) {
    std::string text(rng() % 200, 'k');
    for (auto& c : text)
      if (rng() % 23 == 0)
        c = specials[rng() % specials.size()];
    retrieval_result ev;
    retrieval_item it;
    it.result_id = "d#0";
    it.doc_id = "d";
    it.title = "t";
    it.evidence = text;
    ev.retrieval_results.push_back(it);
    prompt_inputs in;
    in.evidence = &ev;
    in.question = "q?";
    auto p = build_prompt(in);
    EXPECT_NE(p.messages[0].content.find(">\n" + escaped_naively(text) + "\n</document>"), std::string::npos)
        << text;
  }
}

stored_message msg(int64_t seq, std::string role, std::string content) {
  stored_message m;
  m.seq = seq;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

retrieval_result evidence(size_t n) {
  retrieval_result r;
  for (size_t i = 0; i < n; ++i) {
    retrieval_item it;
    it.result_id = "d" + std::to_string(i) + "#0";
    it.doc_id = "d" + std::to_string(i);
    it.title = "Title <" + std::to_string(i) + ">";
    it.evidence = std::string(400, 'a' + static_cast<char>(i % 26)) + " & more";
    r.retrieval_results.push_back(it);
  }
  return r;
}

TEST(prompt_builder, sections_in_order_and_empty_ones_omitted) {
  auto ev = evidence(2);
  prompt_inputs in;
  in.summary = "They asked about tea.";
  in.memories = {"prefers green tea"};
  in.evidence = &ev;
  in.window = {msg(1, "user", "earlier question"), msg(2, "assistant", "earlier answer")};
  in.question = "now?";
  auto p = build_prompt(in);
  ASSERT_EQ(p.messages.size(), 4u);
  auto& sys = p.messages[0].content;
  auto pos = [&](std::string_view s) { return sys.find(s); };
  EXPECT_LT(pos("<system_instruction>"), pos("<user_memory>"));
  EXPECT_LT(pos("<user_memory>"), pos("<conversation_summary>"));
  EXPECT_LT(pos("<conversation_summary>"), pos("<documents>"));
  EXPECT_LT(pos("<documents>"), pos("<output_rules>"));
  EXPECT_EQ(pos("<episodic_memory>"), std::string::npos);
  EXPECT_NE(pos("title=\"Title &lt;0&gt;\""), std::string::npos) << "attributes escaped";
  EXPECT_NE(pos("&amp; more"), std::string::npos);
  EXPECT_EQ(p.messages[1].role, "user");
  EXPECT_EQ(p.messages[2].role, "assistant");
  EXPECT_EQ(p.messages[3].content, "now?");
  EXPECT_EQ(p.doc_ids_included, (std::vector<std::string>{"d0", "d1"}));

  prompt_inputs general;
  general.question = "hi";
  auto g = build_prompt(general);
  EXPECT_EQ(g.messages[0].content.find("<documents>"), std::string::npos);
  EXPECT_EQ(g.messages[0].content.find("<cite"), std::string::npos);
}

TEST(prompt_builder, the_budget_trims_least_useful_material_first) {
  auto ev = evidence(6);
  prompt_inputs in;
  in.evidence = &ev;
  in.episodic = {std::string(800, 'e')};
  for (int i = 0; i < 6; ++i)
    in.window.push_back(msg(i, i % 2 ? "assistant" : "user", std::string(400, 'w')));
  in.question = "q";
  in.budget_tokens = 600;
  auto p = build_prompt(in);
  EXPECT_LE(p.prompt_tokens, 600u);
  ASSERT_FALSE(p.dropped.empty());
  EXPECT_EQ(p.dropped[0], "episodic memory") << "recall goes first";
  EXPECT_EQ(p.messages.size(), 1u + 2u + 1u) << "the last two window messages stay";
  EXPECT_GE(p.doc_ids_included.size(), 1u);
  EXPECT_EQ(p.doc_ids_included[0], "d0") << "the best document stays";
  in.budget_tokens = 100000;
  EXPECT_TRUE(build_prompt(in).dropped.empty());
}

// Builds `in`'s prompt at every budget from `from` to `to` and checks that
// its count is what counting its rendered messages gives (each message's
// text, 4 for each between the first and the last, 8 for the request);
// answers how many different trimming stages the budgets reached.
size_t stages_counted_as_rendered(prompt_inputs& in, size_t from, size_t to, size_t step) {
  std::set<size_t> stages;
  for (size_t budget = from; budget <= to; budget += step) {
    in.budget_tokens = budget;
    auto p = build_prompt(in);
    size_t counted = 8;
    for (size_t i = 0; i < p.messages.size(); ++i)
      counted +=
          approx_tokens(p.messages[i].content) + (i > 0 && i + 1 < p.messages.size() ? 4 : 0);
    EXPECT_EQ(p.prompt_tokens, counted) << "budget " << budget;
    stages.insert(p.dropped.size());
  }
  return stages.size();
}

// What build_prompt counts is what counting its rendered messages gives,
// at every budget: whole, and trimmed at each stage (the prompt is
// rendered once in parts and trimming subtracts what it drops).
TEST(prompt_builder, the_count_is_the_rendered_prompts_at_every_budget) {
  auto ev = evidence(4);
  ev.retrieval_results[1].evidence = "泡茶的水温 & <b>tea</b> \"quoted\" é";
  prompt_inputs in;
  in.evidence = &ev;
  in.core_memory = "name: Ana & co";
  in.memories = {"prefers green tea", "dislikes <coffee>", "lives in 北京"};
  in.summary = std::string(300, 's') + " — summary end";
  in.episodic = {std::string(200, 'e'), "an earlier turn: tea & biscuits"};
  for (int i = 0; i < 6; ++i)
    in.window.push_back(msg(i, i % 2 ? "assistant" : "user", std::string(150, 'w') + " ok"));
  in.question = "which tea?";
  EXPECT_GE(stages_counted_as_rendered(in, 100, 2600, 25), 10u)
      << "the budgets trim at many different stages";
}

// Items from a KB carry their text's count (the chunker's): the prompt
// takes it instead of counting the text, and its count is still the
// rendered prompt's at every budget, the first document cut to fit
// included (its cut text is counted).
TEST(prompt_builder, a_chunks_count_stands_for_its_text) {
  auto ev = evidence(4);
  ev.retrieval_results[1].evidence = "泡茶的水温 & <b>tea</b> \"quoted\" é";
  for (auto& it : ev.retrieval_results)
    it.evidence_tokens = static_cast<int32_t>(approx_tokens_xml_escaped(it.evidence));
  prompt_inputs in;
  in.evidence = &ev;
  in.question = "which tea?";
  EXPECT_GE(stages_counted_as_rendered(in, 100, 1000, 10), 3u)
      << "whole, documents dropped, the first one cut";
  // The count given is the one used: one more for each item, four more.
  in.budget_tokens = 100000;
  auto before = build_prompt(in).prompt_tokens;
  for (auto& it : ev.retrieval_results)
    ++it.evidence_tokens;
  EXPECT_EQ(build_prompt(in).prompt_tokens, before + 4);
}

// A generation request's prompt, built by the turn's stream
// (build_request_prompt), is the one its context gives build_prompt, as
// the gateway built it: instructions, budget and citations included. The
// context moves into it; the evidence stays for the citations.
TEST(prompt_builder, a_requests_prompt_is_the_one_its_context_gives) {
  generation_request req;
  req.request_id = "r1";
  req.question = "which tea?";
  req.history = {msg(1, "user", "earlier question"), msg(2, "assistant", "earlier answer")};
  req.evidence = evidence(3);
  req.core_memory = "name: Ana";
  req.memories = {"prefers green tea"};
  req.episodic = {"an earlier turn: tea & biscuits"};
  req.summary = "They asked about tea.";
  for (bool general : {false, true})
    for (const std::string instructions : {"", "Answer in French."})
      for (size_t budget : {size_t{60}, size_t{6000}}) {
        auto built = req;
        built.general = general;
        built.instructions = instructions;
        prompt_inputs in;
        in.system_instructions = instructions.empty() ? "Be brief." : instructions;
        in.evidence = general ? nullptr : &req.evidence;
        in.window = req.history;
        in.core_memory = req.core_memory;
        in.memories = req.memories;
        in.episodic = req.episodic;
        in.summary = req.summary;
        in.question = req.question;
        in.budget_tokens = budget;
        in.citations = !general;
        auto want = build_prompt(in);
        build_request_prompt(built, budget, "Be brief.");
        ASSERT_EQ(built.prompt.size(), want.messages.size());
        for (size_t i = 0; i < want.messages.size(); ++i) {
          EXPECT_EQ(built.prompt[i].role, want.messages[i].role);
          EXPECT_EQ(built.prompt[i].content, want.messages[i].content);
        }
        EXPECT_EQ(built.prompt_tokens, static_cast<int32_t>(want.prompt_tokens));
        EXPECT_TRUE(built.history.empty());
        EXPECT_TRUE(built.memories.empty());
        EXPECT_TRUE(built.episodic.empty());
        EXPECT_TRUE(built.summary.empty());
        EXPECT_TRUE(built.core_memory.empty());
        ASSERT_EQ(built.evidence.retrieval_results.size(), 3u) << "kept for citations";
        EXPECT_EQ(built.evidence.retrieval_results[2].evidence, req.evidence.retrieval_results[2].evidence);
        EXPECT_EQ(built.question, req.question);
        auto params = request_chat_params(built, 0.2, 99);
        EXPECT_EQ(params.messages.size(), want.messages.size());
        EXPECT_TRUE(built.prompt.empty()) << "the prompt moves into the call";
        EXPECT_EQ(params.temperature, 0.2) << "the default: the request names none";
        EXPECT_EQ(params.max_tokens, 99);
      }
}

std::vector<citation_source> sources() {
  return {{"tea", "tea#0", "Tea",
           "Japanese sencha tastes best at 70 degrees.\nBlack tea likes boiling water."},
          {"cn", "cn#0", "茶", "绿茶的最佳水温是八十度左右。"}};
}

TEST(citation_parser, tags_are_stripped_at_every_split_point) {
  std::string answer =
      "Sencha: <cite doc_id=\"tea\" quote=\"japanese  SENCHA tastes best at 70 degrees.\">70 "
      "degrees</cite>; <cite doc_id='cn' quote='绿茶的最佳水温是八十度左右'>八十度</cite> and "
      "a < b <citation>kept</citation> <cite doc_id=\"tea\" quote=\"Tea is purple &amp; "
      "loud.\">forged</cite>.";
  std::string expected_text =
      "Sencha: 70 degrees; 八十度 and a < b <citation>kept</citation> forged.";
  for (size_t cut = 0; cut <= answer.size(); ++cut) {
    citation_stream_parser p{sources()};
    auto text = p.feed(std::string_view{answer}.substr(0, cut));
    text += p.feed(std::string_view{answer}.substr(cut));
    text += p.finish();
    ASSERT_EQ(text, expected_text) << "cut at " << cut;
    auto& c = p.citations();
    ASSERT_EQ(c.size(), 3u);
    EXPECT_TRUE(c[0].verified);
    EXPECT_EQ(c[0].chunk_id, "tea#0");
    EXPECT_TRUE(c[1].verified) << "CJK quote";
    EXPECT_FALSE(c[2].verified);
    EXPECT_EQ(c[2].quote, "Tea is purple & loud.");
  }
}

TEST(citation_parser, unknown_documents_short_quotes_and_broken_tags) {
  citation_stream_parser p{sources()};
  auto t = p.feed("x <cite doc_id=\"ghost\" quote=\"Japanese sencha tastes best\">y</cite> ");
  t += p.feed("<cite doc_id=\"tea\" quote=\"70\">z</cite> <cite never closed");
  t += p.finish();
  EXPECT_EQ(t, "x y z <cite never closed");
  ASSERT_EQ(p.citations().size(), 2u);
  EXPECT_FALSE(p.citations()[0].verified) << "unknown doc";
  EXPECT_FALSE(p.citations()[1].verified) << "too short to verify";
  EXPECT_TRUE(quote_matches("“Black tea likes boiling water.”",
                            "He said \"Black tea likes boiling water.\""));
  EXPECT_FALSE(quote_matches("", "anything"));
}

TEST(structured_output, finds_json_in_messy_replies) {
  EXPECT_EQ(extract_json_object("```json\n{\"a\": 1,}\n```"), "{\"a\": 1}");
  EXPECT_EQ(
      extract_json_object("Sure! Here: {\"a\": \"}{\", \"b\": {\"c\": [1,2,]}} hope it helps"),
      "{\"a\": \"}{\", \"b\": {\"c\": [1,2]}}");
  EXPECT_EQ(extract_json_object("{broken {\"ok\": true}"), "{\"ok\": true}");
  EXPECT_FALSE(extract_json_object("no json here"));
  EXPECT_FALSE(extract_json_object("{\"truncated\": "));
  auto r = parse_structured("{\"Confidence\": \"0.9\", \"flag\": \"yes\", \"tags\": \"one\"}",
                            {{"confidence", field_type::number},
                             {"flag", field_type::boolean},
                             {"tags", field_type::string_array},
                             {"missing", field_type::string, false}});
  ASSERT_TRUE(std::holds_alternative<parsed_fields>(r)) << std::get<std::string>(r);
  auto& f = std::get<parsed_fields>(r);
  EXPECT_DOUBLE_EQ(f.numbers.at("confidence"), 0.9);
  EXPECT_TRUE(f.bools.at("flag"));
  EXPECT_EQ(f.arrays.at("tags"), std::vector<std::string>{"one"});
  auto bad = parse_structured("{\"confidence\": [1]}", {{"confidence", field_type::number}});
  ASSERT_TRUE(std::holds_alternative<std::string>(bad));
  EXPECT_NE(std::get<std::string>(bad).find("confidence"), std::string::npos);
  parsed_fields fallback;
  fallback.strings["kb"] = "general";
  EXPECT_EQ(
      parse_or_default("nothing", {{"kb", field_type::string}}, fallback, "test").strings.at("kb"),
      "general");
}

TEST(router_prompt, prompt_lists_kbs_and_replies_parse_robustly) {
  std::vector<kb_profile> kbs{{"Tea", "Brewing tea", {"kettle"}}, {"harbour", "Ships", {}}};
  auto msgs = build_router_messages(std::string(5000, 'x'), kbs);
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_NE(msgs[0].content.find("- Tea: Brewing tea (keywords: kettle)"), std::string::npos);
  EXPECT_NE(msgs[0].content.find("\"kb_prefix\""), std::string::npos);
  EXPECT_EQ(msgs[1].content.size(), 2000u);
  auto good = parse_router_reply(
      "```json\n{\"kb_prefix\": \"tea\", \"confidence\": \"0.9\", \"reason\": \"r\", "
      "\"intent\": \"kb_query\", \"agent_type\": \"graph_agent\"}\n```",
      kbs);
  ASSERT_TRUE(good.ok) << good.error;
  EXPECT_EQ(good.kb_prefix, "Tea") << "normalised to the real name";
  EXPECT_DOUBLE_EQ(good.confidence, 0.9);
  EXPECT_EQ(good.agent_type, "graph_agent");
  auto clamped =
      parse_router_reply("{\"kb_prefix\":\"harbour\",\"confidence\":7,\"agent_type\":\"x\"}", kbs);
  EXPECT_TRUE(clamped.ok);
  EXPECT_DOUBLE_EQ(clamped.confidence, 1.0);
  EXPECT_EQ(clamped.agent_type, "");
  EXPECT_FALSE(parse_router_reply("{\"kb_prefix\":\"mars\"}", kbs).ok);
  EXPECT_FALSE(parse_router_reply("I think tea", kbs).ok);
  EXPECT_EQ(parse_router_reply("{\"kb_prefix\":\"general\"}", kbs).intent, "chitchat");
}

TEST(rerank, request_numbers_the_passages) {
  std::vector<retrieval_item> items(3);
  items[0].evidence = "Alpha.";
  items[1].evidence = std::string(2000, 'b');
  items[2].evidence = "Gamma.";
  auto req = llm::rerank_request("Which one?", items, 100);
  ASSERT_EQ(req.messages.size(), 2u);
  auto& u = req.messages[1].content;
  EXPECT_TRUE(u.starts_with("Question: Which one?\n\nPassages:\n[1] Alpha.\n[2] "));
  EXPECT_NE(u.find("[3] Gamma.\n"), std::string::npos);
  EXPECT_LT(u.size(), 300u) << "passages are cut";
  EXPECT_EQ(req.purpose, "rerank");
}

TEST(rerank, replies_are_parsed_leniently_and_completed) {
  using order = std::vector<size_t>;
  EXPECT_EQ(llm::parse_rerank_reply(R"({"ranking":[3,1,2]})", 3), (order{2, 0, 1}));
  EXPECT_EQ(llm::parse_rerank_reply("```json\n{\"ranking\": [\"2\"]}\n```", 3), (order{1, 0, 2}))
      << "strings, fences, left-out passages follow in fused order";
  EXPECT_EQ(llm::parse_rerank_reply(R"({"ranking":[9,2,2,0,1]})", 3), (order{1, 0, 2}))
      << "out of range and repeats ignored";
  EXPECT_FALSE(llm::parse_rerank_reply("no idea", 3));
  EXPECT_FALSE(llm::parse_rerank_reply(R"({"ranking":[]})", 3));
  EXPECT_FALSE(llm::parse_rerank_reply(R"({"order":[1]})", 3));
}

TEST(rerank, apply_reorders_items_ids_and_context) {
  retrieval_result r;
  for (auto id : {"a", "b", "c", "d"}) {
    retrieval_item it;
    it.result_id = id;
    it.evidence = std::string{"text "} + id;
    r.retrieval_results.push_back(it);
  }
  llm::apply_rerank(r, {3, 0, 2, 1}, 3);
  EXPECT_EQ(r.chunk_ids, (std::vector<std::string>{"d", "a", "c"}));
  EXPECT_EQ(r.context, "text d\n\ntext a\n\ntext c");
}

}  // namespace
}  // namespace ragtor::llm
