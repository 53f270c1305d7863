// GET /healthz: the process serves HTTP.
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor::http {

handler_result health(handler_context&, exchange& ex) {
  json_writer w;
  w.begin_object().field("status", "ok").end_object();
  co_await reply_json(ex, 200, w.take());
}

}  // namespace ragtor::http
