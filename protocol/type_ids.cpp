#include "protocol/type_ids.hpp"

#include <caf/actor_system_config.hpp>

#include "protocol/actors.hpp"
#include "protocol/errc.hpp"

namespace ragtor {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::ragtor>();
  cfg.add_message_types<caf::id_block::ragtor_actors>();
  cfg.add_error_category(errc_category, [](uint8_t code, caf::atom_value, const caf::message& msg) {
    std::string out{"ragtor: "};
    out += to_string(static_cast<errc>(code));
    std::string ctx;
    if (msg.match_elements<std::string>())
      ctx = msg.get_as<std::string>(0);
    if (!ctx.empty()) {
      out += " (";
      out += ctx;
      out += ")";
    }
    return out;
  });
}

}  // namespace ragtor
