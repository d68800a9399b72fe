// JSON-lines progress of `tupe run` (json_progress.h).
#include "json_progress.h"

#include <cmath>

namespace cli {

JsonProgress::JsonProgress(bool on, std::ostream& out, std::chrono::milliseconds heartbeat)
    : out_(out), heartbeat_(heartbeat) {
    if (on)
        thread_ = std::thread([this] { beat(); });
    else
        done_ = true;
}

JsonProgress::~JsonProgress() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        done_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void JsonProgress::emit(const nlohmann::json& event) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_) write(event);
}

void JsonProgress::progress(const experiments::PlanProgress& p) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    const auto now = Clock::now();
    const bool new_job = p.current != job_;
    if (new_job) {
        job_ = p.current;
        job_start_ = now;
        write({{"event", "job"}, {"job", p.current}, {"index", p.done + 1}, {"total", p.total}});
    }
    nlohmann::json e = {
        {"event", "progress"}, {"job", p.current},           {"done", p.done},
        {"total", p.total},    {"fraction", p.job_fraction}, {"status", p.job_status}};
    e["eta_s"] = p.eta_seconds >= 0 ? nlohmann::json(p.eta_seconds) : nullptr;
    last_progress_event_ = e;
    if (!new_job && now - last_progress_ < std::chrono::milliseconds(200)) return;
    write(e);
}

void JsonProgress::write(nlohmann::json event) {
    const auto now = Clock::now();
    const std::string kind = event.value("event", "");
    if (kind == "progress") {
        event["job_elapsed_s"] =
            std::round(std::chrono::duration<double>(now - job_start_).count() * 10) / 10;
        last_progress_ = now;
    }
    if (kind == "summary") done_ = true;  // the last line
    last_write_ = now;
    out_ << event.dump() << std::endl;
}

void JsonProgress::beat() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
        wake_.wait_for(lock, heartbeat_ / 4);
        if (done_ || last_progress_event_.is_null()) continue;
        if (Clock::now() - last_write_ < heartbeat_) continue;
        nlohmann::json e = last_progress_event_;
        e["heartbeat"] = true;
        write(e);
    }
}

}  // namespace cli
