// Every message type that may cross a node (docs/cluster.md) survives a
// round trip through CAF's binary serializer, inside a caf::message as BASP
// sends it: every registered type of the `ragtor` block, filled with
// non-default values by an inspector that walks the same fields the
// serializer does, so a field missing from an inspect() shows up here.
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/message.hpp>
#include <caf/meta/annotation.hpp>

#include "protocol/actors.hpp"
#include "protocol/type_ids.hpp"

namespace ragtor {
namespace {

template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

template <class T>
struct is_map : std::false_type {};
template <class K, class V, class C, class A>
struct is_map<std::map<K, V, C, A>> : std::true_type {};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// Gives every field a value different from its default: numbers count up,
// strings say where they are, containers get two elements, nested types are
// filled through their own inspect().
struct filler {
  using result_type = void;
  static constexpr bool reads_state = false;
  static constexpr bool writes_state = true;
  int n = 0;

  template <class... Ts>
  void operator()(Ts&&... xs) {
    (fill(xs), ...);
  }

  template <class T>
  void fill(T& x) {
    using V = std::remove_cv_t<T>;
    if constexpr (caf::meta::is_annotation<V>::value) {
      // type names and other annotations carry no data
    } else if constexpr (std::is_same_v<V, bool>) {
      x = true;
    } else if constexpr (std::is_enum_v<V>) {
      x = static_cast<V>(1 + (n++ % 2));
    } else if constexpr (std::is_arithmetic_v<V>) {
      x = static_cast<V>(++n + 1);
    } else if constexpr (std::is_same_v<V, std::string>) {
      x = "v" + std::to_string(++n) + " \xc3\xa9\n";
    } else if constexpr (is_vector<V>::value) {
      x.resize(2);
      for (auto& e : x)
        fill(e);
    } else if constexpr (is_map<V>::value) {
      for (int i = 0; i < 2; ++i) {
        typename V::key_type k{};
        typename V::mapped_type v{};
        fill(k);
        fill(v);
        x.emplace(std::move(k), std::move(v));
      }
    } else if constexpr (is_optional<V>::value) {
      x.emplace();
      fill(*x);
    } else if constexpr (requires(V& v) { v.address(); }) {
      // actor handles stay null: a live one is tested by tests/cluster
    } else {
      inspect(*this, x);
    }
  }
};

caf::actor_system_config& registered(caf::actor_system_config& cfg) {
  register_types(cfg);
  return cfg;
}

class serialization : public ::testing::Test {
protected:
  caf::actor_system_config cfg;
  caf::actor_system sys{registered(cfg)};

  template <class T>
  std::vector<char> bytes_of(const caf::message& msg) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    auto err = sink(const_cast<caf::message&>(msg));
    EXPECT_FALSE(err) << caf::type_name<T>::value << ": " << sys.render(err);
    return buf;
  }

  // Filled value -> message -> bytes -> message -> bytes: both byte strings
  // equal, and unlike a default value's.
  template <class T>
  void round_trip() {
    const char* name = caf::type_name<T>::value;
    T filled{};
    filler f;
    f.fill(filled);
    auto sent = bytes_of<T>(caf::make_message(filled));
    auto plain = bytes_of<T>(caf::make_message(T{}));
    EXPECT_NE(sent, plain) << name << ": the filler changed nothing";
    caf::message received;
    caf::binary_deserializer source{sys, sent};
    auto err = source(received);
    ASSERT_FALSE(err) << name << ": " << sys.render(err);
    ASSERT_TRUE(received.match_elements<T>()) << name << " arrived as another type";
    EXPECT_EQ(bytes_of<T>(received), sent) << name << " changed on the way";
    ++checked;
  }

  template <caf::type_id_t... Is>
  void round_trip_all(std::integer_sequence<caf::type_id_t, Is...>) {
    (round_trip<typename caf::type_by_id<caf::id_block::ragtor::begin + Is>::type>(), ...);
  }

  int checked = 0;
};

TEST_F(serialization, every_registered_message_type_round_trips) {
  constexpr auto n = caf::id_block::ragtor::end - caf::id_block::ragtor::begin;
  round_trip_all(std::make_integer_sequence<caf::type_id_t, n>{});
  EXPECT_EQ(checked, static_cast<int>(n));
}

TEST_F(serialization, handle_carrying_types_round_trip) {
  round_trip<turn_ticket>();
  round_trip<node_services>();
}

TEST_F(serialization, a_filled_retrieve_request_keeps_its_fields) {
  retrieve_options opts;
  opts.top_k = 7;
  opts.request_id = "r-1";
  opts.local_only = true;
  member_info m;
  m.name = "node-a";
  m.address = "127.0.0.1:4242";
  m.roles = "retrieval";
  m.kbs = "*";
  m.started_at_ms = 17;
  m.heartbeat_at_ms = 18;
  m.status = "suspect";
  auto sent = bytes_of<retrieve_options>(caf::make_message(opts, m));
  caf::message received;
  caf::binary_deserializer source{sys, sent};
  ASSERT_FALSE(source(received));
  ASSERT_TRUE((received.match_elements<retrieve_options, member_info>()));
  auto& o = received.get_as<retrieve_options>(0);
  EXPECT_EQ(o.top_k, 7);
  EXPECT_EQ(o.request_id, "r-1");
  EXPECT_TRUE(o.local_only);
  auto& r = received.get_as<member_info>(1);
  EXPECT_EQ(r.name, "node-a");
  EXPECT_EQ(r.address, "127.0.0.1:4242");
  EXPECT_EQ(r.heartbeat_at_ms, 18);
  EXPECT_EQ(r.status, "suspect");
}

}  // namespace
}  // namespace ragtor
