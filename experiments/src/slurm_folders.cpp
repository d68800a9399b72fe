// The Slurm executor's files (experiments/slurm.h): RUNS_DIR/slurm/ (the ledger of what was
// submitted, the job folders with their own stores and done.json), Slurm's view of the
// ledger's jobs (squeue, else sacct), the job side's store folder, and `tupe gather`, which
// copies each finished job folder into the study's store once. The submission, `tupe status`
// and `tupe cancel` are in slurm_executor.cpp.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
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
        const auto f = split(line, '\t');
        if (f.size() < 4 || f[0].empty() || f[1].empty()) continue;
        // Ledgers written before the cluster and job name were kept have 4 fields.
        const bool named = f.size() >= 6;
        out.push_back(
            {f[0], f[1], f[2], std::atof(f[3].c_str()), named ? f[4] : "", named ? f[5] : ""});
    }
    return out;
}

void append_ledger(const ExperimentSpec& spec, const std::vector<LedgerEntry>& entries) {
    const fs::path path = slurm_dir(spec) / "ledger.tsv";
    std::ofstream out(path, std::ios::app);
    for (const auto& e : entries)
        out << e.slurm_id << '\t' << e.job << '\t' << e.fingerprint << '\t'
            << static_cast<long long>(e.time) << '\t' << e.cluster << '\t' << e.slurm_name << '\n';
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

double parse_slurm_time(const std::string& text) {
    std::tm tm{};
    if (text.size() < 19 || !::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return 0;
    tm.tm_isdst = -1;
    return static_cast<double>(std::mktime(&tm));
}

std::string slurm_cluster_name() {
    const auto r = run_command({"scontrol", "show", "config"});
    for (const auto& line : split(r.out, '\n'))
        if (line.rfind("ClusterName", 0) == 0) {
            const auto eq = line.find('=');
            std::string name = eq == std::string::npos ? "" : line.substr(eq + 1);
            name.erase(0, name.find_first_not_of(' '));
            return first_line(name);
        }
    return "";
}

bool record_matches(const LedgerEntry& entry, const SlurmView& view) {
    if (!entry.cluster.empty() && !view.cluster.empty() && entry.cluster != view.cluster)
        return false;
    if (!entry.slurm_name.empty() && !view.name.empty() && entry.slurm_name != view.name)
        return false;
    // sbatch's submit time is Slurm's clock before the ledger's; a minute covers both that
    // and clocks a little apart.
    return entry.time <= 0 || view.submit_time <= 0 || view.submit_time >= entry.time - 60;
}

namespace {

std::string trim_right(std::string s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
    return s;
}

/// squeue's records of this user's jobs, by task id ("124_3"; an array's tasks that are still
/// one record, "124_[0-2,5%4]", under each task's id and under "124").
std::map<std::string, SlurmView> squeue_records() {
    const auto sq = run_command(
        {"squeue", "--me", "-h", "-t", "all", "-r", "-O",
         "JobArrayID:|,State:|,NodeList:|,Reason:|,exit_code:|,SubmitTime:|,StartTime:|,"
         "Cluster:|,Name:512"});
    if (sq.status != 0)
        throw std::runtime_error("squeue failed: " + first_line(sq.err.empty() ? sq.out : sq.err));
    std::map<std::string, SlurmView> seen;
    for (const auto& line : split(sq.out, '\n')) {
        const auto f = split(line, '|');
        if (f.size() < 9) continue;
        SlurmView v;
        v.state = trim_right(f[1]);
        v.node = trim_right(f[2]);
        v.reason = trim_right(f[3]);
        const std::string code = trim_right(f[4]);
        if (!code.empty() && std::isdigit(static_cast<unsigned char>(code[0]))) {
            const int raw = std::atoi(code.c_str());
            v.exit_code = (raw >> 8) & 0xff;
            v.signal = raw & 0x7f;
        }
        v.submit_time = parse_slurm_time(trim_right(f[5]));
        v.start_time = parse_slurm_time(trim_right(f[6]));
        v.cluster = trim_right(f[7]);
        v.name = trim_right(f[8]);
        const std::string id = trim_right(f[0]);
        for (const auto& task : array_task_ids(id)) seen[task] = v;
        if (id.find("_[") != std::string::npos) seen[id.substr(0, id.find('_'))] = v;
    }
    return seen;
}

/// sacct's records of `ids`, every record of each (--duplicates: a reused id, a requeue).
std::multimap<std::string, SlurmView> sacct_records(const std::string& ids) {
    std::multimap<std::string, SlurmView> out;
    const auto sa = run_command({"sacct", "-n", "-P", "-X", "-D", "-j", ids, "-o",
                                 "JobID,State,ExitCode,NodeList,Submit,Start,Cluster,JobName"});
    if (sa.status != 0) return out;  // no accounting on this cluster
    for (const auto& line : split(sa.out, '\n')) {
        const auto f = split(line, '|');
        if (f.size() < 8) continue;
        SlurmView v;
        v.state = f[1].substr(0, f[1].find(' '));  // "CANCELLED by 0"
        const auto colon = f[2].find(':');
        if (colon != std::string::npos) {
            v.exit_code = std::atoi(f[2].substr(0, colon).c_str());
            v.signal = std::atoi(f[2].substr(colon + 1).c_str());
        }
        v.node = f[3];
        v.submit_time = parse_slurm_time(f[4]);
        v.start_time = parse_slurm_time(f[5]);
        v.cluster = f[6];
        v.name = f[7];
        v.from_accounting = true;
        out.emplace(f[0], v);
    }
    return out;
}

}  // namespace

std::map<std::string, SlurmView> query_slurm(const std::map<std::string, LedgerEntry>& latest) {
    std::map<std::string, SlurmView> out;
    if (latest.empty()) return out;
    const auto seen = squeue_records();
    std::string missing;
    for (const auto& [job, e] : latest) {
        // The tasks of an array cancelled before they started are one record, the array's.
        auto found = seen.find(e.slurm_id);
        if (found == seen.end() && e.slurm_id.find('_') != std::string::npos)
            found = seen.find(e.slurm_id.substr(0, e.slurm_id.find('_')));
        if (found != seen.end() && record_matches(e, found->second))
            out[job] = found->second;
        else
            missing += (missing.empty() ? "" : ",") + e.slurm_id;
    }
    if (missing.empty()) return out;
    // Jobs that left squeue (MinJobAge), or whose id squeue now gives to another job (a
    // restarted controller): accounting, where the cluster keeps it.
    const auto records = sacct_records(missing);
    for (const auto& [job, e] : latest) {
        if (out.count(job)) continue;
        const auto [first, last] = records.equal_range(e.slurm_id);
        for (auto r = first; r != last; ++r)
            if (record_matches(e, r->second) &&
                (!out.count(job) || r->second.submit_time >= out[job].submit_time))
                out[job] = r->second;
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

double job_heartbeat(const fs::path& folder, const std::string& experiment,
                     const std::string& job) {
    const fs::path db = folder / "job.sqlite";
    std::error_code error;
    if (!fs::exists(db, error)) return 0;
    try {
        auto store = ResultStore::open(db.string(), OpenMode::kReadOnly);
        const auto e = store.find_experiment(experiment);
        if (!e) return 0;
        double newest = 0;
        for (const auto& c : store.list_claims(e->id))
            if (c.job == job && c.held()) newest = std::max(newest, c.heartbeat_time);
        return newest;
    } catch (const std::exception&) {
        return 0;  // being written (a rollback journal): asked again at the next look
    }
}

SubmitLock::SubmitLock(const fs::path& slurm_dir,
                       const std::function<void(const std::string&)>& say) {
    fs::create_directories(slurm_dir);
    const fs::path path = slurm_dir / "submit.lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw engine::InputError(path.string(), "cannot open the study's submit lock");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        char holder[128] = {0};
        const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
        std::string who = n > 0 ? first_line(std::string(holder, static_cast<size_t>(n))) : "";
        if (say)
            say("another `tupe run --executor slurm` of this study" +
                (who.empty() ? std::string() : " (" + who + ")") +
                " is submitting; waiting for it, then submitting only what it left");
        while (::flock(fd_, LOCK_EX) != 0)
            if (errno != EINTR) throw engine::InputError(path.string(), "cannot lock it");
    }
    const std::string me = host_name() + ":" + std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, me.data(), me.size(), 0) < 0) {
        // The holder's name is only for the message above.
    }
}

SubmitLock::~SubmitLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock
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
