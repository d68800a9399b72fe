// Typed exceptions thrown at the engine's boundaries (files, checkpoints, data).
// Each carries the file (and line where there is one) so main() can print one line.
#pragma once

#include <stdexcept>
#include <string>

namespace engine {

/// A file the user gave is missing, unreadable or malformed. what() is the whole message,
/// already prefixed with "path:line: " when a line is known.
class InputError : public std::runtime_error {
  public:
    InputError(const std::string& path, const std::string& message, long line = 0)
        : std::runtime_error(format(path, message, line)), path_(path), line_(line) {}
    const std::string& path() const { return path_; }
    long line() const { return line_; }

  private:
    static std::string format(const std::string& path, const std::string& message, long line) {
        std::string where = path;
        if (line > 0) where += ":" + std::to_string(line);
        return where + ": " + message;
    }
    std::string path_;
    long line_;
};

/// A checkpoint that cannot be read or does not fit the model it is loaded into.
class CheckpointError : public InputError {
  public:
    using InputError::InputError;
};

/// Training diverged (non-finite loss); the last good checkpoint is kept.
class TrainingDiverged : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

}  // namespace engine
