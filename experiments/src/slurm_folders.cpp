// The Slurm executor's files (experiments/slurm.h): RUNS_DIR/slurm/ (the ledger of what was
// submitted, the job folders with their own stores and done.json), Slurm's view of the
// ledger's jobs (squeue, else sacct), the job side's store folder, and `tupe gather`, which
// copies each finished job folder into the study's store once. The submission, `tupe status`
// and `tupe cancel` are in slurm_executor.cpp.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "engine/errors.h"
#include "engine/sha256.h"
#include "experiments/result_store.h"
#include "experiments/slurm.h"
#include "slurm_internal.h"

namespace experiments {

namespace fs = std::filesystem;

namespace slurm_detail {

fs::path slurm_dir(const ExperimentSpec& spec) {
    return fs::absolute(fs::path(spec.runs_dir) / "slurm").lexically_normal();
}

fs::path job_folder(const ExperimentSpec& spec, const Job& job) {
    return slurm_dir(spec) / "jobs" / job.fingerprint;
}

std::string shell_quote(const std::string& text) {
    std::string out = "'";
    for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

CommandResult run_command(const std::vector<std::string>& argv) {
    std::string line;
    for (const auto& a : argv) line += (line.empty() ? "" : " ") + shell_quote(a);
    char err_name[] = "/tmp/tupe-slurm-XXXXXX";
    const int err_fd = ::mkstemp(err_name);
    if (err_fd < 0) throw std::runtime_error("cannot create a temporary file for " + argv[0]);
    ::close(err_fd);
    CommandResult result;
    FILE* pipe = ::popen((line + " 2>" + shell_quote(err_name)).c_str(), "r");
    if (pipe == nullptr) {
        std::remove(err_name);
        throw std::runtime_error("cannot run " + argv[0]);
    }
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
    const int status = ::pclose(pipe);
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::ifstream err_file(err_name);
    std::stringstream text;
    text << err_file.rdbuf();
    result.err = text.str();
    std::remove(err_name);
    return result;
}

std::string first_line(const std::string& text) {
    std::string line = text.substr(0, text.find('\n'));
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    return line;
}

// ---------------------------------------------------------------------------------------
// The ledger: what this study submitted, newest last.

std::vector<LedgerEntry> read_ledger(const ExperimentSpec& spec) {
    std::vector<LedgerEntry> out;
    std::ifstream in(slurm_dir(spec) / "ledger.tsv");
    for (std::string line; std::getline(in, line);) {
        std::stringstream fields(line);
        LedgerEntry e;
        std::string time;
        if (std::getline(fields, e.slurm_id, '\t') && std::getline(fields, e.job, '\t') &&
            std::getline(fields, e.fingerprint, '\t') && std::getline(fields, time))
            e.time = std::atof(time.c_str());
        if (!e.slurm_id.empty() && !e.job.empty()) out.push_back(e);
    }
    return out;
}

void append_ledger(const ExperimentSpec& spec, const std::vector<LedgerEntry>& entries) {
    const fs::path path = slurm_dir(spec) / "ledger.tsv";
    std::ofstream out(path, std::ios::app);
    for (const auto& e : entries)
        out << e.slurm_id << '\t' << e.job << '\t' << e.fingerprint << '\t'
            << static_cast<long long>(e.time) << '\n';
    out.flush();
    if (!out) throw engine::InputError(path.string(), "cannot append to the Slurm ledger");
}

/// The newest ledger entry of each job.
std::map<std::string, LedgerEntry> latest_entries(const std::vector<LedgerEntry>& ledger) {
    std::map<std::string, LedgerEntry> latest;
    for (const auto& e : ledger) latest[e.job] = e;
    return latest;
}

// ---------------------------------------------------------------------------------------
// Slurm's view.

bool live_state(const std::string& state) {
    static const std::set<std::string> live = {
        "PENDING",     "RUNNING",      "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
        "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING",    "SIGNALING",  "STAGE_OUT", "STOPPED"};
    return live.count(state) > 0;
}

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> out;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, separator);) out.push_back(item);
    return out;
}

/// The ids squeue writes as "124_3", or "124_[0-2,5%4]" for the tasks of an array that are
/// still one record (pending, or cancelled before they started): one id per task.
std::vector<std::string> array_task_ids(const std::string& id) {
    const auto open = id.find("_[");
    if (open == std::string::npos || id.back() != ']') return {id};
    const std::string base = id.substr(0, open);
    std::string ranges = id.substr(open + 2, id.size() - open - 3);
    ranges = ranges.substr(0, ranges.find('%'));  // a throttle, "%4"
    std::vector<std::string> out;
    for (const auto& range : split(ranges, ',')) {
        const auto dash = range.find('-');
        const long first = std::atol(range.substr(0, dash).c_str());
        const long last =
            dash == std::string::npos ? first : std::atol(range.substr(dash + 1).c_str());
        for (long t = first; t <= last && out.size() < 100000; ++t)
            out.push_back(base + "_" + std::to_string(t));
    }
    return out;
}

/// Slurm's state of each id (squeue for jobs it still knows, then sacct where accounting is
/// on); an id neither knows is absent.
std::map<std::string, SlurmView> query_slurm(const std::set<std::string>& ids) {
    std::map<std::string, SlurmView> out;
    if (ids.empty()) return out;
    const auto sq = run_command({"squeue", "--me", "-h", "-t", "all", "-r", "-O",
                                 "JobArrayID:|,State:|,NodeList:|,Reason:|,exit_code:"});
    if (sq.status != 0)
        throw std::runtime_error("squeue failed: " + first_line(sq.err.empty() ? sq.out : sq.err));
    std::map<std::string, SlurmView> seen;  // every record squeue gave, by task id
    for (const auto& line : split(sq.out, '\n')) {
        const auto f = split(line, '|');
        if (f.size() < 5) continue;
        auto trim = [](std::string s) {
            while (!s.empty() && s.back() == ' ') s.pop_back();
            return s;
        };
        SlurmView v;
        v.state = trim(f[1]);
        v.node = trim(f[2]);
        v.reason = trim(f[3]);
        const std::string code = trim(f[4]);
        if (!code.empty() && std::isdigit(static_cast<unsigned char>(code[0]))) {
            const int raw = std::atoi(code.c_str());
            v.exit_code = (raw >> 8) & 0xff;
            v.signal = raw & 0x7f;
        }
        for (const auto& id : array_task_ids(trim(f[0]))) seen[id] = v;
    }
    for (const auto& id : ids) {
        // The tasks of an array cancelled before they started are one record, the array's.
        const auto found = seen.find(id);
        const auto whole = seen.find(id.substr(0, id.find('_')));
        if (found != seen.end())
            out[id] = found->second;
        else if (id.find('_') != std::string::npos && whole != seen.end())
            out[id] = whole->second;
    }
    std::string missing;
    for (const auto& id : ids)
        if (!out.count(id)) missing += (missing.empty() ? "" : ",") + id;
    if (missing.empty()) return out;
    // Jobs that left squeue (MinJobAge): sacct, where the cluster keeps accounting.
    const auto sa = run_command(
        {"sacct", "-n", "-P", "-X", "-j", missing, "-o", "JobID,State,ExitCode,NodeList"});
    if (sa.status != 0) return out;
    for (const auto& line : split(sa.out, '\n')) {
        const auto f = split(line, '|');
        if (f.size() < 4 || !ids.count(f[0])) continue;
        SlurmView v;
        v.state = f[1].substr(0, f[1].find(' '));  // "CANCELLED by 0"
        const auto colon = f[2].find(':');
        if (colon != std::string::npos) {
            v.exit_code = std::atoi(f[2].substr(0, colon).c_str());
            v.signal = std::atoi(f[2].substr(colon + 1).c_str());
        }
        v.node = f[3];
        out[f[0]] = v;
    }
    return out;
}

// ---------------------------------------------------------------------------------------
// A job folder's done.json.

std::optional<DoneMarker> read_done(const fs::path& folder) {
    std::ifstream in(folder / "done.json");
    if (!in) return std::nullopt;
    try {
        const auto j = nlohmann::json::parse(in);
        DoneMarker d;
        d.job = j.at("job").get<std::string>();
        d.fingerprint = j.at("fingerprint").get<std::string>();
        d.status = j.at("status").get<std::string>();
        d.sha256 = j.at("sha256").get<std::string>();
        d.slurm_job = j.value("slurm_job", std::string());
        d.host = j.value("host", std::string());
        d.ended = j.value("ended", 0.0);
        return d;
    } catch (const std::exception&) {
        return std::nullopt;  // being replaced (rename is atomic, so: not written by us)
    }
}

std::string host_name() {
    char name[256] = {0};
    ::gethostname(name, sizeof name - 1);
    return name;
}

}  // namespace slurm_detail

using namespace slurm_detail;

// ---------------------------------------------------------------------------------------
// The job side.

std::string begin_job_store(const std::string& dir) {
    std::error_code error;
    fs::create_directories(dir, error);
    if (error) throw engine::InputError(dir, "cannot create the job folder: " + error.message());
    fs::remove(fs::path(dir) / "done.json", error);  // a new attempt: its result is not yet
    ::setenv("TUPE_STORE_JOURNAL", "delete", 1);     // children (tupe analyze) inherit it
    return (fs::path(dir) / "job.sqlite").string();
}

void use_job_store(ExperimentSpec& spec, RunnerOptions& options, const std::string& dir) {
    spec.study_store = spec.database;
    spec.database = begin_job_store(dir);
    if (!options.claim_from.empty() || !ResultStore::holds_data(spec.database)) return;
    auto store = ResultStore::open(spec.database);
    if (const auto e = store.find_experiment(spec.name))
        for (const auto& c : store.list_claims(e->id))
            if (c.job == options.only_job && c.held()) options.claim_from = c.owner.text();
}

void finish_job_store(const std::string& dir, const std::string& job,
                      const std::string& fingerprint, bool failed) {
    const fs::path store = fs::path(dir) / "job.sqlite";
    std::string slurm_job;
    if (const char* array = std::getenv("SLURM_ARRAY_JOB_ID")) {
        const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
        slurm_job = std::string(array) + "_" + (task ? task : "");
    } else if (const char* id = std::getenv("SLURM_JOB_ID")) {
        slurm_job = id;
    }
    const nlohmann::json done = {
        {"job", job},
        {"fingerprint", fingerprint},
        {"status", failed ? "failed" : "finished"},
        {"sha256", engine::sha256_file_hex(store.string())},
        {"slurm_job", slurm_job},
        {"host", host_name()},
        {"ended", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                      .count()}};
    const fs::path tmp = fs::path(dir) / "done.json.tmp";
    {
        std::ofstream out(tmp);
        out << done.dump(2) << "\n";
        out.flush();
        if (!out) throw engine::InputError(tmp.string(), "cannot write the job's done marker");
    }
    fs::rename(tmp, fs::path(dir) / "done.json");
}

// ---------------------------------------------------------------------------------------
// Gather.

namespace slurm_detail {

/// One finished job folder, read: its marker and its run from a private copy of its store
/// (the copy is hashed, so what is ingested is exactly what the job wrote).
struct FinishedJob {
    const Job* job = nullptr;
    DoneMarker done;
    RunBundle bundle;
};

std::optional<FinishedJob> read_finished(const ExperimentSpec& spec, const Job& job,
                                         GatherSummary& summary) {
    const fs::path folder = job_folder(spec, job);
    if (!fs::exists(folder)) return std::nullopt;
    const auto done = read_done(folder);
    if (!done) {
        ++summary.pending;
        return std::nullopt;
    }
    if (done->job != job.name || done->fingerprint != job.fingerprint) {
        summary.refused.push_back(folder.string() + ": done.json names job " + done->job +
                                  ", not " + job.name);
        return std::nullopt;
    }
    const fs::path copy = folder / ("gather-" + std::to_string(::getpid()) + ".sqlite");
    std::error_code error;
    fs::copy_file(folder / "job.sqlite", copy, fs::copy_options::overwrite_existing, error);
    if (error) {
        summary.refused.push_back(folder.string() + ": cannot copy job.sqlite: " + error.message());
        return std::nullopt;
    }
    struct Remove {
        fs::path path;
        ~Remove() {
            std::error_code ignored;
            fs::remove(path, ignored);
            fs::remove(path.string() + "-journal", ignored);
        }
    } remove{copy};
    if (engine::sha256_file_hex(copy.string()) != done->sha256) {
        summary.refused.push_back(folder.string() +
                                  ": job.sqlite does not match the SHA-256 in done.json (a new "
                                  "attempt is writing it, or it was changed)");
        return std::nullopt;
    }
    try {
        auto store = ResultStore::open(copy.string(), OpenMode::kReadOnly);
        const auto experiment = store.find_experiment(spec.name);
        const auto run = experiment ? store.find_run(experiment->id, job.name) : std::nullopt;
        if (!run) {
            summary.refused.push_back(folder.string() + ": its store holds no run " + job.name);
            return std::nullopt;
        }
        FinishedJob f{&job, *done, store.read_run_bundle(run->id)};
        return f;
    } catch (const StoreError& e) {
        summary.refused.push_back(folder.string() + ": " + e.what());
        return std::nullopt;
    }
}

}  // namespace slurm_detail

GatherSummary gather_study(const ExperimentSpec& spec) {
    GatherSummary summary;
    const BoundPlan bound = bind_plan(spec, ChangedJobs::kDescribe);
    auto store = ResultStore::open(spec.database);
    const int64_t experiment =
        store.get_or_create_experiment(spec.name, fs::absolute(spec.path).string(), spec.yaml_text);
    for (const auto kind : {Job::Kind::kPretrain, Job::Kind::kFinetune})
        for (const Job& job : bound.jobs) {
            if (job.kind != kind) continue;
            auto finished = read_finished(bound.spec, job, summary);
            if (!finished) continue;
            const std::string token = finished->done.slurm_job + ":" + finished->done.sha256;
            const std::string parent = job.kind == Job::Kind::kFinetune ? job.variant : "";
            if (store.ingest_run(experiment, job.name, token, finished->bundle, parent))
                ++summary.ingested;
            else
                ++summary.already;
        }
    return summary;
}

}  // namespace experiments
