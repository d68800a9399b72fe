// The SQLite results store (see result_store.h), part 1 of 3: opening a store (checks, pragmas,
// WAL, forward migrations), the versioned schema, StoreError, the time helpers and the claim
// owner and health helpers. The
// connection, statement, transaction and retry machinery is in result_store_internal.h; writes
// are in result_store_writes.cpp, reads in result_store_queries.cpp.
#include "experiments/result_store.h"

#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "result_store_internal.h"

namespace experiments {

namespace fs = std::filesystem;

StoreError::StoreError(const std::string& path, const std::string& message)
    : std::runtime_error(one_line(message) + ": " + one_line(path)),
      path_(path),
      message_(one_line(message)) {}

const std::vector<std::string>& schema_migrations() {
    // Version 1: the initial schema. Unset text is '' rather than NULL so that the app reads
    // plain strings; a metric or GLUE value is NULL only for NaN. Kinds and statuses are
    // checked in C++, not by CHECK constraints, so a new status needs no table rebuild.
    static const std::vector<std::string> steps = {
        R"sql(
CREATE TABLE experiments (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    yaml_path TEXT NOT NULL DEFAULT '',
    yaml_text TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    variant TEXT NOT NULL DEFAULT '',
    parent_run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
    config_text TEXT NOT NULL DEFAULT '',
    seed INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'pending',
    start_time TEXT NOT NULL DEFAULT '',
    end_time TEXT NOT NULL DEFAULT '',
    host TEXT NOT NULL DEFAULT '',
    torch_version TEXT NOT NULL DEFAULT '',
    git_commit TEXT NOT NULL DEFAULT '',
    error_message TEXT NOT NULL DEFAULT '',
    out_dir TEXT NOT NULL DEFAULT '',
    step INTEGER NOT NULL DEFAULT 0,
    UNIQUE (experiment_id, name)
);
CREATE INDEX runs_parent ON runs(parent_run_id);
CREATE TABLE params (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE TABLE metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    step INTEGER NOT NULL,
    value REAL,
    wall_time REAL NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX metrics_run_key_step ON metrics(run_id, key, step);
CREATE TABLE glue_results (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    task TEXT NOT NULL,
    split TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    checkpoint_step INTEGER NOT NULL DEFAULT 0,
    lr REAL NOT NULL DEFAULT 0,
    seed INTEGER NOT NULL DEFAULT 0,
    UNIQUE (run_id, task, split, metric)
);
CREATE TABLE checkpoints (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL DEFAULT 0,
    hash TEXT NOT NULL DEFAULT '',
    UNIQUE (run_id, step)
);
CREATE TABLE artifacts (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL DEFAULT 0,
    hash TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    UNIQUE (run_id, path)
);
)sql",
        // Version 2: per-example dev predictions of each fine-tuning run (the epoch its
        // scores come from), so intervals and paired tests can be computed after the fact.
        R"sql(
CREATE TABLE predictions (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    split TEXT NOT NULL,
    example INTEGER NOT NULL,
    gold REAL,
    prediction REAL,
    PRIMARY KEY (run_id, split, example)
) WITHOUT ROWID;
)sql",
        // Version 3: job claims, so that several runners share one plan: who runs a job
        // (host, pid), since when, its last heartbeat (seconds since the epoch, compared as a
        // number), when it was released ('' while held) and how many times it was attempted.
        R"sql(
CREATE TABLE job_claims (
    experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
    job TEXT NOT NULL,
    host TEXT NOT NULL DEFAULT '',
    pid INTEGER NOT NULL DEFAULT 0,
    claimed_at TEXT NOT NULL DEFAULT '',
    heartbeat_time REAL NOT NULL DEFAULT 0,
    released_at TEXT NOT NULL DEFAULT '',
    attempts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (experiment_id, job)
) WITHOUT ROWID;
CREATE INDEX job_claims_owner ON job_claims(host, pid);
)sql",
        // Version 4: the example's own index as its file gives it (the `index` / `id` column
        // of a GLUE test split, which the server matches predictions on); '' for the rows
        // stored before (dev predictions, numbered by their row).
        R"sql(
ALTER TABLE predictions ADD COLUMN example_id TEXT NOT NULL DEFAULT '';
)sql",
        // Version 5: a run's identity (what determines its result), its fingerprint and the
        // fingerprint of what a report may pool (experiments/job_identity.h), so a rerun with
        // another config is never taken for the stored run; '' for runs stored before. The
        // same step rewrites every stored path relative to the store's folder
        // (relocate_paths_v5 in the migration below).
        R"sql(
ALTER TABLE runs ADD COLUMN identity TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN cell TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_fingerprint ON runs(experiment_id, fingerprint);
)sql",
        // Version 6: the cluster jobs gathered into this store (`tupe gather`): a job ran with
        // a store of its own, and each of its finished attempts (token: the attempt's Slurm
        // job id and the SHA-256 of its store) is ingested once, in the transaction that
        // writes its run.
        R"sql(
CREATE TABLE gathered_jobs (
    experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
    job TEXT NOT NULL,
    token TEXT NOT NULL,
    gathered_at TEXT NOT NULL,
    PRIMARY KEY (experiment_id, job, token)
) WITHOUT ROWID;
)sql",
        // Version 7: what determined each recorded file (ArtifactRecord::identity: the
        // analysis, extrapolation, ablation or head-scan settings and input hashes), so a
        // changed setting is never taken for the recorded output; '' for files stored before.
        R"sql(
ALTER TABLE artifacts ADD COLUMN identity TEXT NOT NULL DEFAULT '';
)sql",
        // Version 8: the BLAS and the kernels each run multiplied with (RunRecord::blas):
        // another kernel set rounds differently; '' for runs stored before.
        R"sql(
ALTER TABLE runs ADD COLUMN blas TEXT NOT NULL DEFAULT '';
)sql",
    };
    return steps;
}

namespace {
std::function<void(const std::string&)>& wait_notice_slot() {
    static std::function<void(const std::string&)> notice;
    return notice;
}
}  // namespace

void set_default_wait_notice(std::function<void(const std::string&)> notice) {
    wait_notice_slot() = std::move(notice);
}

const std::function<void(const std::string&)>& default_wait_notice() { return wait_notice_slot(); }

std::string utc_now_iso8601() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
    const auto millis =
        std::chrono::duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &utc);
    char out[48];
    std::snprintf(out, sizeof out, "%s.%03dZ", date, static_cast<int>(millis));
    return out;
}

double unix_time_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

ClaimOwner ClaimOwner::self() {
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    return {name, static_cast<std::int64_t>(getpid())};
}

std::string ClaimOwner::text() const { return host + ":" + std::to_string(pid); }

std::optional<ClaimOwner> ClaimOwner::parse(const std::string& text) {
    // Host names hold no ':', so the last one separates the pid.
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return std::nullopt;
    std::int64_t pid = 0;
    for (std::size_t i = colon + 1; i < text.size(); ++i) {
        if (text[i] < '0' || text[i] > '9' || pid > 1'000'000'000'000LL) return std::nullopt;
        pid = pid * 10 + (text[i] - '0');
    }
    if (pid <= 0) return std::nullopt;
    return ClaimOwner{text.substr(0, colon), pid};
}

ClaimHealth claim_health(const JobClaim& claim, double stale_after_seconds, double now) {
    if (claim.owner.host == ClaimOwner::self().host) {
        // kill(pid, 0) checks existence without signalling; EPERM means it exists (another
        // user's). pid <= 0 would address process groups: such an owner never existed.
        const bool exists = claim.owner.pid > 0 &&
                            (::kill(static_cast<pid_t>(claim.owner.pid), 0) == 0 || errno == EPERM);
        if (!exists) return ClaimHealth::kOwnerGone;
    }
    if (now - claim.heartbeat_time > stale_after_seconds) return ClaimHealth::kHeartbeatStale;
    return ClaimHealth::kLive;
}

ResultStore::ResultStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultStore::ResultStore(ResultStore&&) noexcept = default;
ResultStore& ResultStore::operator=(ResultStore&&) noexcept = default;
ResultStore::~ResultStore() = default;

namespace {

// file:PATH?immutable=1 with PATH percent-encoded (RFC 3986 unreserved characters and '/'
// stay), as SQLite's URI filenames need.
std::string immutable_uri(const std::string& absolute_path) {
    static const char* hex = "0123456789ABCDEF";
    std::string uri = "file:";
    for (const unsigned char c : absolute_path) {
        if (std::isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
            uri += static_cast<char>(c);
        } else {
            uri += '%';
            uri += hex[c >> 4];
            uri += hex[c & 15];
        }
    }
    return uri + "?immutable=1";
}

}  // namespace

bool ResultStore::holds_data(const std::string& path) {
    std::error_code error;
    const auto size = fs::file_size(path, error);
    return !error && size > 0;
}

std::string canonical_path(const std::string& path) {
    if (path.empty()) return path;
    std::error_code error;
    fs::path p = fs::absolute(fs::path(path), error);
    if (error) p = fs::path(path);
    const fs::path resolved = fs::weakly_canonical(p, error);
    return (error ? p : resolved).lexically_normal().generic_string();
}

ResultStore ResultStore::open_for_reading(const std::string& path, const StoreOptions& options) {
    try {
        return open(path, OpenMode::kReadOnly, options);
    } catch (const StoreError& e) {
        // Only an older schema is mended; everything else (missing, newer, not SQLite) stands.
        if (e.message().find("is older than this build") == std::string::npos) throw;
    }
    // Migrates, then closes; a reader's working directory is no evidence of where the files
    // of a schema-4 store are (relocate_paths_v5).
    open_impl(path, OpenMode::kReadWrite, options, /*paths_from_working_directory=*/false);
    return open(path, OpenMode::kReadOnly, options);
}

ResultStore ResultStore::open(const std::string& path, OpenMode mode, const StoreOptions& options) {
    return open_impl(path, mode, options, /*paths_from_working_directory=*/true);
}

ResultStore ResultStore::open_impl(const std::string& path, OpenMode mode,
                                   const StoreOptions& options, bool paths_from_working_directory) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->paths_from_working_directory = paths_from_working_directory;
    // Canonical, so a store named through a symlink (or a symlinked parent) stores every path
    // relative to the same real folder as the same store named directly.
    impl->directory = fs::path(canonical_path(path)).parent_path().generic_string();
    impl->mode = mode;
    impl->options = options;
    int flags = SQLITE_OPEN_READONLY;
    std::error_code error;
    if (mode == OpenMode::kReadOnly) {
        if (!fs::exists(path, error))
            throw StoreError(path, "no such database file (opened read-only)");
    } else {
        const fs::path parent = fs::path(path).parent_path();
        if (!parent.empty() && !fs::create_directories(parent, error) && error)
            throw StoreError(path,
                             "cannot create directory " + parent.string() + ": " + error.message());
        flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    }
    // A WAL store in a folder this process cannot write (a read-only copy, another user's
    // results): SQLite cannot create the -shm index that readers go through, and would refuse
    // to read. With no -wal file beside it nobody is writing (a writer needs both files), so
    // the file is read as immutable, without that index.
    std::string name = path;
    const fs::path wal = path + "-wal", shm = path + "-shm", absolute = fs::absolute(path, error);
    if (mode == OpenMode::kReadOnly && !error &&
        ::access(absolute.parent_path().c_str(), W_OK) != 0 && !fs::exists(wal, error) &&
        !fs::exists(shm, error)) {
        name = immutable_uri(absolute.string());
        flags |= SQLITE_OPEN_URI;
    }
    const int rc = sqlite3_open_v2(name.c_str(), &impl->db, flags, nullptr);
    if (rc != SQLITE_OK) impl->fail(rc, "open the database");
    sqlite3_extended_result_codes(impl->db, 1);
    // SQLITE_OPEN_READWRITE silently falls back to read-only for a write-protected file.
    if (mode == OpenMode::kReadWrite && sqlite3_db_readonly(impl->db, "main") == 1)
        throw StoreError(path, "database file is read-only (check its permissions)");
    impl->with_retry([&] { impl->initialize(); });
    return ResultStore(std::move(impl));
}

int ResultStore::latest_schema_version() { return static_cast<int>(schema_migrations().size()); }

int ResultStore::schema_version() {
    return impl_->with_retry([&] { return impl_->user_version(); });
}

const std::string& ResultStore::path() const { return impl_->path; }

const std::string& ResultStore::directory() const { return impl_->directory; }

OpenMode ResultStore::mode() const { return impl_->mode; }

}  // namespace experiments
