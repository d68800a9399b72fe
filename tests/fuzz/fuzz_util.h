// Helpers shared by the libFuzzer targets: the loaders under test read files, so each input is
// written to one scratch file per process (libFuzzer's -fork/-jobs workers are processes).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace fuzz {

/// A path under $TMPDIR (or /tmp) unique to this process, ending in `suffix`; removed at exit.
inline const std::string& scratch_path(const std::string& suffix) {
    static const std::string path = [&] {
        const char* dir = std::getenv("TMPDIR");
        std::string p = std::string(dir && *dir ? dir : "/tmp") + "/tupe_fuzz_" +
                        std::to_string(static_cast<long>(::getpid())) + suffix;
        static std::string for_atexit;
        for_atexit = p;
        std::atexit([] { std::remove(for_atexit.c_str()); });
        return p;
    }();
    return path;
}

/// Writes `size` bytes to `path` (truncating); aborts if the file cannot be written, since
/// every later result would be meaningless.
inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
        std::perror(path.c_str());
        std::abort();
    }
}

}  // namespace fuzz
