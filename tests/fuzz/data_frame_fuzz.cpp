// transport/data/data_frame.hpp: one data-plane frame from an untrusted producer or consumer
// (records, barriers, end of input, credits). It must never crash, throw or allocate what a
// forged length asks for; whatever it accepts must survive encode and decode unchanged.
#include <sstream>
#include <variant>

#include "tests/fuzz/fuzz_target.hpp"
#include "transport/data/data_frame.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace snapflow;
  const std::string_view frame = fuzz::as_text(data, size);
  // A small frame limit too, so the "declares more than a frame may hold" path is reached.
  (void)data::decode_data_frame(frame, 64);
  const data::data_decode_result decoded = data::decode_data_frame(frame);
  std::ostringstream printed;
  if (!decoded.ok()) {
    printed << decoded.error();
    return 0;
  }
  std::visit([&](const auto& f) { printed << f; }, decoded.value());
  const std::string again = std::visit([](const auto& f) { return data::encode(f); },
                                       decoded.value());
  const data::data_decode_result redecoded = data::decode_data_frame(again);
  fuzz::check(redecoded.ok(), "the encoding of a decoded frame does not decode");
  fuzz::check(redecoded.value() == decoded.value(), "encode and decode changed a frame");
  return 0;
}
