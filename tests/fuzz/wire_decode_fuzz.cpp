// transport decode (transport/envelope.hpp): one ZeroMQ frame from an untrusted peer. It must
// never crash, throw or allocate what a forged length asks for; whatever it accepts must
// survive encode and decode unchanged.
#include <sstream>

#include "tests/fuzz/fuzz_target.hpp"
#include "transport/envelope.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace snapflow;
  const std::string_view frame = fuzz::as_text(data, size);
  // A small frame limit too, so the "declares more than a frame may hold" path is reached.
  (void)wire::decode(frame, 64);
  wire::decode_result decoded = wire::decode(frame);
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
