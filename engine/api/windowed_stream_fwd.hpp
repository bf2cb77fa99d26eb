#pragma once

namespace snapflow::api {

// engine/api/windowed_stream.hpp
template <typename K, typename T, typename A>
class windowed_stream;

}  // namespace snapflow::api
