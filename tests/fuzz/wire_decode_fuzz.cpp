// transport decode (transport/envelope.hpp): one ZeroMQ frame from an untrusted peer. It must
// never crash, throw or allocate what a forged length asks for; whatever it accepts must
// survive encode and decode unchanged. Its two readers must agree: what the fast reader of
// canonical frames accepts, the general reader accepts as the same message, and decode() answers
// exactly as the general reader does; the fast path into a kept trigger or acknowledgement
// reads the same message as well.
#include <sstream>

#include "tests/fuzz/fuzz_target.hpp"
#include "transport/envelope.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace snapflow;
  const std::string_view frame = fuzz::as_text(data, size);
  // A small frame limit too, so the "declares more than a frame may hold" path is reached.
  (void)wire::decode(frame, 64);
  wire::decode_result decoded = wire::decode(frame);
  const wire::decode_result general = wire::detail::decode_general(frame);
  fuzz::check(decoded.ok() == general.ok(), "decode and the general reader disagree");
  if (decoded.ok())
    fuzz::check(decoded.value() == general.value(), "decode and the general reader disagree");
  else
    fuzz::check(decoded.error() == general.error(), "decode and the general reader disagree");
  if (const auto fast = wire::detail::decode_canonical(frame)) {
    fuzz::check(general.ok() && *fast == general.value(),
                "the fast reader accepted what the general reader reads otherwise");
  }
  wire::trigger_checkpoint trigger;
  if (wire::decode_canonical(frame, trigger))
    fuzz::check(general.ok() && general.value() == wire::message{trigger},
                "the fast path into a trigger read another message");
  wire::acknowledge_checkpoint ack;
  if (wire::decode_canonical(frame, ack))
    fuzz::check(general.ok() && general.value() == wire::message{ack},
                "the fast path into an acknowledgement read another message");
  std::ostringstream printed;
  if (!decoded) {
    printed << decoded.error();
    return 0;
  }
  printed << decoded.value();
  const std::string again = wire::encode(decoded.value());
  wire::decode_result redecoded = wire::decode(again);
  fuzz::check(redecoded.ok(), "the encoding of a decoded message does not decode");
  fuzz::check(redecoded.value() == decoded.value(), "encode and decode changed a message");
  return 0;
}
