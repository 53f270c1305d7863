// Checks shared by the tests of ids made in time order (row ids, request
// ids): `prefix`, then 32 hex digits whose first 12 are the time in
// milliseconds; later ids sort later; none repeats within a millisecond.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "persistence/store_backend.hpp"

namespace ragtor::test {

inline void expect_ids_in_time_order(const std::function<std::string()>& make,
                                     const std::string& prefix) {
  std::set<std::string> ids;
  auto before = now_ms();
  auto first = make();
  auto after = now_ms();
  for (int i = 0; i < 20000; ++i) {
    auto id = make();
    ASSERT_EQ(id.size(), prefix.size() + 32) << id;
    ASSERT_EQ(id.substr(0, prefix.size()), prefix) << id;
    ASSERT_EQ(id.find_first_not_of("0123456789abcdef", prefix.size()), std::string::npos) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 20000u);
  auto stamped = std::stoll(first.substr(prefix.size(), 12), nullptr, 16);
  EXPECT_GE(stamped, before) << "the first 12 digits are the time in milliseconds";
  EXPECT_LE(stamped, after);
  while (now_ms() <= after) {
  }
  EXPECT_LT(first, make()) << "an id made in a later millisecond sorts after";
}

}  // namespace ragtor::test
