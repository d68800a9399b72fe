// Private to the results store (experiments/src/result_store*.cpp): one SQLite connection
// with a statement cache and the error mapping, RAII statement and transaction wrappers, the
// bounded retry loop for SQLITE_BUSY / SQLITE_LOCKED, row readers, and ResultStore::Impl
// (schema checks and migrations on open). Nothing here is part of result_store.h.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "experiments/analysis_artifacts.h"
#include "experiments/result_store.h"

namespace experiments {

namespace store_detail {

using std::chrono::milliseconds;

// Thrown inside an operation when SQLite reports BUSY or LOCKED; with_retry() catches it,
// and it never leaves the store.
struct Busy {};

inline const std::vector<std::string> kRunKinds = {"pretrain", "finetune"};
inline const std::vector<std::string> kRunStatuses = {"pending", "running", "finished",
                                                      "failed",  "stopped", "blocked"};

// A run row inserted, or every column updated for the same (experiment_id, name): ?1-?20 in
// RunRecord's order, blas last (upsert_run, ingest_run).
inline constexpr const char* kUpsertRunSql =
    "INSERT INTO runs (experiment_id, kind, name, variant, parent_run_id, config_text, "
    "seed, status, start_time, end_time, host, torch_version, git_commit, error_message, "
    "out_dir, step, identity, fingerprint, cell, blas) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
    "?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20) "
    "ON CONFLICT (experiment_id, name) DO UPDATE SET kind = excluded.kind, "
    "variant = excluded.variant, parent_run_id = excluded.parent_run_id, "
    "config_text = excluded.config_text, seed = excluded.seed, status = excluded.status, "
    "start_time = excluded.start_time, end_time = excluded.end_time, "
    "host = excluded.host, torch_version = excluded.torch_version, "
    "git_commit = excluded.git_commit, error_message = excluded.error_message, "
    "out_dir = excluded.out_dir, step = excluded.step, identity = excluded.identity, "
    "fingerprint = excluded.fingerprint, cell = excluded.cell, blas = excluded.blas";

inline std::string one_line(std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    std::replace(text.begin(), text.end(), '\r', ' ');
    return text;
}

inline std::string join(const std::vector<std::string>& words, const char* separator) {
    std::string out;
    for (const auto& word : words) out += (out.empty() ? "" : separator) + word;
    return out;
}

inline bool contains(const std::vector<std::string>& words, const std::string& word) {
    return std::find(words.begin(), words.end(), word) != words.end();
}

// One SQLite connection, its statement cache, and the error mapping every call goes through.
struct Connection {
    std::string path;
    std::string directory;  // canonical folder of the file: stored paths are relative to it
    // A schema-4 migration may look for relative paths under the working directory (a writer
    // of the study, not a reader: relocate_paths_v5).
    bool paths_from_working_directory = true;
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
            case SQLITE_IOERR: {
                // A write past a file-size limit (EFBIG) or on a full disk (ENOSPC) can arrive
                // as an I/O error; errno tells which when SQLite kept it.
                const int os = db ? sqlite3_system_errno(db) : 0;
                if (os == ENOSPC || os == EFBIG)
                    throw StoreError(
                        path, "cannot " + what + ": disk is full (" + std::strerror(os) + ")");
                if (rc == SQLITE_IOERR_WRITE)
                    throw StoreError(
                        path, "cannot " + what + ": writing the file failed (is the disk full?)");
                throw StoreError(path, "cannot " + what + ": " + detail);
            }
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
        bool noticed = false;
        for (;;) {
            const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
            const auto left = std::max(milliseconds(0), options.lock_timeout - elapsed);
            // SQLite waits inside one attempt for at most a second, or until the notice is due.
            milliseconds slice = std::min(left, milliseconds(1000));
            if (!noticed && options.on_wait)
                slice = std::min(slice,
                                 std::max(milliseconds(10), options.wait_notice_after - elapsed));
            sqlite3_busy_timeout(db, static_cast<int>(slice.count()));
            try {
                return operation();
            } catch (const Busy&) {
            }
            if (!noticed && options.on_wait && Clock::now() - start >= options.wait_notice_after) {
                noticed = true;
                options.on_wait("waiting for the lock on " + path +
                                " (another process is writing; giving up after " +
                                std::to_string(options.lock_timeout.count() / 1000) + " s)");
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

    // A path as the store keeps it: relative to `directory` (an absolute path outside the
    // store's file system tree stays absolute only when no relative form exists).
    // Canonical first (canonical_path), so two names of one file are one row.
    std::string to_stored(const std::string& given) const {
        if (given.empty()) return given;
        namespace fs = std::filesystem;
        const fs::path absolute(canonical_path(given));
        const fs::path relative = absolute.lexically_relative(fs::path(directory));
        return relative.empty() ? absolute.generic_string() : relative.generic_string();
    }
    // A stored path as readers get it: absolute.
    std::string from_stored(const std::string& stored) const {
        if (stored.empty()) return stored;
        namespace fs = std::filesystem;
        const fs::path p(stored);
        if (p.is_absolute()) return p.lexically_normal().generic_string();
        return (fs::path(directory) / p).lexically_normal().generic_string();
    }
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

inline int Connection::user_version() {
    Query query(*this, "PRAGMA user_version");
    query.step("read the schema version");
    return static_cast<int>(query.integer(0));
}

inline constexpr const char* kRunColumns =
    "id, experiment_id, kind, name, variant, parent_run_id, config_text, seed, status, "
    "start_time, end_time, host, torch_version, git_commit, error_message, out_dir, step, "
    "identity, fingerprint, cell, blas";

inline RunRecord read_run(const Query& q, const Connection& connection) {
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
    run.out_dir = connection.from_stored(q.text(15));
    run.step = q.integer(16);
    run.identity = q.text(17);
    run.fingerprint = q.text(18);
    run.cell = q.text(19);
    run.blas = q.text(20);
    return run;
}

inline ExperimentRecord read_experiment(const Query& q, const Connection& connection) {
    return {q.integer(0), q.text(1), connection.from_stored(q.text(2)), q.text(3), q.text(4)};
}

inline constexpr const char* kClaimColumns =
    "experiment_id, job, host, pid, claimed_at, heartbeat_time, released_at, attempts";

inline JobClaim read_claim(const Query& q) {
    JobClaim claim;
    claim.experiment_id = q.integer(0);
    claim.job = q.text(1);
    claim.owner.host = q.text(2);
    claim.owner.pid = q.integer(3);
    claim.claimed_at = q.text(4);
    claim.heartbeat_time = q.real(5);
    claim.released_at = q.text(6);
    claim.attempts = q.integer(7);
    return claim;
}

}  // namespace store_detail

using namespace store_detail;  // the three store sources share these names

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
            std::error_code ec;
            if (version == 0 && std::filesystem::file_size(path, ec) == 0 && !ec)
                throw StoreError(path,
                                 "empty database: nothing has been stored in it yet (`tupe run` "
                                 "creates a store)");
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
        // A cluster job's own store (TUPE_STORE_JOURNAL=delete, set by the Slurm executor's
        // job scripts) lives on a filesystem every node sees, where WAL's shared-memory index
        // does not work across hosts: it keeps SQLite's rollback journal.
        const char* wanted = std::getenv("TUPE_STORE_JOURNAL");
        if (wanted != nullptr && std::string(wanted) == "delete") {
            if (journal != "delete") {
                Query query(*this, "PRAGMA journal_mode = DELETE");
                query.run("switch to the rollback journal");
            }
        } else if (journal != "wal") {
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
        for (int v = version; v < latest; ++v) {
            exec(steps[static_cast<std::size_t>(v)], "migrate the schema from version " +
                                                         std::to_string(v) + " to " +
                                                         std::to_string(v + 1));
            if (v + 1 == 5 && version > 0) relocate_paths_v5();
        }
        exec("PRAGMA user_version = " + std::to_string(latest), "set the schema version");
        transaction.commit();
    }

    // Schema 5 stores paths relative to the store's folder; before, they were stored as given,
    // relative to the working directory of whoever wrote them, which is no longer known. One
    // base folder is chosen for all of them, on evidence: each candidate (the store folder's
    // parent, the usual results/ beside runs/ layout; the store folder; this process's working
    // directory, for a writer only) is supported by the recorded files found under it with
    // the SHA-256 (or older hash) the store holds, and ruled out by one found with another
    // hash (another project's file of the same name). Exactly one supported candidate is
    // taken; two that both hold the store's files are refused (ambiguous), never guessed; with
    // no evidence at all the store folder's parent is taken, whatever the working directory.
    // Absolute paths are rewritten relative to the store too.
    void relocate_paths_v5() {
        namespace fs = std::filesystem;
        const fs::path dir(directory);
        struct Row {
            std::string path, hash;
        };
        std::vector<Row> relative;
        const auto collect = [&](const char* sql) {
            Query select(*this, sql);
            while (select.step("read the stored paths"))
                if (!select.text(0).empty() && !fs::path(select.text(0)).is_absolute())
                    relative.push_back({select.text(0), select.text(1)});
        };
        collect("SELECT path, hash FROM checkpoints");
        collect("SELECT path, hash FROM artifacts");
        collect("SELECT out_dir, '' FROM runs");
        std::vector<std::string> candidates;
        std::error_code error;
        for (const fs::path& base :
             {dir.parent_path(), dir,
              paths_from_working_directory ? fs::current_path(error) : fs::path()}) {
            if (base.empty()) continue;
            const std::string c = canonical_path(base.string());
            if (std::find(candidates.begin(), candidates.end(), c) == candidates.end())
                candidates.push_back(c);
        }
        std::vector<std::string> supported;
        for (const auto& base : candidates) {
            int found = 0, conflicting = 0;
            for (const auto& row : relative) {
                const fs::path file = fs::path(base) / row.path;
                if (!fs::exists(file, error)) continue;
                if (row.hash.empty() || !fs::is_regular_file(file, error)) {
                    ++found;
                    continue;
                }
                bool same = false;
                try {
                    same = file_hash_matches(file.string(), row.hash);
                } catch (const std::exception&) {
                }
                same ? ++found : ++conflicting;
            }
            if (found > 0 && conflicting == 0) supported.push_back(base);
        }
        if (supported.size() > 1)
            throw StoreError(path,
                             "cannot migrate the schema-4 store: its relative paths name "
                             "the recorded files under both " +
                                 supported[0] + " and " + supported[1] +
                                 "; move one copy away, or open the store from a "
                                 "folder that is neither");
        const fs::path base = supported.empty() ? dir.parent_path() : fs::path(supported[0]);
        const auto relocate = [&](const std::string& old) -> std::string {
            if (old.empty()) return old;
            const fs::path p(old);
            return to_stored(p.is_absolute() ? old : (base / p).string());
        };
        const auto rewrite = [&](const char* table, const char* column, const char* key) {
            std::vector<std::pair<std::int64_t, std::string>> rows;
            {
                Query select(*this,
                             std::string("SELECT ") + key + ", " + column + " FROM " + table);
                while (select.step("read the paths of " + std::string(table)))
                    rows.emplace_back(select.integer(0), select.text(1));
            }
            Query update(*this, std::string("UPDATE ") + table + " SET " + column + " = ?2 WHERE " +
                                    key + " = ?1");
            for (const auto& [id, old] : rows) {
                const std::string now = relocate(old);
                if (now == old) continue;
                update.bind(1, id).bind(2, now).run("rewrite a path of " + std::string(table));
                update.reset();
            }
        };
        rewrite("runs", "out_dir", "id");
        rewrite("checkpoints", "path", "id");
        rewrite("artifacts", "path", "id");
        rewrite("experiments", "yaml_path", "id");
    }

    // After an UPDATE of one run by id: no changed row means no such run.
    void require_run_exists(std::int64_t run_id) {
        if (sqlite3_changes(db) == 0)
            throw StoreError(path, "no run with id " + std::to_string(run_id));
    }
};

}  // namespace experiments
