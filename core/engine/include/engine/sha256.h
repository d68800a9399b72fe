// SHA-256 (FIPS 180-4) of bytes and of files, torch-free: the results store hashes its
// checkpoints and artifacts with it (experiments/analysis_artifacts.h, file_hash), so a stored
// hash identifies the exact file a result came from.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace engine {

/// Streaming SHA-256: update() with the bytes in any number of pieces, then digest() once.
class Sha256 {
  public:
    Sha256();
    void update(const void* data, std::size_t size);
    /// The 32-byte digest; finishes the hash (further update() calls are an error).
    std::array<std::uint8_t, 32> digest();

  private:
    void compress(const std::uint8_t* block);
    std::array<std::uint32_t, 8> h_;
    std::array<std::uint8_t, 64> buffer_{};
    std::size_t buffered_ = 0;
    std::uint64_t total_bytes_ = 0;
    bool finished_ = false;
};

/// 64 lower-case hex digits: SHA-256 of `bytes`.
std::string sha256_hex(const std::string& bytes);

/// 64 lower-case hex digits: SHA-256 of the file's bytes, read in 64 KiB chunks. Throws
/// engine::InputError naming the file when it cannot be opened or read.
std::string sha256_file_hex(const std::string& path);

}  // namespace engine
