#include "llm/structured_output.hpp"
#include "protocol/json_document.hpp"
#include "protocol/log.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <simdjson.h>
#include <spdlog/spdlog.h>

namespace ragtor::llm {

namespace {
const log::component lg{"llm"};
}  // namespace

namespace {

std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Removes commas that are followed (after whitespace) by } or ], outside
// strings.
std::string drop_trailing_commas(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (in_string) {
      out += c;
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == ',') {
      auto j = json.find_first_not_of(" \t\r\n", i + 1);
      if (j != std::string_view::npos && (json[j] == '}' || json[j] == ']'))
        continue;
    }
    out += c;
  }
  return out;
}

std::optional<double> number_of(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  double d = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec != std::errc{} || p != s.data() + s.size())
    return std::nullopt;
  return d;
}

}  // namespace

std::string parsed_fields::string_or(const std::string& name, std::string fallback) const {
  auto i = strings.find(name);
  return i == strings.end() ? std::move(fallback) : i->second;
}

double parsed_fields::number_or(const std::string& name, double fallback) const {
  auto i = numbers.find(name);
  return i == numbers.end() ? fallback : i->second;
}

std::optional<std::string> extract_json_object(std::string_view text) {
  for (size_t start = text.find('{'); start != std::string_view::npos;
       start = text.find('{', start + 1)) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (size_t i = start; i < text.size(); ++i) {
      char c = text[i];
      if (in_string) {
        if (escaped)
          escaped = false;
        else if (c == '\\')
          escaped = true;
        else if (c == '"')
          in_string = false;
        continue;
      }
      if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        auto candidate = drop_trailing_commas(text.substr(start, i - start + 1));
        json_document parsed{candidate};
        simdjson::dom::element el;
        if (parsed.get(el) == simdjson::SUCCESS
            && el.is_object())
          return candidate;
        break;  // unbalanced or invalid from here: try the next '{'
      }
    }
  }
  return std::nullopt;
}

std::variant<parsed_fields, std::string> parse_structured(std::string_view text,
                                                          const std::vector<field_spec>& spec) {
  auto json = extract_json_object(text);
  if (!json)
    return std::string{"no JSON object in the reply"};
  json_document parsed{*json};
  simdjson::dom::object obj;
  if (parsed.get(obj) != simdjson::SUCCESS)
    return std::string{"the JSON object does not parse"};
  parsed_fields out;
  for (auto& f : spec) {
    simdjson::dom::element value;
    bool found = false;
    auto want = lower(f.name);
    for (auto [key, v] : obj)
      if (lower(key) == want) {
        value = v;
        found = true;
        break;
      }
    if (!found || value.is_null()) {
      if (f.required)
        return "missing field \"" + f.name + "\"";
      continue;
    }
    auto wrong = [&](std::string_view type) {
      return "field \"" + f.name + "\" must be " + std::string{type};
    };
    switch (f.type) {
      case field_type::string: {
        std::string_view s;
        if (value.get_string().get(s) == simdjson::SUCCESS)
          out.strings[f.name] = std::string{s};
        else if (value.is_number() || value.is_bool())
          out.strings[f.name] = simdjson::minify(value);
        else
          return wrong("a string");
        break;
      }
      case field_type::number: {
        double d;
        std::string_view s;
        if (value.get_double().get(d) == simdjson::SUCCESS)
          out.numbers[f.name] = d;
        else if (value.get_string().get(s) == simdjson::SUCCESS && number_of(s))
          out.numbers[f.name] = *number_of(s);
        else
          return wrong("a number");
        break;
      }
      case field_type::boolean: {
        bool b;
        std::string_view s;
        if (value.get_bool().get(b) == simdjson::SUCCESS) {
          out.bools[f.name] = b;
        } else if (value.get_string().get(s) == simdjson::SUCCESS) {
          auto l = lower(s);
          if (l == "true" || l == "yes")
            out.bools[f.name] = true;
          else if (l == "false" || l == "no")
            out.bools[f.name] = false;
          else
            return wrong("a boolean");
        } else {
          return wrong("a boolean");
        }
        break;
      }
      case field_type::string_array: {
        simdjson::dom::array arr;
        std::string_view s;
        std::vector<std::string> items;
        if (value.get_array().get(arr) == simdjson::SUCCESS) {
          for (auto item : arr) {
            if (item.get_string().get(s) != simdjson::SUCCESS)
              return wrong("an array of strings");
            items.emplace_back(s);
          }
        } else if (value.get_string().get(s) == simdjson::SUCCESS) {
          items.emplace_back(s);
        } else {
          return wrong("an array of strings");
        }
        out.arrays[f.name] = std::move(items);
        break;
      }
      case field_type::object:
        if (!value.is_object())
          return wrong("an object");
        out.objects[f.name] = simdjson::minify(value);
        break;
    }
  }
  return out;
}

parsed_fields parse_or_default(std::string_view text, const std::vector<field_spec>& spec,
                               parsed_fields fallback, std::string_view what) {
  auto r = parse_structured(text, spec);
  if (auto* ok = std::get_if<parsed_fields>(&r))
    return std::move(*ok);
  lg->warn("{}: unusable model output ({}); using the default", what, std::get<std::string>(r));
  return fallback;
}

}  // namespace ragtor::llm
