// The summary rules (DESIGN §8, seed 002): exact thresholds and window
// boundaries, the model request, and the offline extractive summary.
#include <gtest/gtest.h>

#include "memory/summary.hpp"

using namespace ragtor;

namespace {

summary_record state(int64_t total, int64_t version = 0, int64_t covered = 0, int32_t updates = 0) {
  summary_record s;
  s.total_messages = total;
  s.version = version;
  s.covered_messages = covered;
  s.covered_seq = covered;
  s.incremental_updates = updates;
  return s;
}

std::vector<stored_message> conversation(std::initializer_list<std::string> texts) {
  std::vector<stored_message> out;
  int64_t seq = 0;
  for (auto& t : texts) {
    stored_message m;
    m.seq = ++seq;
    m.role = seq % 2 ? "user" : "assistant";
    m.content = t;
    out.push_back(m);
  }
  return out;
}

}  // namespace

TEST(summary_plan, the_first_summary_comes_at_ten_messages) {
  summary_policy p;
  EXPECT_EQ(plan_summary(state(0), p), summary_action::none);
  EXPECT_EQ(plan_summary(state(9), p), summary_action::none);
  EXPECT_EQ(plan_summary(state(10), p), summary_action::full);
  EXPECT_EQ(plan_summary(state(11), p), summary_action::full);
}

TEST(summary_plan, nothing_outside_the_window_means_nothing_to_summarise) {
  summary_policy p;
  p.min_messages = 2;
  EXPECT_EQ(plan_summary(state(6), p), summary_action::none) << "all six are in the window";
  EXPECT_EQ(plan_summary(state(7), p), summary_action::full);
}

TEST(summary_plan, a_refresh_needs_five_more_messages_outside_the_window) {
  summary_policy p;
  // Summarised at 10 messages: 4 covered. At 14, 4 more left the window.
  EXPECT_EQ(plan_summary(state(14, 1, 4), p), summary_action::none);
  EXPECT_EQ(plan_summary(state(15, 1, 4), p), summary_action::merge);
  EXPECT_EQ(plan_summary(state(40, 3, 29, 2), p), summary_action::merge);
  EXPECT_EQ(plan_summary(state(39, 3, 29, 2), p), summary_action::none);
}

TEST(summary_plan, the_tenth_refresh_regenerates_from_scratch) {
  summary_policy p;
  EXPECT_EQ(plan_summary(state(100, 9, 80, 8), p), summary_action::merge) << "9th";
  EXPECT_EQ(plan_summary(state(100, 10, 80, 9), p), summary_action::full) << "10th";
  EXPECT_EQ(plan_summary(state(100, 11, 80, 0), p), summary_action::merge) << "counting anew";
  p.regenerate_every = 1;
  EXPECT_EQ(plan_summary(state(100, 2, 80, 0), p), summary_action::full);
}

TEST(summary_plan, the_policy_is_configurable) {
  summary_policy p;
  p.window = 2;
  p.min_messages = 4;
  p.update_delta = 1;
  EXPECT_EQ(plan_summary(state(3), p), summary_action::none);
  EXPECT_EQ(plan_summary(state(4), p), summary_action::full);
  EXPECT_EQ(plan_summary(state(4, 1, 2), p), summary_action::none);
  EXPECT_EQ(plan_summary(state(5, 1, 2), p), summary_action::merge);
}

TEST(summary_request, a_full_run_shows_the_transcript_and_a_merge_the_previous_summary) {
  auto msgs = conversation({"How do I brew sencha?", "Use water at 70 degrees."});
  auto full = summary_request(summary_action::full, "", msgs, 1000, 300);
  ASSERT_EQ(full.messages.size(), 2u);
  EXPECT_EQ(full.messages[0].role, "system");
  EXPECT_EQ(full.purpose, "summary");
  EXPECT_EQ(full.max_tokens, 300);
  auto& u = full.messages[1].content;
  EXPECT_TRUE(u.starts_with("Conversation to summarise:\n"));
  EXPECT_NE(u.find("User: How do I brew sencha?\nAssistant: Use water at 70 degrees.\n"),
            std::string::npos);
  auto merge = summary_request(summary_action::merge, "They talked about tea.", msgs, 1000, 300);
  auto& m = merge.messages[1].content;
  EXPECT_TRUE(m.starts_with("Previous summary:\nThey talked about tea.\n\nNew messages:\n"));
  EXPECT_NE(m.find("User: How do I brew sencha?"), std::string::npos);
}

TEST(summary_request, too_long_a_transcript_keeps_the_newest_messages) {
  std::vector<std::string> texts;
  for (int i = 0; i < 40; ++i)
    texts.push_back("message number " + std::to_string(i) + " " + std::string(200, 'x'));
  std::vector<stored_message> msgs;
  for (size_t i = 0; i < texts.size(); ++i) {
    stored_message m;
    m.seq = static_cast<int64_t>(i + 1);
    m.role = i % 2 ? "assistant" : "user";
    m.content = texts[i];
    msgs.push_back(m);
  }
  auto req = summary_request(summary_action::full, "Older summary.", msgs, 500, 300);
  auto& u = req.messages[1].content;
  EXPECT_NE(u.find("message number 39 "), std::string::npos);
  EXPECT_EQ(u.find("message number 0 "), std::string::npos);
  EXPECT_TRUE(u.starts_with("Previous summary:\nOlder summary.")) << "left-out messages are "
                                                                     "represented by the summary";
}

TEST(extractive_summary, keeps_stated_preferences_and_central_sentences) {
  auto msgs = conversation({
      "I really love green tea. How hot should the water be for sencha?",
      "Sencha is best brewed with water at 70 degrees for about a minute.",
      "Thanks!",
      "You're welcome.",
      "Can I brew sencha twice with the same leaves?",
      "Yes, a second sencha infusion works with slightly hotter water.",
  });
  auto s = extractive_summary("", msgs, 3);
  EXPECT_NE(s.find("User stated: I really love green tea"), std::string::npos) << s;
  EXPECT_NE(s.find("sencha"), std::string::npos) << s;
  EXPECT_EQ(s.find("Thanks"), std::string::npos) << "no content, not a key sentence";
  size_t lines = std::count(s.begin(), s.end(), '\n') + 1;
  EXPECT_LE(lines, 4u) << s;
}

TEST(extractive_summary, a_merge_carries_the_previous_facts_and_lines) {
  auto first =
      extractive_summary("", conversation({"I'm allergic to peanuts. What should I cook tonight?",
                                           "Try a lentil curry."}));
  EXPECT_NE(first.find("User stated: I'm allergic to peanuts"), std::string::npos) << first;
  auto merged = extractive_summary(
      first, conversation({"I don't like coriander. Any curry without it?",
                           "A lentil curry works well with cumin instead of coriander."}));
  EXPECT_NE(merged.find("allergic to peanuts"), std::string::npos) << merged;
  EXPECT_NE(merged.find("coriander"), std::string::npos) << merged;
  EXPECT_EQ(merged.find("User stated:"), merged.rfind("User stated:")) << "one facts line";
}

TEST(extractive_summary, chinese_conversations_are_summarised_too) {
  auto s = extractive_summary(
      "", conversation({"我喜欢喝绿茶。煎茶应该用多少度的水？", "煎茶最好用七十度左右的水冲泡。"}));
  EXPECT_NE(s.find("煎茶"), std::string::npos) << s;
  EXPECT_NE(s.find("User stated:"), std::string::npos) << s;
}

TEST(summary_read_limit, a_merge_reads_only_what_came_after_the_summary) {
  summary_policy p;
  // 40 messages, the summary covers 1..29: the newest 11 (30..40).
  EXPECT_EQ(summary_read_limit(state(40, 3, 29, 1), summary_action::merge, p, 6000), 11);
  // However long the conversation.
  EXPECT_EQ(summary_read_limit(state(100000, 9, 99989, 1), summary_action::merge, p, 6000), 11);
}

// A merge loaded at 40 messages (the summary covering 1..29) reads the
// newest 11. When the next turn stored two more in between, that read is
// 32..42 and would leave 30 and 31 out of every summary: it is read again,
// two deeper. A read that starts where it should, one shorter than its
// limit (the conversation's start), or a full summary is not.
TEST(summary_read_limit, a_merge_shifted_by_newer_messages_reads_again_deeper) {
  auto seqs = [](int64_t from, int64_t to) {
    std::vector<stored_message> out;
    for (auto seq = from; seq <= to; ++seq) {
      stored_message m;
      m.seq = seq;
      out.push_back(m);
    }
    return out;
  };
  auto loaded = state(40, 3, 29, 1);
  EXPECT_EQ(summary_read_deeper(loaded, summary_action::merge, seqs(30, 40), 11), 0);
  EXPECT_EQ(summary_read_deeper(loaded, summary_action::merge, seqs(32, 42), 11), 13);
  EXPECT_EQ(summary_read_deeper(loaded, summary_action::merge, seqs(30, 42), 13), 0)
      << "the deeper read has them";
  EXPECT_EQ(summary_read_deeper(loaded, summary_action::merge, seqs(32, 41), 11), 0)
      << "fewer than asked: nothing older exists";
  EXPECT_EQ(summary_read_deeper(loaded, summary_action::full, seqs(32, 42), 11), 0);
  EXPECT_EQ(summary_read_deeper(loaded, summary_action::merge, {}, 11), 0);
}

TEST(summary_read_limit, a_full_summary_reads_what_a_transcript_can_show_and_one_more) {
  summary_policy p;  // window 6
  EXPECT_EQ(summary_read_limit(state(10), summary_action::full, p, 6000), 10) << "all of it";
  EXPECT_EQ(summary_read_limit(state(100000, 11, 99000, 9), summary_action::full, p, 6000),
            3000 + 2 + 6);
}

TEST(summary_request, a_transcript_is_full_when_it_leaves_the_oldest_out) {
  std::vector<stored_message> msgs;
  for (int seq = 1; seq <= 20; ++seq) {
    stored_message m;
    m.seq = seq;
    m.role = seq % 2 ? "user" : "assistant";
    m.content = "a message of a few words";
    msgs.push_back(m);
  }
  // Whether a full run's request shows the previous summary: it does when
  // the transcript left messages out.
  auto shown = [&](size_t budget) {
    auto req = summary_request(summary_action::full, "PREV", msgs, budget, 100);
    return req.messages.back().content.find("Previous summary") != std::string::npos;
  };
  // A budget that shows every message: not full, and no previous summary
  // is needed; one that leaves the oldest out: full, and it is shown.
  EXPECT_FALSE(transcript_is_full(msgs, 100000));
  EXPECT_FALSE(shown(100000));
  EXPECT_TRUE(transcript_is_full(msgs, 30));
  EXPECT_TRUE(shown(30));
  EXPECT_FALSE(transcript_is_full({}, 30));
}

TEST(summary_read_limit, older_messages_left_unread_still_bring_the_previous_summary) {
  summary_policy p;
  const size_t budget = 40;
  // A long conversation; read as the limit says (the newest), minus the window.
  auto loaded = state(500, 11, 480, 9);
  auto limit = summary_read_limit(loaded, summary_action::full, p, budget);
  ASSERT_LT(limit, 500);
  std::vector<stored_message> outside;
  for (int64_t seq = 500 - limit + 1; seq <= 500 - p.window; ++seq) {
    stored_message m;
    m.seq = seq;
    m.role = seq % 2 ? "user" : "assistant";
    m.content = "ok";  // the cheapest line a transcript can have
    outside.push_back(m);
  }
  auto req = summary_request(summary_action::full, "PREVIOUS", outside, budget, 200);
  EXPECT_NE(req.messages.back().content.find("Previous summary:\nPREVIOUS"), std::string::npos)
      << req.messages.back().content;
}
