// The SQLite results store (see result_store.h), part 3 of 3: every read. Each runs through
// with_retry and resets its statement when done, so no read snapshot stays open between calls
// (a runner writing in another process is never blocked by a reader that has finished).
#include <algorithm>

#include "experiments/result_store.h"
#include "result_store_internal.h"

namespace experiments {

std::vector<ExperimentRecord> ResultStore::list_experiments() {
    return impl_->with_retry([&] {
        std::vector<ExperimentRecord> out;
        Query q(*impl_,
                "SELECT id, name, yaml_path, yaml_text, created_at FROM experiments ORDER BY id");
        while (q.step("list experiments")) out.push_back(read_experiment(q, *impl_));
        return out;
    });
}

std::optional<ExperimentRecord> ResultStore::find_experiment(const std::string& name) {
    return impl_->with_retry([&]() -> std::optional<ExperimentRecord> {
        Query q(*impl_,
                "SELECT id, name, yaml_path, yaml_text, created_at FROM experiments "
                "WHERE name = ?1");
        if (!q.bind(1, name).step("find experiment '" + name + "'")) return std::nullopt;
        return read_experiment(q, *impl_);
    });
}

std::vector<RunRecord> ResultStore::list_runs(std::int64_t experiment_id) {
    return impl_->with_retry([&] {
        std::vector<RunRecord> out;
        Query q(*impl_, std::string("SELECT ") + kRunColumns +
                            " FROM runs WHERE experiment_id = ?1 ORDER BY id");
        q.bind(1, experiment_id);
        while (q.step("list runs")) out.push_back(read_run(q, *impl_));
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
        return read_run(q, *impl_);
    });
}

std::optional<RunRecord> ResultStore::get_run(std::int64_t run_id) {
    return impl_->with_retry([&]() -> std::optional<RunRecord> {
        Query q(*impl_, std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?1");
        if (!q.bind(1, run_id).step("read run " + std::to_string(run_id))) return std::nullopt;
        return read_run(q, *impl_);
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
                "CASE WHEN r.variant <> '' THEN r.variant ELSE COALESCE(p.variant, '') END, "
                "r.cell "
                "FROM glue_results g JOIN runs r ON r.id = g.run_id "
                "LEFT JOIN runs p ON p.id = r.parent_run_id "
                "WHERE r.experiment_id = ?1 ORDER BY r.id, g.task, g.split, g.metric");
        q.bind(1, experiment_id);
        while (q.step("read GLUE results")) {
            out.push_back({q.integer(0), q.integer(1), q.text(2), q.text(3), q.text(4), q.real(5),
                           q.integer(6), q.real(7), q.integer(8), q.text(9), q.text(10),
                           q.text(11)});
        }
        return out;
    });
}

std::vector<PredictionSet> ResultStore::predictions(std::int64_t experiment_id) {
    return impl_->with_retry([&] {
        std::vector<PredictionSet> out;
        Query q(*impl_,
                "SELECT p.run_id, p.split, p.gold, p.prediction, p.example_id FROM predictions p "
                "JOIN runs r ON r.id = p.run_id WHERE r.experiment_id = ?1 "
                "ORDER BY p.run_id, p.split, p.example");
        q.bind(1, experiment_id);
        while (q.step("read predictions")) {
            const std::int64_t run = q.integer(0);
            const std::string split = q.text(1);
            if (out.empty() || out.back().run_id != run || out.back().split != split)
                out.push_back({run, split, {}, {}});
            out.back().gold.push_back(q.real(2));
            out.back().predicted.push_back(q.real(3));
            out.back().ids.push_back(q.text(4));
        }
        // Rows stored without their own index (dev splits, stores before schema 4): no ids.
        for (auto& set : out)
            if (std::all_of(set.ids.begin(), set.ids.end(),
                            [](const std::string& id) { return id.empty(); }))
                set.ids.clear();
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
            out.push_back({q.integer(0), q.integer(1), q.integer(2), impl_->from_stored(q.text(3)),
                           q.integer(4), q.text(5)});
        }
        return out;
    });
}

std::vector<ArtifactRecord> ResultStore::artifacts(std::int64_t run_id) {
    return impl_->with_retry([&] {
        std::vector<ArtifactRecord> out;
        Query q(*impl_,
                "SELECT id, run_id, kind, path, size, hash, description, identity FROM "
                "artifacts WHERE run_id = ?1 ORDER BY id");
        q.bind(1, run_id);
        while (q.step("read artifacts")) {
            out.push_back({q.integer(0), q.integer(1), q.text(2), impl_->from_stored(q.text(3)),
                           q.integer(4), q.text(5), q.text(6), q.text(7)});
        }
        return out;
    });
}

std::vector<JobClaim> ResultStore::list_claims(std::int64_t experiment_id) {
    return impl_->with_retry([&] {
        std::vector<JobClaim> out;
        Query q(*impl_, std::string("SELECT ") + kClaimColumns +
                            " FROM job_claims WHERE experiment_id = ?1 ORDER BY job");
        q.bind(1, experiment_id);
        while (q.step("list job claims")) out.push_back(read_claim(q));
        return out;
    });
}

}  // namespace experiments
