// CAF 0.17.6 keeps every request's timeout in the actor clock until the
// timeout passes, even after the response arrived (the clock has
// `cancel_request_timeout`, but nothing calls it; the entries go only when
// the requesting actor terminates). A long-lived actor that makes many
// requests with a long timeout therefore holds an entry (and later a
// stray timeout message) per request for the whole timeout: the agent's
// 10-minute worker timeout grew a server by ~190 bytes per search.
// Call this from the response handlers of such a request.
#pragma once

#include <caf/local_actor.hpp>
#include <caf/message_id.hpp>

namespace ragtor {

inline void forget_request_timeout(caf::local_actor* self, caf::message_id response_id) {
  self->clock().cancel_request_timeout(self, response_id);
}

}  // namespace ragtor
