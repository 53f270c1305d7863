#include "http/router.hpp"

#include <optional>

#include <boost/url/parse_path.hpp>

namespace ragtor::http {

std::string_view to_string(scope s) {
  switch (s) {
    case scope::none:
      return "";
    case scope::chat:
      return "chat";
    case scope::kb_read:
      return "kb:read";
    case scope::kb_write:
      return "kb:write";
    case scope::admin:
      return "admin";
  }
  return "admin";
}

namespace {

bool is_param(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

std::vector<std::string_view> split_pattern(std::string_view pattern) {
  std::vector<std::string_view> out;
  while (pattern.starts_with('/')) {
    pattern.remove_prefix(1);
    auto slash = pattern.find('/');
    out.push_back(pattern.substr(0, slash));
    pattern = slash == std::string_view::npos ? std::string_view{} : pattern.substr(slash);
  }
  return out;
}

// The decoded segments of an absolute path; nullopt when it is not one
// (such a path names no route, as before Boost.URL parsed it: 404).
std::optional<std::vector<std::string>> decoded_segments(std::string_view path) {
  if (!path.starts_with('/'))
    return std::nullopt;
  // A NUL-terminated copy: see parse_request_target.
  std::string copy{path};
  auto parsed = boost::urls::parse_path(copy);
  if (!parsed)
    return std::nullopt;
  std::vector<std::string> out;
  for (auto segment : *parsed)
    out.push_back(segment.decode());
  return out;
}

bool matches(const std::vector<std::string_view>& pattern, const std::vector<std::string>& path,
             path_params* params) {
  if (pattern.size() != path.size())
    return false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (is_param(pattern[i])) {
      if (path[i].empty())
        return false;
      if (params)
        params->add(pattern[i].substr(1, pattern[i].size() - 2), path[i]);
    } else if (pattern[i] != path[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

void path_params::add(std::string_view name, std::string value) {
  values_.emplace_back(name, std::move(value));
}

const std::string& path_params::operator[](std::string_view name) const {
  static const std::string none;
  for (auto& [n, v] : values_)
    if (n == name)
      return v;
  return none;
}

router::router(std::vector<route> routes) : routes_(std::move(routes)) {
  for (auto& r : routes_)
    patterns_.push_back(split_pattern(r.pattern));
}

route_match router::match(std::string_view method, std::string_view path) const {
  route_match out;
  auto segments = decoded_segments(path);
  if (!segments)
    return out;
  for (size_t i = 0; i < routes_.size(); ++i) {
    if (!matches(patterns_[i], *segments, nullptr))
      continue;
    if (routes_[i].method == method) {
      matches(patterns_[i], *segments, &out.params);
      out.matched = &routes_[i];
      out.allow.clear();
      return out;
    }
    if (out.allow.find(routes_[i].method) == std::string::npos)
      out.allow += (out.allow.empty() ? "" : ", ") + std::string{routes_[i].method};
  }
  return out;
}

}  // namespace ragtor::http
