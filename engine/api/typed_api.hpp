#pragma once

// The typed API in one include: typed_environment, data_stream<T>, keyed_stream<K, T>,
// connected_streams<A, B> and keyed_connected_streams<K, A, B>, the typed keyed states and the
// clocks their TTL uses.
#include "engine/api/connected_streams.hpp"
#include "engine/api/data_stream.hpp"
#include "engine/api/keyed_connected_streams.hpp"
#include "engine/api/keyed_stream.hpp"
#include "engine/api/manual_clock.hpp"
#include "engine/api/typed_environment.hpp"
#include "engine/api/windowed_stream.hpp"
