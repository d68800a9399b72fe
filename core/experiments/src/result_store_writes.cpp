// The SQLite results store (see result_store.h), part 2 of 3: every write. Each is one
// BEGIN IMMEDIATE transaction through Connection::write, retried while another process holds
// the lock; an add of an existing key replaces the row (ON CONFLICT ... DO UPDATE). A job claim
// reads and writes in that one transaction, so two runners never both take a job.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "experiments/result_store.h"
#include "result_store_internal.h"

namespace experiments {

std::int64_t ResultStore::get_or_create_experiment(const std::string& name,
                                                   const std::string& yaml_path,
                                                   const std::string& yaml_text) {
    if (name.empty()) throw StoreError(impl_->path, "an experiment needs a name");
    return impl_->write("store experiment '" + name + "'", [&] {
        Query insert(*impl_,
                     "INSERT INTO experiments (name, yaml_path, yaml_text, created_at) "
                     "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name) DO NOTHING");
        insert.bind(1, name).bind(2, impl_->to_stored(yaml_path)).bind(3, yaml_text);
        insert.bind(4, utc_now_iso8601());
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
        Query upsert(*impl_, kUpsertRunSql);
        upsert.bind(1, run.experiment_id).bind(2, run.kind).bind(3, run.name).bind(4, run.variant);
        upsert.bind(5, run.parent_run_id).bind(6, run.config_text).bind(7, run.seed);
        upsert.bind(8, run.status).bind(9, run.start_time).bind(10, run.end_time);
        upsert.bind(11, run.host).bind(12, run.torch_version).bind(13, run.git_commit);
        upsert.bind(14, run.error_message).bind(15, impl_->to_stored(run.out_dir));
        upsert.bind(16, run.step).bind(17, run.identity).bind(18, run.fingerprint);
        upsert.bind(19, run.cell).bind(20, run.blas);
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

void ResultStore::set_run_identity(std::int64_t run_id, const std::string& identity,
                                   const std::string& fingerprint, const std::string& cell) {
    const std::string what = "set the identity of run " + std::to_string(run_id);
    impl_->write(what, [&] {
        Query update(*impl_,
                     "UPDATE runs SET identity = ?2, fingerprint = ?3, cell = ?4 WHERE id = ?1");
        update.bind(1, run_id).bind(2, identity).bind(3, fingerprint).bind(4, cell).run(what);
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

namespace {

// Test hook TUPE_TEST_KILL_IN_TRANSACTION=metrics:N or output:N (inert unless set): the N-th
// add_metrics (record_output) of this process raises SIGKILL inside its transaction, after
// rows are written, to test that the next process finds that transaction rolled back and
// every earlier one intact. Before it dies it prints one line to stderr: what it was writing.
struct KillInTransaction {
    long at = 0;         // the add_metrics call to die in; 0 = never
    long calls = 0;      // add_metrics calls so far
    long committed = 0;  // metric rows committed by this process
    long output_at = 0;  // the record_output call to die in; 0 = never
    long output_calls = 0;
    KillInTransaction() {
        const char* env = std::getenv("TUPE_TEST_KILL_IN_TRANSACTION");
        if (env != nullptr && std::strncmp(env, "metrics:", 8) == 0)
            at = std::strtol(env + 8, nullptr, 10);
        if (env != nullptr && std::strncmp(env, "output:", 7) == 0)
            output_at = std::strtol(env + 7, nullptr, 10);
    }
};

KillInTransaction& kill_in_transaction() {
    static KillInTransaction hook;
    return hook;
}

}  // namespace

void ResultStore::add_metrics(std::int64_t run_id, const std::vector<MetricPoint>& points) {
    if (points.empty()) return;
    const std::string what = "add metrics to run " + std::to_string(run_id);
    auto& hook = kill_in_transaction();
    const bool die = hook.at > 0 && ++hook.calls == hook.at;
    impl_->write(what, [&] {
        Query insert(*impl_,
                     "INSERT INTO metrics (run_id, key, step, value, wall_time) "
                     "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (run_id, key, step) "
                     "DO UPDATE SET value = excluded.value, wall_time = excluded.wall_time");
        for (const auto& point : points) {
            insert.bind(1, run_id).bind(2, point.key).bind(3, point.step);
            insert.bind_real(4, point.value).bind_real(5, point.wall_time).run(what);
            insert.reset();
            if (die) {
                std::fprintf(stderr,
                             "TUPE_TEST_KILL_IN_TRANSACTION: SIGKILL after %ld committed metric "
                             "rows, inside a transaction of %zu rows of run %lld (first: %s at "
                             "step %lld)\n",
                             hook.committed, points.size(), static_cast<long long>(run_id),
                             point.key.c_str(), static_cast<long long>(point.step));
                std::fflush(stderr);
                std::raise(SIGKILL);
            }
        }
    });
    hook.committed += static_cast<long>(points.size());
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

void ResultStore::set_predictions(const PredictionSet& set) {
    const std::string what =
        "store predictions on " + set.split + " of run " + std::to_string(set.run_id);
    if (set.gold.size() != set.predicted.size())
        throw StoreError(impl_->path, "cannot " + what + ": " + std::to_string(set.gold.size()) +
                                          " gold labels but " +
                                          std::to_string(set.predicted.size()) + " predictions");
    if (!set.ids.empty() && set.ids.size() != set.predicted.size())
        throw StoreError(impl_->path, "cannot " + what + ": " + std::to_string(set.ids.size()) +
                                          " example ids but " +
                                          std::to_string(set.predicted.size()) + " predictions");
    impl_->write(what, [&] {
        Query erase(*impl_, "DELETE FROM predictions WHERE run_id = ?1 AND split = ?2");
        erase.bind(1, set.run_id).bind(2, set.split).run(what);
        Query insert(*impl_,
                     "INSERT INTO predictions (run_id, split, example, gold, prediction, "
                     "example_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
        for (size_t i = 0; i < set.gold.size(); ++i) {
            insert.bind(1, set.run_id).bind(2, set.split).bind(3, static_cast<std::int64_t>(i));
            insert.bind_real(4, set.gold[i]).bind_real(5, set.predicted[i]);
            insert.bind(6, set.ids.empty() ? std::string() : set.ids[i]).run(what);
            insert.reset();
        }
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
        insert.bind(1, checkpoint.run_id).bind(2, checkpoint.step);
        insert.bind(3, impl_->to_stored(checkpoint.path));
        insert.bind(4, checkpoint.size).bind(5, checkpoint.hash).run(what);
    });
}

namespace {

constexpr const char* kUpsertArtifact =
    "INSERT INTO artifacts (run_id, kind, path, size, hash, description, identity) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (run_id, path) DO UPDATE SET "
    "kind = excluded.kind, size = excluded.size, hash = excluded.hash, "
    "description = excluded.description, identity = excluded.identity";

void upsert_artifact(Query& insert, const Connection& connection, const ArtifactRecord& artifact,
                     const std::string& what) {
    insert.bind(1, artifact.run_id).bind(2, artifact.kind);
    insert.bind(3, connection.to_stored(artifact.path));
    insert.bind(4, artifact.size).bind(5, artifact.hash).bind(6, artifact.description);
    insert.bind(7, artifact.identity);
    insert.run(what);
    insert.reset();
}

}  // namespace

void ResultStore::add_artifact(const ArtifactRecord& artifact) {
    const std::string what =
        "add artifact " + artifact.path + " to run " + std::to_string(artifact.run_id);
    impl_->write(what, [&] {
        Query insert(*impl_, kUpsertArtifact);
        upsert_artifact(insert, *impl_, artifact, what);
    });
}

void ResultStore::add_artifacts(const std::vector<ArtifactRecord>& artifacts) {
    if (artifacts.empty()) return;
    impl_->write("add " + std::to_string(artifacts.size()) + " artifacts", [&] {
        Query insert(*impl_, kUpsertArtifact);
        for (const auto& artifact : artifacts)
            upsert_artifact(
                insert, *impl_, artifact,
                "add artifact " + artifact.path + " to run " + std::to_string(artifact.run_id));
    });
}

void ResultStore::record_output(std::int64_t run_id, const std::string& replace_under,
                                const std::vector<ArtifactRecord>& artifacts,
                                const std::vector<MetricPoint>& metrics) {
    const std::string what = "record " + std::to_string(artifacts.size()) +
                             " output files of run " + std::to_string(run_id);
    auto& hook = kill_in_transaction();
    const bool die = hook.output_at > 0 && ++hook.output_calls == hook.output_at;
    impl_->write(what, [&] {
        if (!replace_under.empty()) {
            // Every row under the folder, its own path excluded: stored paths are relative
            // and '/'-separated, so a prefix match names exactly the folder's files.
            const std::string prefix = impl_->to_stored(replace_under) + "/";
            Query erase(*impl_,
                        "DELETE FROM artifacts WHERE run_id = ?1 AND substr(path, 1, ?2) = ?3");
            erase.bind(1, run_id).bind(2, static_cast<std::int64_t>(prefix.size()));
            erase.bind(3, prefix).run(what);
        }
        Query insert(*impl_, kUpsertArtifact);
        for (const auto& artifact : artifacts) upsert_artifact(insert, *impl_, artifact, what);
        if (die) {
            std::fprintf(stderr,
                         "TUPE_TEST_KILL_IN_TRANSACTION: SIGKILL inside the transaction that "
                         "records %zu output files of run %lld\n",
                         artifacts.size(), static_cast<long long>(run_id));
            std::fflush(stderr);
            std::raise(SIGKILL);
        }
        Query add(*impl_,
                  "INSERT INTO metrics (run_id, key, step, value, wall_time) "
                  "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (run_id, key, step) "
                  "DO UPDATE SET value = excluded.value, wall_time = excluded.wall_time");
        for (const auto& point : metrics) {
            add.bind(1, run_id).bind(2, point.key).bind(3, point.step);
            add.bind_real(4, point.value).bind_real(5, point.wall_time).run(what);
            add.reset();
        }
    });
}

ClaimResult ResultStore::claim_job(std::int64_t experiment_id, const std::string& job,
                                   const ClaimOwner& owner, const ClaimOptions& options) {
    const std::string what = "claim job '" + job + "'";
    if (job.empty()) throw StoreError(impl_->path, "a job claim needs a job name");
    if (owner.host.empty() || owner.pid <= 0)
        throw StoreError(impl_->path, "cannot " + what + ": the owner needs a host and a pid");
    return impl_->write(what, [&] {
        ClaimResult result;
        if (!options.allow_finished) {
            Query run(*impl_, "SELECT status FROM runs WHERE experiment_id = ?1 AND name = ?2");
            if (run.bind(1, experiment_id).bind(2, job).step(what) && run.text(0) == "finished") {
                result.outcome = ClaimResult::Outcome::kFinished;
                return result;
            }
        }
        const double now = unix_time_now();
        std::int64_t attempts = 0;
        bool new_attempt = true;
        {
            Query find(*impl_, std::string("SELECT ") + kClaimColumns +
                                   " FROM job_claims WHERE experiment_id = ?1 AND job = ?2");
            if (find.bind(1, experiment_id).bind(2, job).step(what)) {
                const JobClaim found = read_claim(find);
                attempts = found.attempts;
                if (found.held()) {
                    const bool own = found.owner == owner;
                    const bool handed =
                        options.handoff_from && found.owner == *options.handoff_from;
                    if (!own && !handed &&
                        claim_health(found, options.stale_after_seconds, now) ==
                            ClaimHealth::kLive) {
                        result.outcome = ClaimResult::Outcome::kHeld;
                        result.previous = found;
                        return result;
                    }
                    new_attempt = !own && !handed;
                    if (!own) result.previous = found;
                }
            }
        }
        JobClaim& claim = result.claim;
        claim.experiment_id = experiment_id;
        claim.job = job;
        claim.owner = owner;
        claim.claimed_at = utc_now_iso8601();
        claim.heartbeat_time = now;
        claim.attempts = attempts + (new_attempt ? 1 : 0);
        Query upsert(*impl_,
                     "INSERT INTO job_claims (experiment_id, job, host, pid, claimed_at, "
                     "heartbeat_time, released_at, attempts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, '', "
                     "?7) ON CONFLICT (experiment_id, job) DO UPDATE SET host = excluded.host, "
                     "pid = excluded.pid, claimed_at = excluded.claimed_at, "
                     "heartbeat_time = excluded.heartbeat_time, released_at = '', "
                     "attempts = excluded.attempts");
        upsert.bind(1, experiment_id).bind(2, job).bind(3, owner.host).bind(4, owner.pid);
        upsert.bind(5, claim.claimed_at).bind_real(6, now).bind(7, claim.attempts).run(what);
        result.outcome = ClaimResult::Outcome::kClaimed;
        return result;
    });
}

std::vector<JobClaim> ResultStore::heartbeat_claims(const ClaimOwner& owner) {
    const std::string what = "refresh the job claims of " + owner.text();
    return impl_->write(what, [&] {
        Query update(*impl_,
                     "UPDATE job_claims SET heartbeat_time = ?3 "
                     "WHERE host = ?1 AND pid = ?2 AND released_at = ''");
        update.bind(1, owner.host).bind(2, owner.pid).bind_real(3, unix_time_now()).run(what);
        std::vector<JobClaim> held;
        Query select(*impl_, std::string("SELECT ") + kClaimColumns +
                                 " FROM job_claims WHERE host = ?1 AND pid = ?2 AND "
                                 "released_at = '' ORDER BY experiment_id, job");
        select.bind(1, owner.host).bind(2, owner.pid);
        while (select.step(what)) held.push_back(read_claim(select));
        return held;
    });
}

bool ResultStore::release_claim(std::int64_t experiment_id, const std::string& job,
                                const ClaimOwner& owner) {
    const std::string what = "release the claim of job '" + job + "'";
    return impl_->write(what, [&] {
        Query update(*impl_,
                     "UPDATE job_claims SET released_at = ?5 WHERE experiment_id = ?1 AND "
                     "job = ?2 AND host = ?3 AND pid = ?4 AND released_at = ''");
        update.bind(1, experiment_id).bind(2, job).bind(3, owner.host).bind(4, owner.pid);
        update.bind(5, utc_now_iso8601()).run(what);
        return sqlite3_changes(impl_->db) > 0;
    });
}

}  // namespace experiments
