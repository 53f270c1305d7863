#include "http/heap_sampler.hpp"

#include <malloc.h>

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "protocol/json_writer.hpp"

namespace ragtor::http {

status_api spawn_heap_sampler(caf::actor_system& sys) {
  return sys.spawn<caf::detached>([](status_api::pointer) -> status_api::behavior_type {
    return {[](atom::status) -> std::string {
      auto m = mallinfo2();
      json_writer w;
      w.begin_object()
          .field("in_use", static_cast<uint64_t>(m.uordblks + m.hblkhd))
          .field("free", static_cast<uint64_t>(m.fordblks))
          .end_object();
      return w.take();
    }};
  });
}

}  // namespace ragtor::http
