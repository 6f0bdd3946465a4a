// CRC-32C (Castagnoli, as in iSCSI and ext4): the checksum of every SSD-tier record. Uses the
// SSE4.2 crc32 instruction when the CPU has it (checked once at run time), a table otherwise;
// both give the same value. crc32c("123456789") == 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace cgn::kvcache {

// Continues `crc` (0 to start) over `data`.
uint32_t crc32c(std::span<const uint8_t> data, uint32_t crc = 0);

// Whether the hardware path is in use (for the benchmark's report).
bool crc32c_hardware();

}  // namespace cgn::kvcache
