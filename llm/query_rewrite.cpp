#include "llm/query_rewrite.hpp"
#include "protocol/text.hpp"

#include <cctype>

#include "protocol/text.hpp"

namespace ragtor::llm {

namespace {

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size())
    return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i])
      return false;
  return true;
}

}  // namespace

completion_request rewrite_request(std::string_view question,
                                   const std::vector<std::pair<std::string, std::string>>& window) {
  completion_request req;
  req.purpose = "query_rewrite";
  req.max_tokens = 100;
  req.temperature = 0;
  req.messages.push_back(
      {"system",
       "You rewrite a user's latest question into one clear, complete search query, resolving "
       "references to the conversation (pronouns, \"it\", \"that one\"). Keep the user's "
       "language. Reply with the query only, nothing else."});
  std::string user;
  if (!window.empty()) {
    user += "Conversation:\n";
    for (auto& [role, content] : window)
      user += (role == "user" ? "User: " : "Assistant: ") + utf8_prefix(content, 400) + "\n";
    user += "\n";
  }
  user += "Latest question: " + std::string{question};
  req.messages.push_back({"user", std::move(user)});
  return req;
}

std::string parse_rewrite_reply(std::string_view reply) {
  std::string_view line;
  size_t pos = 0;
  while (pos <= reply.size()) {
    auto end = reply.find('\n', pos);
    auto candidate = trim(reply.substr(pos, end == std::string_view::npos ? end : end - pos));
    pos = end == std::string_view::npos ? reply.size() + 1 : end + 1;
    if (candidate.empty() || candidate.starts_with("```"))
      continue;
    line = candidate;
    break;
  }
  for (auto label : {"rewritten query:", "search query:", "query:"})
    if (starts_with_nocase(line, label)) {
      line = trim(line.substr(std::string_view{label}.size()));
      break;
    }
  while (line.size() >= 2
         && ((line.front() == '"' && line.back() == '"')
             || (line.front() == '\'' && line.back() == '\'')
             || (line.front() == '`' && line.back() == '`')))
    line = trim(line.substr(1, line.size() - 2));
  if (line.empty() || line.size() > 500)
    return {};
  return std::string{line};
}

}  // namespace ragtor::llm
