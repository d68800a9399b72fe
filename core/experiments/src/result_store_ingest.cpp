// The SQLite results store (see result_store.h): one run copied whole from one store into
// another. A cluster job runs with a store of its own on the shared filesystem (the Slurm
// executor, experiments/slurm.h); `tupe gather` reads its run as a RunBundle and writes it into
// the study's store in one transaction that also records the job's attempt as gathered, so a
// job is ingested exactly once however often gather runs, and a reader never sees half a run.
#include <algorithm>

#include "experiments/result_store.h"
#include "result_store_internal.h"

namespace experiments {

RunBundle ResultStore::read_run_bundle(std::int64_t run_id) {
    RunBundle bundle;
    const auto run = get_run(run_id);
    if (!run) throw StoreError(impl_->path, "no run with id " + std::to_string(run_id));
    bundle.run = *run;
    bundle.params = params(run_id);
    for (const auto& key : metric_keys(run_id))
        for (auto& point : metrics(run_id, key)) bundle.metrics.push_back(std::move(point));
    for (auto& g : glue_results(run->experiment_id))
        if (g.run_id == run_id) bundle.glue.push_back(std::move(g));
    for (auto& p : predictions(run->experiment_id))
        if (p.run_id == run_id) bundle.predictions.push_back(std::move(p));
    bundle.checkpoints = checkpoints(run_id);
    bundle.artifacts = artifacts(run_id);
    return bundle;
}

bool ResultStore::gathered(std::int64_t experiment_id, const std::string& job,
                           const std::string& token) {
    return impl_->with_retry([&] {
        Query q(*impl_,
                "SELECT 1 FROM gathered_jobs WHERE experiment_id = ?1 AND job = ?2 AND token = ?3");
        return q.bind(1, experiment_id).bind(2, job).bind(3, token).step("read gathered jobs");
    });
}

bool ResultStore::ingest_run(std::int64_t experiment_id, const std::string& job,
                             const std::string& token, const RunBundle& bundle,
                             const std::string& parent_name) {
    const RunRecord& r = bundle.run;
    const std::string what = "gather job '" + job + "'";
    if (r.name.empty()) throw StoreError(impl_->path, "cannot " + what + ": its run has no name");
    if (!contains(kRunKinds, r.kind) || !contains(kRunStatuses, r.status))
        throw StoreError(impl_->path, "cannot " + what + ": run kind '" + r.kind + "' or status '" +
                                          r.status + "' is unknown");
    return impl_->write(what, [&] {
        {
            Query seen(*impl_,
                       "SELECT 1 FROM gathered_jobs WHERE experiment_id = ?1 AND job = ?2 AND "
                       "token = ?3");
            if (seen.bind(1, experiment_id).bind(2, job).bind(3, token).step(what)) return false;
        }
        std::optional<std::int64_t> parent;
        if (!parent_name.empty()) {
            Query find(*impl_, "SELECT id FROM runs WHERE experiment_id = ?1 AND name = ?2");
            if (find.bind(1, experiment_id).bind(2, parent_name).step(what))
                parent = find.integer(0);
        }
        // The run row: its id is kept when it exists (a finetune's parent link stays valid);
        // everything it held before goes (a redone job's curves start afresh).
        Query upsert(*impl_, kUpsertRunSql);
        upsert.bind(1, experiment_id).bind(2, r.kind).bind(3, r.name).bind(4, r.variant);
        upsert.bind(5, parent).bind(6, r.config_text).bind(7, r.seed).bind(8, r.status);
        upsert.bind(9, r.start_time).bind(10, r.end_time).bind(11, r.host);
        upsert.bind(12, r.torch_version).bind(13, r.git_commit).bind(14, r.error_message);
        upsert.bind(15, impl_->to_stored(r.out_dir)).bind(16, r.step).bind(17, r.identity);
        upsert.bind(18, r.fingerprint).bind(19, r.cell).bind(20, r.blas).run(what);
        Query select(*impl_, "SELECT id FROM runs WHERE experiment_id = ?1 AND name = ?2");
        select.bind(1, experiment_id).bind(2, r.name).step(what);
        const std::int64_t id = select.integer(0);
        for (const char* table :
             {"params", "metrics", "glue_results", "predictions", "checkpoints", "artifacts"}) {
            Query erase(*impl_, std::string("DELETE FROM ") + table + " WHERE run_id = ?1");
            erase.bind(1, id).run(what);
        }

        Query param(*impl_, "INSERT INTO params (run_id, key, value) VALUES (?1, ?2, ?3)");
        for (const auto& [key, value] : bundle.params) {
            param.bind(1, id).bind(2, key).bind(3, value).run(what);
            param.reset();
        }
        Query metric(*impl_,
                     "INSERT INTO metrics (run_id, key, step, value, wall_time) "
                     "VALUES (?1, ?2, ?3, ?4, ?5)");
        for (const auto& p : bundle.metrics) {
            metric.bind(1, id).bind(2, p.key).bind(3, p.step).bind_real(4, p.value);
            metric.bind_real(5, p.wall_time).run(what);
            metric.reset();
        }
        Query glue(*impl_,
                   "INSERT INTO glue_results (run_id, task, split, metric, value, "
                   "checkpoint_step, lr, seed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
        for (const auto& g : bundle.glue) {
            glue.bind(1, id).bind(2, g.task).bind(3, g.split).bind(4, g.metric);
            glue.bind_real(5, g.value).bind(6, g.checkpoint_step).bind_real(7, g.lr);
            glue.bind(8, g.seed).run(what);
            glue.reset();
        }
        Query prediction(*impl_,
                         "INSERT INTO predictions (run_id, split, example, gold, prediction, "
                         "example_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
        for (const auto& set : bundle.predictions) {
            if (set.gold.size() != set.predicted.size() ||
                (!set.ids.empty() && set.ids.size() != set.predicted.size()))
                throw StoreError(impl_->path, "cannot " + what + ": predictions on " + set.split +
                                                  " have unequal lengths");
            for (size_t i = 0; i < set.predicted.size(); ++i) {
                prediction.bind(1, id).bind(2, set.split).bind(3, static_cast<std::int64_t>(i));
                prediction.bind_real(4, set.gold[i]).bind_real(5, set.predicted[i]);
                prediction.bind(6, set.ids.empty() ? std::string() : set.ids[i]).run(what);
                prediction.reset();
            }
        }
        Query checkpoint(*impl_,
                         "INSERT INTO checkpoints (run_id, step, path, size, hash) "
                         "VALUES (?1, ?2, ?3, ?4, ?5)");
        for (const auto& c : bundle.checkpoints) {
            checkpoint.bind(1, id).bind(2, c.step).bind(3, impl_->to_stored(c.path));
            checkpoint.bind(4, c.size).bind(5, c.hash).run(what);
            checkpoint.reset();
        }
        Query artifact(*impl_,
                       "INSERT INTO artifacts (run_id, kind, path, size, hash, description, "
                       "identity) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
        for (const auto& a : bundle.artifacts) {
            artifact.bind(1, id).bind(2, a.kind).bind(3, impl_->to_stored(a.path));
            artifact.bind(4, a.size).bind(5, a.hash).bind(6, a.description);
            artifact.bind(7, a.identity).run(what);
            artifact.reset();
        }
        Query mark(*impl_,
                   "INSERT INTO gathered_jobs (experiment_id, job, token, gathered_at) "
                   "VALUES (?1, ?2, ?3, ?4)");
        mark.bind(1, experiment_id).bind(2, job).bind(3, token).bind(4, utc_now_iso8601());
        mark.run(what);
        return true;
    });
}

}  // namespace experiments
