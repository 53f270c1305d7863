#include "protocol/workflow_def.hpp"

#include <set>

#include <simdjson.h>

#include "protocol/errc.hpp"
#include "protocol/json_document.hpp"

namespace ragtor::wf {

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

caf::error bad(std::string what) {
  return make_error(errc::invalid_request, std::move(what));
}

bool is_name(std::string_view s) {
  if (s.empty() || s.size() > 64)
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      return false;
  return true;
}

// Reads the string members `names` of `o` into `out` (in order); other
// members must be in `also` (handled by the caller) or are an error.
caf::error strings_of(object o, std::string_view where,
                      std::initializer_list<std::pair<std::string_view, std::string*>> names,
                      std::initializer_list<std::string_view> also = {}) {
  for (auto [key, value] : o) {
    bool known = false;
    for (auto& [name, out] : names) {
      if (key != name)
        continue;
      known = true;
      std::string_view s;
      if (value.get_string().get(s) != simdjson::SUCCESS)
        return bad(std::string{where} + "." + std::string{key} + " must be a string");
      *out = std::string{s};
    }
    for (auto name : also)
      known = known || key == name;
    if (!known)
      return bad("unknown field " + std::string{where} + "." + std::string{key});
  }
  return {};
}

caf::error int_of(element v, std::string_view where, int32_t lo, int32_t hi, int32_t& out) {
  int64_t i = 0;
  if (v.get_int64().get(i) != simdjson::SUCCESS || i < lo || i > hi)
    return bad(std::string{where} + " must be an integer in [" + std::to_string(lo) + ", "
               + std::to_string(hi) + "]");
  out = static_cast<int32_t>(i);
  return {};
}

}  // namespace

const intent_def* workflow_def::intent(std::string_view l2) const {
  for (auto& i : intents)
    if (i.l2 == l2)
      return &i;
  return nullptr;
}

const tool_def* workflow_def::tool(std::string_view name) const {
  for (auto& t : tools)
    if (t.name == name)
      return &t;
  return nullptr;
}

caf::expected<workflow_def> parse_workflow(std::string_view json) {
  json_document parsed{json};
  element root;
  if (parsed.get(root) != simdjson::SUCCESS)
    return bad("is not valid JSON");
  object o;
  if (root.get_object().get(o) != simdjson::SUCCESS)
    return bad("must be an object");
  workflow_def def;
  for (auto [key, value] : o) {
    caf::error err;
    if (key == "business") {
      std::string_view s;
      if (value.get_string().get(s) != simdjson::SUCCESS)
        return bad("business must be a string");
      def.business = std::string{s};
    } else if (key == "max_ask_rounds") {
      err = int_of(value, "max_ask_rounds", 1, 10, def.max_ask_rounds);
    } else if (key == "max_retrieval_rounds") {
      err = int_of(value, "max_retrieval_rounds", 1, 10, def.max_retrieval_rounds);
    } else if (key == "model_timeout_ms") {
      err = int_of(value, "model_timeout_ms", 100, 600000, def.model_timeout_ms);
    } else if (key == "model_retries") {
      err = int_of(value, "model_retries", 0, 5, def.model_retries);
    } else if (key == "tools") {
      simdjson::dom::array arr;
      if (value.get_array().get(arr) != simdjson::SUCCESS)
        return bad("tools must be an array");
      for (auto t : arr) {
        object to;
        if (t.get_object().get(to) != simdjson::SUCCESS)
          return bad("tools entries must be objects");
        tool_def tool;
        if (auto e = strings_of(to, "tools[]",
                                {{"name", &tool.name},
                                 {"description", &tool.description},
                                 {"url", &tool.url}},
                                {"timeout_ms"}))
          return e;
        if (element tv; to["timeout_ms"].get(tv) == simdjson::SUCCESS)
          if (auto e = int_of(tv, "tools[].timeout_ms", 10, 600000, tool.timeout_ms))
            return e;
        if (!is_name(tool.name))
          return bad("tools[].name must be 1-64 letters, digits, _ - .");
        if (!tool.url.starts_with("http://"))
          return bad("tools[].url of \"" + tool.name + "\" must start with http://");
        if (def.tool(tool.name))
          return bad("tool \"" + tool.name + "\" is defined twice");
        def.tools.push_back(std::move(tool));
      }
    } else if (key == "intents") {
      simdjson::dom::array arr;
      if (value.get_array().get(arr) != simdjson::SUCCESS)
        return bad("intents must be an array");
      for (auto i : arr) {
        object io;
        if (i.get_object().get(io) != simdjson::SUCCESS)
          return bad("intents entries must be objects");
        intent_def in;
        if (auto e = strings_of(io, "intents[]",
                                {{"l1", &in.l1}, {"l2", &in.l2}, {"description", &in.description}},
                                {"slots", "sources"}))
          return e;
        if (!is_name(in.l2) || in.l2 == "chitchat")
          return bad("intents[].l2 must be 1-64 letters, digits, _ - . and not \"chitchat\"");
        if (def.intent(in.l2))
          return bad("intent \"" + in.l2 + "\" is defined twice");
        if (element sv; io["slots"].get(sv) == simdjson::SUCCESS) {
          simdjson::dom::array slots;
          if (sv.get_array().get(slots) != simdjson::SUCCESS)
            return bad("intents[].slots must be an array");
          for (auto s : slots) {
            object so;
            if (s.get_object().get(so) != simdjson::SUCCESS)
              return bad("intents[].slots entries must be objects");
            slot_def slot;
            if (auto e = strings_of(so, "slots[]",
                                    {{"name", &slot.name},
                                     {"description", &slot.description},
                                     {"question", &slot.question}}))
              return e;
            if (!is_name(slot.name))
              return bad("slots[].name of intent \"" + in.l2
                         + "\" must be 1-64 letters, digits, _ - .");
            in.slots.push_back(std::move(slot));
          }
        }
        if (element sv; io["sources"].get(sv) == simdjson::SUCCESS) {
          simdjson::dom::array srcs;
          if (sv.get_array().get(srcs) != simdjson::SUCCESS)
            return bad("intents[].sources must be an array of strings");
          for (auto s : srcs) {
            std::string_view str;
            if (s.get_string().get(str) != simdjson::SUCCESS)
              return bad("intents[].sources must be an array of strings");
            in.sources.emplace_back(str);
          }
        }
        if (in.sources.empty())
          in.sources.push_back("kb");
        def.intents.push_back(std::move(in));
      }
    } else {
      return bad("unknown field " + std::string{key});
    }
    if (err)
      return err;
  }
  if (def.intents.empty())
    return bad("intents must name at least one intent");
  for (auto& in : def.intents)
    for (auto& src : in.sources) {
      if (src == "kb" || (src.starts_with("kb:") && src.size() > 3))
        continue;
      if (src.starts_with("tool:") && def.tool(std::string_view{src}.substr(5)))
        continue;
      return bad("source \"" + src + "\" of intent \"" + in.l2
                 + "\" must be \"kb\", \"kb:<name>\" or \"tool:<name of tools[]>\"");
    }
  return def;
}

}  // namespace ragtor::wf
