// Integrity check of a PyTorch zip archive before LibTorch parses it. LibTorch 1.13 does not
// verify the zip CRC-32s, so a corrupted checkpoint can reach its TorchScript parser and crash
// the process (found by tests/fuzz/fuzz_checkpoint). Internal to the engine (not installed).
#pragma once

#include <string>

namespace engine::detail {

/// Walks the zip's central directory (zip64 included), checks that every entry lies inside the
/// file and that its CRC-32 matches its bytes (inflated first when deflated). Throws
/// CheckpointError naming `path` and the first bad entry. Reads the whole file once (about 1 GB/s).
void verify_zip_integrity(const std::string& path);

}  // namespace engine::detail
