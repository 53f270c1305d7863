#include "protocol/worker_name.hpp"

#include <gtest/gtest.h>

#include "protocol/errc.hpp"

namespace ragtor {
namespace {

parsed_worker_name parse_ok(std::string_view s) {
  auto r = parse_worker_name(s);
  EXPECT_TRUE(r) << "'" << s << "': " << (r ? "" : error_message(r.error()));
  return r ? *r : parsed_worker_name{};
}

void expect_error(std::string_view s, std::string_view prefix) {
  auto r = parse_worker_name(s);
  ASSERT_FALSE(r) << "'" << s << "' parsed";
  EXPECT_EQ(code_of(r.error()), errc::invalid_request);
  EXPECT_EQ(error_message(r.error()), std::string{prefix} + std::string{s});
}

TEST(protocol_worker_name, empty_means_no_kb_no_agent) {
  EXPECT_EQ(parse_ok(""), (parsed_worker_name{"", "", "retrieve_only"}));
  EXPECT_EQ(parse_ok("   \t"), (parsed_worker_name{"", "", "retrieve_only"}));
}

TEST(protocol_worker_name, one_segment_is_agent_type) {
  EXPECT_EQ(parse_ok("hybrid_agent"), (parsed_worker_name{"", "hybrid_agent", "retrieve_only"}));
}

TEST(protocol_worker_name, two_segments_are_kb_and_agent) {
  EXPECT_EQ(parse_ok("edu:hybrid_agent"),
            (parsed_worker_name{"edu", "hybrid_agent", "retrieve_only"}));
}

TEST(protocol_worker_name, three_segments) {
  EXPECT_EQ(parse_ok("edu:hybrid_agent:retrieve_only"),
            (parsed_worker_name{"edu", "hybrid_agent", "retrieve_only"}));
  EXPECT_EQ(parse_ok("movie:graph_agent:retrieve_only"),
            (parsed_worker_name{"movie", "graph_agent", "retrieve_only"}));
}

TEST(protocol_worker_name, empty_mode_means_retrieve_only) {
  EXPECT_EQ(parse_ok("edu:hybrid_agent:"),
            (parsed_worker_name{"edu", "hybrid_agent", "retrieve_only"}));
  EXPECT_EQ(parse_ok("edu:hybrid_agent:  "),
            (parsed_worker_name{"edu", "hybrid_agent", "retrieve_only"}));
}

TEST(protocol_worker_name, trims_whole_name_and_each_segment) {
  EXPECT_EQ(parse_ok("  edu : hybrid_agent : retrieve_only \n"),
            (parsed_worker_name{"edu", "hybrid_agent", "retrieve_only"}));
  EXPECT_EQ(parse_ok(" graph_agent "), (parsed_worker_name{"", "graph_agent", "retrieve_only"}));
}

TEST(protocol_worker_name, empty_segments_are_kept) {
  // Python's split(":") keeps empty parts; so do we.
  EXPECT_EQ(parse_ok(":hybrid_agent"), (parsed_worker_name{"", "hybrid_agent", "retrieve_only"}));
  EXPECT_EQ(parse_ok("edu:"), (parsed_worker_name{"edu", "", "retrieve_only"}));
  EXPECT_EQ(parse_ok("::"), (parsed_worker_name{"", "", "retrieve_only"}));
}

TEST(protocol_worker_name, more_than_three_segments_is_an_error) {
  expect_error("a:b:c:d", "invalid worker_name format: ");
  expect_error("edu:hybrid_agent:retrieve_only:", "invalid worker_name format: ");
  expect_error(":::", "invalid worker_name format: ");
}

TEST(protocol_worker_name, other_mode_is_an_error) {
  expect_error("edu:hybrid_agent:generate", "unsupported agent_mode in worker_name: ");
  expect_error("edu:hybrid_agent:RETRIEVE_ONLY", "unsupported agent_mode in worker_name: ");
}

TEST(protocol_worker_name, format_general_means_no_worker) {
  EXPECT_EQ(format_worker_name("general", "hybrid_agent"), "");
  EXPECT_EQ(format_worker_name("  General ", ""), "");
  EXPECT_EQ(format_worker_name("GENERAL", "graph_agent"), "");
}

TEST(protocol_worker_name, format_defaults) {
  EXPECT_EQ(format_worker_name("", ""), "default:hybrid_agent:retrieve_only");
  EXPECT_EQ(format_worker_name("  ", " "), "default:hybrid_agent:retrieve_only");
  EXPECT_EQ(format_worker_name("edu", ""), "edu:hybrid_agent:retrieve_only");
  EXPECT_EQ(format_worker_name(" edu ", " graph_agent "), "edu:graph_agent:retrieve_only");
  EXPECT_EQ(format_worker_name("", "naive_rag_agent"), "default:naive_rag_agent:retrieve_only");
}

TEST(protocol_worker_name, format_then_parse_round_trips) {
  for (auto agent : agent_types) {
    auto parsed = parse_ok(format_worker_name("movie", agent));
    EXPECT_EQ(parsed, (parsed_worker_name{"movie", std::string{agent}, "retrieve_only"}));
    EXPECT_EQ(kb_of(parsed), "movie");
  }
}

TEST(protocol_worker_name, kb_of_maps_default_to_empty) {
  EXPECT_EQ(kb_of(parse_ok(format_worker_name("", ""))), "");
  EXPECT_EQ(kb_of(parse_ok("default:hybrid_agent:retrieve_only")), "");
  EXPECT_EQ(kb_of(parse_ok("edu:hybrid_agent")), "edu");
  EXPECT_EQ(kb_of(parse_ok("")), "");
}

TEST(protocol_worker_name, is_agent_type) {
  for (auto name :
       {"naive_rag_agent", "hybrid_agent", "graph_agent", "deep_research_agent", "fusion_agent"})
    EXPECT_TRUE(is_agent_type(name)) << name;
  EXPECT_FALSE(is_agent_type(""));
  EXPECT_FALSE(is_agent_type("Hybrid_agent"));
  EXPECT_FALSE(is_agent_type("hybrid_agent "));
  EXPECT_FALSE(is_agent_type("llm_agent"));
}

}  // namespace
}  // namespace ragtor
