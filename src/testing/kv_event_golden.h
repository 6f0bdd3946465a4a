// One vLLM KV-event batch as golden bytes, written by hand from the msgpack spec and vLLM's field
// order (legacy array encoding): the simulator's encoder must produce it and the agent's decoder
// must read it, so both sides are held to the same bytes.
#pragma once

#include <string_view>

namespace cgn::testing {

// [1.5, [["BlockStored", [1, 0x1234], nil, [7, 8], 1, nil, "GPU", nil],
//        ["BlockRemoved", [0xffffffffffffffff], "GPU"],
//        ["AllBlocksCleared"]], 0]
// 93 = fixarray(3); cb = float64 1.5; 93 = events array(3)
//   98 = fixarray(8) ab"BlockStored" 92[01 cd1234] c0 92[07 08] 01 c0 a3"GPU" c0
//   93 ac"BlockRemoved" 91[cf ffffffffffffffff] a3"GPU"
//   91 b0"AllBlocksCleared"
// 00 = data_parallel_rank 0
constexpr std::string_view kKvEventArrayBatchHex =
    "93cb3ff8000000000000"
    "93"
    "98ab426c6f636b53746f726564"
    "9201cd1234"
    "c0"
    "920708"
    "01"
    "c0"
    "a3475055"
    "c0"
    "93ac426c6f636b52656d6f766564"
    "91cfffffffffffffffff"
    "a3475055"
    "91b0416c6c426c6f636b73436c6561726564"
    "00";

}  // namespace cgn::testing
