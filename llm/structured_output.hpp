// Structured outputs (DESIGN §7, seed 003 §4): models asked for a small
// JSON decision answer with fences, prose around it, trailing commas or
// numbers as strings. One helper finds the JSON, validates the fields a
// caller expects, coerces the usual near-misses, and otherwise falls back
// to a safe default with one log line — never an exception.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ragtor::llm {

// The first balanced top-level JSON object in `text` (braces inside
// strings ignored), with ```json fences and surrounding prose dropped and
// trailing commas before } or ] removed. nullopt if there is none.
std::optional<std::string> extract_json_object(std::string_view text);

enum class field_type { string, number, boolean, string_array, object };

struct field_spec {
  std::string name;
  field_type type;
  bool required = true;
};

struct parsed_fields {
  std::map<std::string, std::string> strings;
  std::map<std::string, double> numbers;
  std::map<std::string, bool> bools;
  std::map<std::string, std::vector<std::string>> arrays;
  std::map<std::string, std::string> objects;  // minified JSON

  std::string string_or(const std::string& name, std::string fallback = {}) const;
  double number_or(const std::string& name, double fallback) const;
};

// Extracts and validates. Field names match case-insensitively. Coercions:
// "0.8" -> number, "true"/"false"/"yes"/"no" -> bool, a number -> string,
// a single string -> string_array. Unknown fields are ignored. On failure
// the error names the problem.
std::variant<parsed_fields, std::string> parse_structured(std::string_view text,
                                                          const std::vector<field_spec>& spec);

// parse_structured, or `fallback` with one warning naming `what`.
parsed_fields parse_or_default(std::string_view text, const std::vector<field_spec>& spec,
                               parsed_fields fallback, std::string_view what);

}  // namespace ragtor::llm
