#include "http/handler_context.hpp"

#include <caf/error.hpp>

#include "protocol/chat_request_json.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_object.hpp"

namespace ragtor::http {

flight_counter::guard::guard(flight_counter& c) : counter_(c) {
  std::lock_guard lock{counter_.mx_};
  ++counter_.in_flight_;
}

flight_counter::guard::~guard() {
  std::lock_guard lock{counter_.mx_};
  if (--counter_.in_flight_ == 0)
    counter_.idle_cv_.notify_all();
}

size_t flight_counter::wait_idle(std::chrono::milliseconds grace) {
  std::unique_lock lock{mx_};
  idle_cv_.wait_for(lock, grace, [&] { return in_flight_ == 0; });
  return in_flight_;
}

boost::asio::awaitable<void> reply_error(exchange& ex, unsigned status, std::string_view code,
                                         std::string_view message, std::string_view field) {
  co_await reply_json(ex, status, error_body(code, message, field));
}

boost::asio::awaitable<void> reply_caf_error(exchange& ex, const caf::error& err) {
  auto he = http_error_of(code_of(err));
  co_await reply_error(ex, he.status, he.code, error_message(err));
}

boost::asio::awaitable<void> reply_request_error(exchange& ex, const request_error& e) {
  co_await reply_error(ex, static_cast<unsigned>(e.status), e.code, e.message, e.field);
}

boost::asio::awaitable<std::string> user_param(handler_context& ctx, exchange& ex) {
  auto& query = ex.target.query;
  auto i = query.find("user_id");
  if (i == query.end() || !is_valid_id(i->second, ctx.settings.limits.max_id_chars)) {
    co_await reply_request_error(ex, id_field_error("user_id", ctx.settings.limits.max_id_chars));
    co_return std::string{};
  }
  co_return i->second;
}

}  // namespace ragtor::http
