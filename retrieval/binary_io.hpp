// Little helpers for ragtor's binary index snapshots: a writer appending
// fixed-size values and length-prefixed strings/arrays to a buffer, and a
// bounds-checked reader that fails (instead of reading garbage) on a
// truncated or foreign file. Snapshots end with an FNV-1a 64 checksum of
// everything before it. Native byte order: snapshots are a cache of the
// documents file, rebuilt whenever they do not load.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace ragtor::binary {

// FNV-1a 64: fixed across platforms and runs (std::hash is not). `h`
// carries on from the hash of what came before: fnv1a(b, fnv1a(a)) is
// fnv1a of a followed by b.
constexpr uint64_t fnv1a_basis = 1469598103934665603ull;
inline uint64_t fnv1a(std::string_view s, uint64_t h = fnv1a_basis) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

class writer {
public:
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    out_.append(s);
  }
  template <class T>
  void put_array(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  // What put(v) appends, as bytes (for a caller that hashes or writes
  // it in pieces instead of buffering it).
  template <class T>
  static std::string_view bytes_of(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    return {reinterpret_cast<const char*>(&v), sizeof v};
  }
  // The buffer with its checksum appended.
  std::string finish() {
    put<uint64_t>(fnv1a(out_));
    return std::move(out_);
  }

private:
  std::string out_;
};

// The checksum a writer would append after the same put_string calls,
// without the buffer (for what is hashed, or written in pieces, whole).
class hasher {
public:
  void put_string(std::string_view s) {
    uint64_t size = s.size();
    h_ = fnv1a(s, fnv1a(writer::bytes_of(size), h_));
  }
  // What finish() appends.
  uint64_t checksum() const { return h_; }
  // The hash of finish()'s whole result: the bytes, then their checksum.
  uint64_t hash_of_finished() const { return fnv1a(writer::bytes_of(h_), h_); }

private:
  uint64_t h_ = fnv1a_basis;
};

class reader {
public:
  // Verifies and strips the trailing checksum; ok() is false on mismatch.
  explicit reader(std::string_view data) {
    if (data.size() < sizeof(uint64_t)) {
      ok_ = false;
      return;
    }
    uint64_t sum;
    std::memcpy(&sum, data.data() + data.size() - sizeof sum, sizeof sum);
    data_ = data.substr(0, data.size() - sizeof sum);
    ok_ = fnv1a(data_) == sum;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == data_.size(); }

  template <class T>
  bool get(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (!ok_ || data_.size() - pos_ < sizeof v)
      return ok_ = false;
    std::memcpy(&v, data_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return true;
  }
  bool get_string(std::string& s) {
    std::string_view v;
    if (!get_view(v))
      return false;
    s.assign(v);
    return true;
  }
  // A string in place: valid while the data read is.
  bool get_view(std::string_view& s) {
    uint64_t n;
    if (!get(n) || data_.size() - pos_ < n)
      return ok_ = false;
    s = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  // Steps over n bytes.
  bool skip(uint64_t n) {
    if (!ok_ || data_.size() - pos_ < n)
      return ok_ = false;
    pos_ += n;
    return true;
  }
  template <class T>
  bool get_array(std::vector<T>& v) {
    uint64_t n;
    if (!get(n) || (data_.size() - pos_) / sizeof(T) < n)
      return ok_ = false;
    v.resize(n);
    std::memcpy(v.data(), data_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }

private:
  std::string_view data_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace ragtor::binary
