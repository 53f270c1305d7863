// The conversation summary (DESIGN §8, seed 002 phase 1): everything older
// than the recent window, compressed, so a long conversation costs a
// summary plus a window per turn instead of its whole history. The rules
// live here as plain functions (when to summarise, what to send the model,
// the offline extractive summary); the summarizer actor runs them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/messages.hpp"

namespace ragtor {

struct summary_policy {
  int32_t window = 6;             // recent messages kept verbatim (memory.window)
  int32_t min_messages = 10;      // first summary once a conversation has this many
  int32_t update_delta = 5;       // refresh once this many more left the window
  int32_t regenerate_every = 10;  // every Nth refresh regenerates from scratch
};

enum class summary_action {
  none,   // not due
  full,   // summarise every message older than the window from scratch
  merge,  // merge the messages that left the window since into the summary
};

std::string_view to_string(summary_action a);

// What to do for a conversation in state `s` (counts as loaded by the
// store). With T messages, the T - window oldest are "outside the window":
// - no summary yet: full once T >= min_messages (and something is outside);
// - a summary covering C messages: due once (T - window) - C >=
//   update_delta; then a merge, except that the regenerate_every-th refresh
//   (incremental_updates + 1 == regenerate_every) is a full regeneration.
summary_action plan_summary(const summary_record& s, const summary_policy& p);

// How many of a conversation's newest messages summarising reads, so that
// it reads a bounded tail rather than the whole conversation (issue 20,
// target 5). Seqs are 1..N, so a merge needs the newest N - covered_seq
// (what came after the summary, the window included). A full summary needs
// at most what a transcript of `max_input_tokens` shows (each line costs
// two tokens or more; the newest are kept) plus the window, and one more
// line, so that when older messages are left unread the transcript has
// dropped some and the request shows the previous summary.
int32_t summary_read_limit(const summary_record& loaded, summary_action action,
                           const summary_policy& p, size_t max_input_tokens);

// A merge reads the newest `limit` messages, counted when the summary
// was loaded. A message stored in between (the conversation's next turn)
// shifts that read past the oldest ones it needed, which would then never
// be summarised. Given what the read returned (oldest first), the deeper
// limit to read once more with, or 0 when nothing was missed.
int32_t summary_read_deeper(const summary_record& loaded, summary_action action,
                            std::span<const stored_message> read, int32_t limit);

// Whether a transcript of `messages` (oldest first) within
// `max_input_tokens` leaves their oldest out: then messages older still
// could not change it. A full summary written by the model reads a page of
// the newest messages first, and the whole bound above only when the page
// did not fill the transcript (a long conversation's lines are seldom as
// short as the bound assumes).
bool transcript_is_full(std::span<const stored_message> messages, size_t max_input_tokens);

// The model request: a full summary of `messages`, or a merge of `messages`
// into `previous`. Messages are shown oldest first as "User:"/"Assistant:"
// lines; when they exceed `max_input_tokens` the oldest are left out (a
// full run then also shows `previous`, so nothing is silently forgotten).
completion_request summary_request(summary_action action, std::string_view previous,
                                   const std::vector<stored_message>& messages,
                                   size_t max_input_tokens, int32_t max_tokens);

// The offline summary when no model is configured: what the user stated
// about themselves (the long-term memory rules) and the most central
// sentences of the conversation (terms shared across messages), in order,
// merged with the sentences of `previous`. At most `max_sentences` lines
// plus one "User stated:" line.
std::string extractive_summary(std::string_view previous,
                               const std::vector<stored_message>& messages,
                               size_t max_sentences = 6);

}  // namespace ragtor
