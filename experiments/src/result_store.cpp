// The SQLite results store over the sqlite3 C API: a connection with a statement cache, RAII
// statement and transaction wrappers, a bounded retry loop for SQLITE_BUSY / SQLITE_LOCKED,
// and the versioned schema with its forward migrations (see result_store.h). WAL mode lets
// the desktop app read while a runner writes; each write is one BEGIN IMMEDIATE transaction.
#include "experiments/result_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace experiments {

namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// Thrown inside an operation when SQLite reports BUSY or LOCKED; with_retry() catches it,
// and it never leaves the store.
struct Busy {};

const std::vector<std::string> kRunKinds = {"pretrain", "finetune"};
const std::vector<std::string> kRunStatuses = {"pending", "running", "finished", "failed",
                                               "stopped"};

std::string one_line(std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    std::replace(text.begin(), text.end(), '\r', ' ');
    return text;
}

std::string join(const std::vector<std::string>& words, const char* separator) {
    std::string out;
    for (const auto& word : words) out += (out.empty() ? "" : separator) + word;
    return out;
}

bool contains(const std::vector<std::string>& words, const std::string& word) {
    return std::find(words.begin(), words.end(), word) != words.end();
}

// One SQLite connection, its statement cache, and the error mapping every call goes through.
struct Connection {
    std::string path;
    OpenMode mode = OpenMode::kReadWrite;
    StoreOptions options;
    sqlite3* db = nullptr;
    std::unordered_map<std::string, sqlite3_stmt*> cache;

    Connection() = default;
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    ~Connection() {
        for (auto& entry : cache) sqlite3_finalize(entry.second);
        sqlite3_close_v2(db);  // A nullptr is a no-op.
    }

    // Turns a failed result code into Busy (to be retried) or a StoreError naming the path.
    [[noreturn]] void fail(int rc, const std::string& what) const {
        const std::string detail = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        switch (rc & 0xff) {
            case SQLITE_BUSY:
            case SQLITE_LOCKED: throw Busy{};
            case SQLITE_NOTADB: throw StoreError(path, "file is not a SQLite database");
            case SQLITE_CORRUPT:
                throw StoreError(path, "database file is corrupt (" + what + ": " + detail + ")");
            case SQLITE_READONLY:
                throw StoreError(path, "cannot " + what +
                                           ": database is read-only (check the permissions of "
                                           "the file and its directory)");
            case SQLITE_FULL: throw StoreError(path, "cannot " + what + ": disk is full");
            case SQLITE_CANTOPEN:
                throw StoreError(path, "cannot open the database file (" + detail + ")");
            default: throw StoreError(path, "cannot " + what + ": " + detail);
        }
    }

    void exec(const std::string& sql, const std::string& what) {
        const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK) fail(rc, what);
    }

    // Prepared once per connection and kept (SQLITE_PREPARE_PERSISTENT).
    sqlite3_stmt* prepare(const std::string& sql) {
        const auto found = cache.find(sql);
        if (found != cache.end()) return found->second;
        sqlite3_stmt* stmt = nullptr;
        const int rc =
            sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
        if (rc != SQLITE_OK) fail(rc, "prepare \"" + sql.substr(0, 40) + "...\"");
        cache.emplace(sql, stmt);
        return stmt;
    }

    // Runs `operation` again, with backoff, while it reports Busy, for up to
    // options.lock_timeout. SQLite's own busy handler waits inside each attempt (at most the
    // time left, 1 s at a time); the loop also covers the cases where SQLite returns BUSY
    // without calling it (WAL recovery, a lock needed to switch the journal mode).
    template <class Operation>
    auto with_retry(Operation&& operation) -> decltype(operation()) {
        using Clock = std::chrono::steady_clock;
        const auto start = Clock::now();
        milliseconds backoff(2);
        for (;;) {
            const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
            const auto left = std::max(milliseconds(0), options.lock_timeout - elapsed);
            sqlite3_busy_timeout(db, static_cast<int>(std::min(left, milliseconds(1000)).count()));
            try {
                return operation();
            } catch (const Busy&) {
            }
            if (Clock::now() - start >= options.lock_timeout)
                throw StoreError(path, "database is locked by another process");
            std::this_thread::sleep_for(std::min(backoff, left));
            backoff = std::min(backoff * 2, milliseconds(250));
        }
    }

    template <class Operation>
    auto write(const std::string& what, Operation&& operation) -> decltype(operation());

    int user_version();
};

// A cached statement in use: binds by 1-based index, steps, and resets when it goes out of
// scope so that a finished SELECT never holds a read snapshot open.
class Query {
  public:
    Query(Connection& connection, const std::string& sql)
        : connection_(connection), stmt_(connection.prepare(sql)), sql_(sql) {}
    Query(const Query&) = delete;
    Query& operator=(const Query&) = delete;
    ~Query() { reset(); }

    Query& bind(int index, std::int64_t value) {
        return checked(sqlite3_bind_int64(stmt_, index, value));
    }
    Query& bind(int index, const std::string& value) {
        return checked(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                                         SQLITE_TRANSIENT));
    }
    Query& bind(int index, const std::optional<std::int64_t>& value) {
        return value ? bind(index, *value) : checked(sqlite3_bind_null(stmt_, index));
    }
    // SQLite turns NaN into NULL; real() turns it back.
    Query& bind_real(int index, double value) {
        return checked(std::isnan(value) ? sqlite3_bind_null(stmt_, index)
                                         : sqlite3_bind_double(stmt_, index, value));
    }

    // True while there is a row to read.
    bool step(const std::string& what) {
        const int rc = sqlite3_step(stmt_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        connection_.fail(rc, what);
    }
    void run(const std::string& what) {
        while (step(what)) {
        }
    }
    void reset() {
        sqlite3_reset(stmt_);
        sqlite3_clear_bindings(stmt_);
    }

    std::int64_t integer(int column) const { return sqlite3_column_int64(stmt_, column); }
    double real(int column) const {
        return sqlite3_column_type(stmt_, column) == SQLITE_NULL
                   ? std::numeric_limits<double>::quiet_NaN()
                   : sqlite3_column_double(stmt_, column);
    }
    std::string text(int column) const {
        const auto* data = sqlite3_column_text(stmt_, column);
        return data ? std::string(reinterpret_cast<const char*>(data),
                                  static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)))
                    : std::string();
    }
    bool is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

  private:
    Query& checked(int rc) {
        if (rc != SQLITE_OK) connection_.fail(rc, "bind a parameter of \"" + sql_ + "\"");
        return *this;
    }

    Connection& connection_;
    sqlite3_stmt* stmt_;
    std::string sql_;
};

// BEGIN IMMEDIATE takes the write lock up front, so a write never has to upgrade a read
// snapshot (which in WAL mode fails with SQLITE_BUSY_SNAPSHOT). Rolls back unless committed.
class Transaction {
  public:
    explicit Transaction(Connection& connection) : connection_(connection) {
        connection_.exec("BEGIN IMMEDIATE", "begin a transaction");
    }
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    ~Transaction() {
        if (!committed_) sqlite3_exec(connection_.db, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    void commit() {
        connection_.exec("COMMIT", "commit a transaction");
        committed_ = true;
    }

  private:
    Connection& connection_;
    bool committed_ = false;
};

template <class Operation>
auto Connection::write(const std::string& what, Operation&& operation) -> decltype(operation()) {
    if (mode == OpenMode::kReadOnly)
        throw StoreError(path, "cannot " + what + ": the store is opened read-only");
    return with_retry([&]() -> decltype(operation()) {
        Transaction transaction(*this);
        if constexpr (std::is_void_v<decltype(operation())>) {
            operation();
            transaction.commit();
        } else {
            auto result = operation();
            transaction.commit();
            return result;
        }
    });
}

int Connection::user_version() {
    Query query(*this, "PRAGMA user_version");
    query.step("read the schema version");
    return static_cast<int>(query.integer(0));
}

const char* const kRunColumns =
    "id, experiment_id, kind, name, variant, parent_run_id, config_text, seed, status, "
    "start_time, end_time, host, torch_version, git_commit, error_message, out_dir, step";

RunRecord read_run(const Query& q) {
    RunRecord run;
    run.id = q.integer(0);
    run.experiment_id = q.integer(1);
    run.kind = q.text(2);
    run.name = q.text(3);
    run.variant = q.text(4);
    if (!q.is_null(5)) run.parent_run_id = q.integer(5);
    run.config_text = q.text(6);
    run.seed = q.integer(7);
    run.status = q.text(8);
    run.start_time = q.text(9);
    run.end_time = q.text(10);
    run.host = q.text(11);
    run.torch_version = q.text(12);
    run.git_commit = q.text(13);
    run.error_message = q.text(14);
    run.out_dir = q.text(15);
    run.step = q.integer(16);
    return run;
}

ExperimentRecord read_experiment(const Query& q) {
    return {q.integer(0), q.text(1), q.text(2), q.text(3), q.text(4)};
}

}  // namespace

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
    };
    return steps;
}

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

struct ResultStore::Impl : Connection {
    // Checks the file, sets the connection's pragmas and migrates. Nothing is written before
    // the file is known to be SQLite with a schema version this build can handle. Runs inside
    // with_retry, so it must be safe to repeat.
    void initialize() {
        const int latest = latest_schema_version();
        // The first read of the file: one that is not SQLite fails here with SQLITE_NOTADB.
        const int version = checked_version(latest);
        exec("PRAGMA foreign_keys = ON", "enable foreign keys");
        if (mode == OpenMode::kReadOnly) {
            if (version < latest)
                throw StoreError(path, "schema version " + std::to_string(version) +
                                           " is older than this build (" + std::to_string(latest) +
                                           "); open it read-write once to migrate it");
            return;
        }
        // WAL is a property of the file and persists; switching needs a lock, so only when
        // needed. A file system without shared memory keeps its mode, and the store still works.
        std::string journal;
        {
            Query query(*this, "PRAGMA journal_mode");
            if (query.step("read the journal mode")) journal = query.text(0);
        }
        if (journal != "wal") {
            Query query(*this, "PRAGMA journal_mode = WAL");
            query.run("switch to WAL mode");
        }
        exec("PRAGMA synchronous = NORMAL", "set synchronous = NORMAL");
        if (version < latest) migrate(latest);
    }

    // The file's schema version, after refusing a newer one and another program's database
    // (version 0 with tables: never write into it). One statement, so one snapshot: a process
    // that migrates the file meanwhile cannot make a new store look like a foreign one.
    int checked_version(int latest) {
        Query query(*this,
                    "SELECT (SELECT user_version FROM pragma_user_version), "
                    "(SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%')");
        query.step("read the schema version");
        const int version = static_cast<int>(query.integer(0));
        if (version > latest)
            throw StoreError(path, "schema version " + std::to_string(version) +
                                       " is newer than this build supports (" +
                                       std::to_string(latest) + "); update TUPE Workbench");
        if (version == 0 && query.integer(1) > 0)
            throw StoreError(path,
                             "not a TUPE results store: the database has tables but no schema "
                             "version");
        return version;
    }

    // All steps and the new user_version in one transaction: a failed step leaves the file
    // at its old version, untouched.
    void migrate(int latest) {
        Transaction transaction(*this);
        const int version = checked_version(latest);  // Another process may have migrated.
        const auto& steps = schema_migrations();
        for (int v = version; v < latest; ++v)
            exec(steps[static_cast<std::size_t>(v)], "migrate the schema from version " +
                                                         std::to_string(v) + " to " +
                                                         std::to_string(v + 1));
        exec("PRAGMA user_version = " + std::to_string(latest), "set the schema version");
        transaction.commit();
    }

    // After an UPDATE of one run by id: no changed row means no such run.
    void require_run_exists(std::int64_t run_id) {
        if (sqlite3_changes(db) == 0)
            throw StoreError(path, "no run with id " + std::to_string(run_id));
    }
};

ResultStore::ResultStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultStore::ResultStore(ResultStore&&) noexcept = default;
ResultStore& ResultStore::operator=(ResultStore&&) noexcept = default;
ResultStore::~ResultStore() = default;

ResultStore ResultStore::open(const std::string& path, OpenMode mode, const StoreOptions& options) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
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
    const int rc = sqlite3_open_v2(path.c_str(), &impl->db, flags, nullptr);
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

OpenMode ResultStore::mode() const { return impl_->mode; }

std::int64_t ResultStore::get_or_create_experiment(const std::string& name,
                                                   const std::string& yaml_path,
                                                   const std::string& yaml_text) {
    if (name.empty()) throw StoreError(impl_->path, "an experiment needs a name");
    return impl_->write("store experiment '" + name + "'", [&] {
        Query insert(*impl_,
                     "INSERT INTO experiments (name, yaml_path, yaml_text, created_at) "
                     "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name) DO NOTHING");
        insert.bind(1, name).bind(2, yaml_path).bind(3, yaml_text).bind(4, utc_now_iso8601());
        insert.run("store experiment '" + name + "'");
        Query select(*impl_, "SELECT id FROM experiments WHERE name = ?1");
        select.bind(1, name).step("find experiment '" + name + "'");
        return select.integer(0);
    });
}

std::int64_t ResultStore::upsert_run(const RunRecord& run) {
    const std::string what = "store run '" + run.name + "'";
    if (run.name.empty()) throw StoreError(impl_->path, "a run needs a name");
    if (!contains(kRunKinds, run.kind))
        throw StoreError(impl_->path, "unknown run kind '" + run.kind + "' (expected " +
                                          join(kRunKinds, " or ") + ")");
    if (!contains(kRunStatuses, run.status))
        throw StoreError(impl_->path, "unknown run status '" + run.status + "' (expected one of " +
                                          join(kRunStatuses, ", ") + ")");
    return impl_->write(what, [&] {
        Query upsert(
            *impl_,
            "INSERT INTO runs (experiment_id, kind, name, variant, parent_run_id, config_text, "
            "seed, status, start_time, end_time, host, torch_version, git_commit, error_message, "
            "out_dir, step) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
            "?15, ?16) ON CONFLICT (experiment_id, name) DO UPDATE SET kind = excluded.kind, "
            "variant = excluded.variant, parent_run_id = excluded.parent_run_id, "
            "config_text = excluded.config_text, seed = excluded.seed, status = excluded.status, "
            "start_time = excluded.start_time, end_time = excluded.end_time, "
            "host = excluded.host, torch_version = excluded.torch_version, "
            "git_commit = excluded.git_commit, error_message = excluded.error_message, "
            "out_dir = excluded.out_dir, step = excluded.step");
        upsert.bind(1, run.experiment_id).bind(2, run.kind).bind(3, run.name).bind(4, run.variant);
        upsert.bind(5, run.parent_run_id).bind(6, run.config_text).bind(7, run.seed);
        upsert.bind(8, run.status).bind(9, run.start_time).bind(10, run.end_time);
        upsert.bind(11, run.host).bind(12, run.torch_version).bind(13, run.git_commit);
        upsert.bind(14, run.error_message).bind(15, run.out_dir).bind(16, run.step);
        upsert.run(what);
        Query select(*impl_, "SELECT id FROM runs WHERE experiment_id = ?1 AND name = ?2");
        select.bind(1, run.experiment_id).bind(2, run.name).step(what);
        return select.integer(0);
    });
}

void ResultStore::set_run_status(std::int64_t run_id, const std::string& status,
                                 const std::string& error) {
    if (!contains(kRunStatuses, status))
        throw StoreError(impl_->path, "unknown run status '" + status + "' (expected one of " +
                                          join(kRunStatuses, ", ") + ")");
    impl_->write("set the status of run " + std::to_string(run_id), [&] {
        Query update(*impl_,
                     "UPDATE runs SET status = ?2, error_message = ?3, "
                     "start_time = CASE WHEN ?2 = 'running' AND start_time = '' THEN ?4 "
                     "ELSE start_time END, "
                     "end_time = CASE WHEN ?2 = 'running' THEN '' "
                     "WHEN ?2 IN ('finished', 'failed', 'stopped') THEN ?4 ELSE end_time END "
                     "WHERE id = ?1");
        update.bind(1, run_id).bind(2, status).bind(3, error).bind(4, utc_now_iso8601());
        update.run("set the status of run " + std::to_string(run_id));
        impl_->require_run_exists(run_id);
    });
}

void ResultStore::set_run_step(std::int64_t run_id, std::int64_t step) {
    impl_->write("set the step of run " + std::to_string(run_id), [&] {
        Query update(*impl_, "UPDATE runs SET step = ?2 WHERE id = ?1");
        update.bind(1, run_id).bind(2, step).run("set the step of run " + std::to_string(run_id));
        impl_->require_run_exists(run_id);
    });
}

void ResultStore::add_params(std::int64_t run_id,
                             const std::map<std::string, std::string>& params) {
    if (params.empty()) return;
    const std::string what = "add params to run " + std::to_string(run_id);
    impl_->write(what, [&] {
        Query insert(*impl_,
                     "INSERT INTO params (run_id, key, value) VALUES (?1, ?2, ?3) "
                     "ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value");
        for (const auto& [key, value] : params) {
            insert.bind(1, run_id).bind(2, key).bind(3, value).run(what);
            insert.reset();
        }
    });
}

void ResultStore::add_metrics(std::int64_t run_id, const std::vector<MetricPoint>& points) {
    if (points.empty()) return;
    const std::string what = "add metrics to run " + std::to_string(run_id);
    impl_->write(what, [&] {
        Query insert(*impl_,
                     "INSERT INTO metrics (run_id, key, step, value, wall_time) "
                     "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (run_id, key, step) "
                     "DO UPDATE SET value = excluded.value, wall_time = excluded.wall_time");
        for (const auto& point : points) {
            insert.bind(1, run_id).bind(2, point.key).bind(3, point.step);
            insert.bind_real(4, point.value).bind_real(5, point.wall_time).run(what);
            insert.reset();
        }
    });
}

std::int64_t ResultStore::delete_metrics_after(std::int64_t run_id, std::int64_t step) {
    const std::string what = "delete metrics of run " + std::to_string(run_id);
    return impl_->write(what, [&] {
        Query erase(*impl_, "DELETE FROM metrics WHERE run_id = ?1 AND step > ?2");
        erase.bind(1, run_id).bind(2, step).run(what);
        return static_cast<std::int64_t>(sqlite3_changes(impl_->db));
    });
}

void ResultStore::add_glue_result(const GlueResultRecord& result) {
    const std::string what = "add GLUE result " + result.task + "/" + result.split + "/" +
                             result.metric + " to run " + std::to_string(result.run_id);
    impl_->write(what, [&] {
        Query insert(*impl_,
                     "INSERT INTO glue_results (run_id, task, split, metric, value, "
                     "checkpoint_step, lr, seed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                     "ON CONFLICT (run_id, task, split, metric) DO UPDATE SET "
                     "value = excluded.value, checkpoint_step = excluded.checkpoint_step, "
                     "lr = excluded.lr, seed = excluded.seed");
        insert.bind(1, result.run_id).bind(2, result.task).bind(3, result.split);
        insert.bind(4, result.metric).bind_real(5, result.value).bind(6, result.checkpoint_step);
        insert.bind_real(7, result.lr).bind(8, result.seed).run(what);
    });
}

void ResultStore::add_checkpoint(const CheckpointRecord& checkpoint) {
    const std::string what = "add checkpoint " + std::to_string(checkpoint.step) + " to run " +
                             std::to_string(checkpoint.run_id);
    impl_->write(what, [&] {
        Query insert(*impl_,
                     "INSERT INTO checkpoints (run_id, step, path, size, hash) "
                     "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (run_id, step) DO UPDATE SET "
                     "path = excluded.path, size = excluded.size, hash = excluded.hash");
        insert.bind(1, checkpoint.run_id).bind(2, checkpoint.step).bind(3, checkpoint.path);
        insert.bind(4, checkpoint.size).bind(5, checkpoint.hash).run(what);
    });
}

void ResultStore::add_artifact(const ArtifactRecord& artifact) {
    const std::string what =
        "add artifact " + artifact.path + " to run " + std::to_string(artifact.run_id);
    impl_->write(what, [&] {
        Query insert(*impl_,
                     "INSERT INTO artifacts (run_id, kind, path, size, hash, description) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (run_id, path) DO UPDATE SET "
                     "kind = excluded.kind, size = excluded.size, hash = excluded.hash, "
                     "description = excluded.description");
        insert.bind(1, artifact.run_id).bind(2, artifact.kind).bind(3, artifact.path);
        insert.bind(4, artifact.size).bind(5, artifact.hash).bind(6, artifact.description);
        insert.run(what);
    });
}

std::vector<ExperimentRecord> ResultStore::list_experiments() {
    return impl_->with_retry([&] {
        std::vector<ExperimentRecord> out;
        Query q(*impl_,
                "SELECT id, name, yaml_path, yaml_text, created_at FROM experiments ORDER BY id");
        while (q.step("list experiments")) out.push_back(read_experiment(q));
        return out;
    });
}

std::optional<ExperimentRecord> ResultStore::find_experiment(const std::string& name) {
    return impl_->with_retry([&]() -> std::optional<ExperimentRecord> {
        Query q(*impl_,
                "SELECT id, name, yaml_path, yaml_text, created_at FROM experiments "
                "WHERE name = ?1");
        if (!q.bind(1, name).step("find experiment '" + name + "'")) return std::nullopt;
        return read_experiment(q);
    });
}

std::vector<RunRecord> ResultStore::list_runs(std::int64_t experiment_id) {
    return impl_->with_retry([&] {
        std::vector<RunRecord> out;
        Query q(*impl_, std::string("SELECT ") + kRunColumns +
                            " FROM runs WHERE experiment_id = ?1 ORDER BY id");
        q.bind(1, experiment_id);
        while (q.step("list runs")) out.push_back(read_run(q));
        return out;
    });
}

std::optional<RunRecord> ResultStore::find_run(std::int64_t experiment_id,
                                               const std::string& name) {
    return impl_->with_retry([&]() -> std::optional<RunRecord> {
        Query q(*impl_, std::string("SELECT ") + kRunColumns +
                            " FROM runs WHERE experiment_id = ?1 AND name = ?2");
        if (!q.bind(1, experiment_id).bind(2, name).step("find run '" + name + "'"))
            return std::nullopt;
        return read_run(q);
    });
}

std::optional<RunRecord> ResultStore::get_run(std::int64_t run_id) {
    return impl_->with_retry([&]() -> std::optional<RunRecord> {
        Query q(*impl_, std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?1");
        if (!q.bind(1, run_id).step("read run " + std::to_string(run_id))) return std::nullopt;
        return read_run(q);
    });
}

std::map<std::string, std::string> ResultStore::params(std::int64_t run_id) {
    return impl_->with_retry([&] {
        std::map<std::string, std::string> out;
        Query q(*impl_, "SELECT key, value FROM params WHERE run_id = ?1");
        q.bind(1, run_id);
        while (q.step("read params")) out[q.text(0)] = q.text(1);
        return out;
    });
}

std::vector<MetricPoint> ResultStore::metrics(std::int64_t run_id, const std::string& key,
                                              std::int64_t after_step) {
    return impl_->with_retry([&] {
        std::vector<MetricPoint> out;
        Query q(*impl_,
                "SELECT step, value, wall_time FROM metrics "
                "WHERE run_id = ?1 AND key = ?2 AND step > ?3 ORDER BY step");
        q.bind(1, run_id).bind(2, key).bind(3, after_step);
        while (q.step("read metric " + key))
            out.push_back({key, q.integer(0), q.real(1), q.real(2)});
        return out;
    });
}

std::vector<std::string> ResultStore::metric_keys(std::int64_t run_id) {
    return impl_->with_retry([&] {
        std::vector<std::string> out;
        Query q(*impl_, "SELECT DISTINCT key FROM metrics WHERE run_id = ?1 ORDER BY key");
        q.bind(1, run_id);
        while (q.step("list metric keys")) out.push_back(q.text(0));
        return out;
    });
}

std::vector<GlueResultRecord> ResultStore::glue_results(std::int64_t experiment_id) {
    return impl_->with_retry([&] {
        std::vector<GlueResultRecord> out;
        Query q(*impl_,
                "SELECT g.id, g.run_id, g.task, g.split, g.metric, g.value, g.checkpoint_step, "
                "g.lr, g.seed, r.name, "
                "CASE WHEN r.variant <> '' THEN r.variant ELSE COALESCE(p.variant, '') END "
                "FROM glue_results g JOIN runs r ON r.id = g.run_id "
                "LEFT JOIN runs p ON p.id = r.parent_run_id "
                "WHERE r.experiment_id = ?1 ORDER BY r.id, g.task, g.split, g.metric");
        q.bind(1, experiment_id);
        while (q.step("read GLUE results")) {
            out.push_back({q.integer(0), q.integer(1), q.text(2), q.text(3), q.text(4), q.real(5),
                           q.integer(6), q.real(7), q.integer(8), q.text(9), q.text(10)});
        }
        return out;
    });
}

std::vector<CheckpointRecord> ResultStore::checkpoints(std::int64_t run_id) {
    return impl_->with_retry([&] {
        std::vector<CheckpointRecord> out;
        Query q(*impl_,
                "SELECT id, run_id, step, path, size, hash FROM checkpoints WHERE run_id = ?1 "
                "ORDER BY step");
        q.bind(1, run_id);
        while (q.step("read checkpoints")) {
            out.push_back(
                {q.integer(0), q.integer(1), q.integer(2), q.text(3), q.integer(4), q.text(5)});
        }
        return out;
    });
}

std::vector<ArtifactRecord> ResultStore::artifacts(std::int64_t run_id) {
    return impl_->with_retry([&] {
        std::vector<ArtifactRecord> out;
        Query q(*impl_,
                "SELECT id, run_id, kind, path, size, hash, description FROM artifacts "
                "WHERE run_id = ?1 ORDER BY id");
        q.bind(1, run_id);
        while (q.step("read artifacts")) {
            out.push_back({q.integer(0), q.integer(1), q.text(2), q.text(3), q.integer(4),
                           q.text(5), q.text(6)});
        }
        return out;
    });
}

}  // namespace experiments
