// The socket of the connection an exchange answers on, for handlers that
// write their response themselves (the SSE stream) or watch the client
// hang up. server.cpp extends it with the Beast stream it reads from.
#pragma once

#include <boost/asio/ip/tcp.hpp>

namespace ragtor::http {

struct connection_io {
  boost::asio::ip::tcp::socket& socket;
};

}  // namespace ragtor::http
