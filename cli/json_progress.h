// `tupe run --progress jsonl` (cmd_experiment.cpp): the runner's progress as JSON events, one
// per line, for programs such as the desktop app (app/workbench/core/tupe_process.cpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <thread>

#include "experiments/runner.h"

namespace cli {

/// Writes events to `out`, flushed per line: "job" at a job's start, "progress" at most 5 times
/// a second (so once per step of a slow job), and, while nothing else is written for
/// `heartbeat` (a BERT-Base step on a CPU, a tokenizer pass), the last progress again with
/// "heartbeat": true, so a reader always knows the run is alive. Every progress event carries
/// job_elapsed_s. After a "summary" event nothing more is written. Thread-safe.
class JsonProgress {
  public:
    using Clock = std::chrono::steady_clock;
    /// `on` = false: a no-op (no thread).
    JsonProgress(bool on, std::ostream& out,
                 std::chrono::milliseconds heartbeat = std::chrono::seconds(2));
    ~JsonProgress();
    JsonProgress(const JsonProgress&) = delete;
    JsonProgress& operator=(const JsonProgress&) = delete;

    void emit(const nlohmann::json& event);
    void progress(const experiments::PlanProgress& p);

  private:
    void write(nlohmann::json event);  // mutex_ held
    void beat();

    std::ostream& out_;
    const std::chrono::milliseconds heartbeat_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool done_ = false;
    std::string job_;
    Clock::time_point job_start_ = Clock::now(), last_write_ = Clock::now(), last_progress_{};
    nlohmann::json last_progress_event_;  // null until the first progress
    std::thread thread_;
};

}  // namespace cli
