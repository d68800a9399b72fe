// The SQLite results store: experiments, their pretrain and finetune runs, params, metric
// curves, GLUE scores, checkpoints and artifacts, and the job claims that let several runners
// share one plan, in one file that runners write while the desktop app reads it (WAL mode).
// Pure sqlite3 C API; the schema is versioned in PRAGMA user_version and moved forward by
// schema_migrations(). Times are ISO-8601 UTC text ("2024-05-01T12:34:56.789Z"), except metric
// wall times and claim heartbeats: seconds since the Unix epoch. File paths (a run's out_dir,
// checkpoints, artifacts, the experiment's YAML) are stored relative to the store's own folder
// and read back as absolute paths, so every reader finds the same files from any working
// directory, and a store moved together with its runs folder still finds them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace experiments {

/// A store operation that failed. what() is one line, "MESSAGE: PATH", e.g.
/// "database is locked by another process: runs/results.db".
class StoreError : public std::runtime_error {
  public:
    StoreError(const std::string& path, const std::string& message);

    const std::string& path() const { return path_; }        ///< The database file.
    const std::string& message() const { return message_; }  ///< what() without the path.

  private:
    std::string path_;
    std::string message_;
};

/// How ResultStore::open treats the file.
enum class OpenMode {
    kReadWrite,  ///< Creates the file, its parent directories and the schema; migrates.
    kReadOnly,   ///< The file must exist with this build's schema version; writes throw.
};

/// The lock-wait notice of stores opened with default options (StoreOptions::on_wait): empty
/// unless a program sets it (the CLI prints the line to stderr); libraries never print.
void set_default_wait_notice(std::function<void(const std::string&)> notice);
const std::function<void(const std::string&)>& default_wait_notice();

/// Tuning for ResultStore::open.
struct StoreOptions {
    /// How long one operation keeps retrying while another connection holds the lock
    /// (SQLITE_BUSY / SQLITE_LOCKED), with backoff, before it throws StoreError.
    std::chrono::milliseconds lock_timeout{30000};
    /// Called once per operation that has waited `wait_notice_after` for the lock, with one
    /// line saying so (the CLI prints it), so a long wait is never silent. Empty: no notice.
    std::function<void(const std::string&)> on_wait = default_wait_notice();
    std::chrono::milliseconds wait_notice_after{2000};
};

/// One row of `experiments`: a named YAML experiment.
struct ExperimentRecord {
    std::int64_t id = 0;
    std::string name;        ///< Unique.
    std::string yaml_path;   ///< The file when the experiment was first stored (absolute).
    std::string yaml_text;   ///< The YAML as it was then.
    std::string created_at;  ///< ISO-8601 UTC.
};

/// One row of `runs`. A run is unique by (experiment_id, name); a finetune names its pretrain
/// run in parent_run_id. Empty strings mean "not set".
struct RunRecord {
    std::int64_t id = 0;  ///< Filled by the store; ignored by upsert_run.
    std::int64_t experiment_id = 0;
    std::string kind = "pretrain";  ///< "pretrain" or "finetune".
    std::string name;               ///< e.g. "tupe-a" or "tupe-a/ckpt300/syn-cola/lr2e-5/seed1".
    std::string variant;  ///< e.g. "tupe-a"; a finetune may leave it empty (see glue_results).
    std::optional<std::int64_t> parent_run_id;  ///< The pretrain run of a finetune.
    std::string config_text;                    ///< The resolved config.
    std::int64_t seed = 0;
    std::string status = "pending";  ///< pending, running, finished, failed, stopped or blocked
                                     ///< (a fine-tuning whose pretraining failed).
    std::string start_time;          ///< ISO-8601 UTC.
    std::string end_time;            ///< ISO-8601 UTC.
    std::string host;
    std::string torch_version;
    /// The BLAS and its kernels (engine::blas_description; schema 8): two runs compare bit for
    /// bit only under the same kernels. Empty for runs stored before.
    std::string blas;
    std::string git_commit;
    std::string error_message;
    std::string out_dir;    ///< Absolute when read (stored relative to the store's folder).
    std::int64_t step = 0;  ///< Last step reached.
    /// What determines the run's result, as sorted "key=value" lines (schema 5; experiments/
    /// job_identity.h): the resolved config, the data files' hashes, the task data and the
    /// fine-tuning protocol. Empty for runs stored before schema 5.
    std::string identity;
    std::string fingerprint;  ///< Hash of identity: a rerun with another one is another job.
    /// Hash of identity without the keys a report pools over (seeds, the fine-tuning lr): runs
    /// of one variant with different cells are never pooled into one table cell.
    std::string cell;
};

/// One point of a metric curve. A NaN value (a diverged loss) is kept as NaN.
struct MetricPoint {
    std::string key;  ///< e.g. "train/loss".
    std::int64_t step = 0;
    double value = 0.0;
    double wall_time = 0.0;  ///< Seconds since the Unix epoch (see unix_time_now()).
};

/// One GLUE score. Unique by (run_id, task, split, metric); a later add replaces it.
struct GlueResultRecord {
    std::int64_t id = 0;
    std::int64_t run_id = 0;
    std::string task;    ///< e.g. "syn-cola".
    std::string split;   ///< e.g. "dev".
    std::string metric;  ///< e.g. "mcc", "accuracy".
    double value = 0.0;
    std::int64_t checkpoint_step = 0;  ///< The pretrain checkpoint the finetune started from.
    double lr = 0.0;
    std::int64_t seed = 0;
    std::string run_name;  ///< Filled by glue_results(): the run's name.
    std::string variant;   ///< Filled by glue_results(): the run's, else its parent's variant.
    std::string cell;      ///< Filled by glue_results(): the run's cell (RunRecord::cell).
};

/// The per-example predictions of one fine-tuning run on one split, in file order: the label
/// index (classification) or value (regression) predicted, and the gold one (NaN for an
/// unlabelled test split).
struct PredictionSet {
    std::int64_t run_id = 0;
    std::string split;  ///< e.g. "dev", "dev_matched", "test", "test_matched", "ax".
    std::vector<double> gold;
    std::vector<double> predicted;
    /// The examples' own indices from the file (a test split's `index` column, schema 4), one
    /// per prediction; empty when the row number is the index (dev splits).
    std::vector<std::string> ids = {};
};

/// One saved checkpoint. Unique by (run_id, step); a later add replaces it.
struct CheckpointRecord {
    std::int64_t id = 0;
    std::int64_t run_id = 0;
    std::int64_t step = 0;
    std::string path;       ///< Absolute when read (stored relative to the store's folder).
    std::int64_t size = 0;  ///< Bytes.
    std::string hash;       ///< Hex text, "sha256:..." or "fnv1a64:...".
};

/// One file a run produced (attention maps, a report...). Unique by (run_id, path).
struct ArtifactRecord {
    std::int64_t id = 0;
    std::int64_t run_id = 0;
    std::string kind;       ///< e.g. "attention-npy", "report".
    std::string path;       ///< Absolute when read (stored relative to the store's folder).
    std::int64_t size = 0;  ///< Bytes.
    std::string hash;
    std::string description;
    /// What determined the file (schema 7; experiments/job_identity.h, output_identity): the
    /// settings and inputs of the analysis, extrapolation, ablation or head scan that wrote it,
    /// as "key=value" lines. A rerun whose identity differs is another result, never "already
    /// done". Empty for files recorded without one (by hand, or before schema 7).
    std::string identity = {};
};

/// Everything a store holds of one run: what `tupe gather` copies from a cluster job's own
/// store into the study's (ResultStore::read_run_bundle, ResultStore::ingest_run). Paths are
/// absolute, as read.
struct RunBundle {
    RunRecord run;
    std::map<std::string, std::string> params;
    std::vector<MetricPoint> metrics;
    std::vector<GlueResultRecord> glue;
    std::vector<PredictionSet> predictions;
    std::vector<CheckpointRecord> checkpoints;
    std::vector<ArtifactRecord> artifacts;
};

/// A runner process, the holder of job claims: a host name and a pid on that host.
struct ClaimOwner {
    std::string host;
    std::int64_t pid = 0;

    /// This process: gethostname() and getpid().
    static ClaimOwner self();
    /// "HOST:PID", e.g. "node7:4242".
    std::string text() const;
    /// The owner written as text(); nullopt when `text` is not HOST:PID with a pid > 0.
    static std::optional<ClaimOwner> parse(const std::string& text);
    bool operator==(const ClaimOwner& other) const {
        return host == other.host && pid == other.pid;
    }
    bool operator!=(const ClaimOwner& other) const { return !(*this == other); }
};

/// One row of `job_claims` (schema 3): which runner runs a job of the plan. Unique by
/// (experiment_id, job). A claim is held from claim_job until release_claim; the row stays
/// afterwards, naming the last owner and counting the attempts.
struct JobClaim {
    std::int64_t experiment_id = 0;
    std::string job;            ///< The plan's job name, which is also its run's name.
    ClaimOwner owner;           ///< The holder; after release, the last one.
    std::string claimed_at;     ///< ISO-8601 UTC.
    double heartbeat_time = 0;  ///< Seconds since the Unix epoch: the owner's last sign of life.
    std::string released_at;    ///< ISO-8601 UTC; empty while the claim is held.
    /// Times the job was claimed to be run: a takeover counts, a handoff to a child does not.
    std::int64_t attempts = 0;

    bool held() const { return released_at.empty(); }
};

/// Whether the owner of a held claim still works on it.
enum class ClaimHealth {
    kLive,            ///< Heartbeat recent, and the process exists where that can be checked.
    kOwnerGone,       ///< The owner is on this host and no process has its pid.
    kHeartbeatStale,  ///< The last heartbeat is older than the timeout (hung, or another host).
};

/// The health of `claim` at `now` (seconds since the Unix epoch) for a heartbeat timeout of
/// `stale_after_seconds`. The pid is checked only for owners on this host (kill(pid, 0)).
ClaimHealth claim_health(const JobClaim& claim, double stale_after_seconds, double now);

/// How ResultStore::claim_job treats a job that is claimed or done.
struct ClaimOptions {
    /// A held claim whose heartbeat is older than this (or whose owner is gone) is taken over.
    double stale_after_seconds = 60;
    /// A claim held by this owner is taken over even when live, without counting an attempt:
    /// a runner hands a job to the child process it starts for it.
    std::optional<ClaimOwner> handoff_from;
    /// Claim even when the job's run is finished (the analysis of a finished pretraining).
    bool allow_finished = false;
};

/// What ResultStore::claim_job found and did.
struct ClaimResult {
    enum class Outcome {
        kClaimed,   ///< The caller holds the claim now.
        kHeld,      ///< Another owner holds a live claim; nothing changed.
        kFinished,  ///< The job's run is finished (without allow_finished); nothing changed.
    };
    Outcome outcome = Outcome::kHeld;
    JobClaim claim;  ///< kClaimed: the caller's new claim.
    /// kHeld: the live claim of the other owner. kClaimed: the held claim that was taken over
    /// (stale, gone or handed off); nullopt when the job was free.
    std::optional<JobClaim> previous;
};

/// The results database. Every write is one transaction (BEGIN IMMEDIATE), retried with
/// backoff while another process holds the lock, for up to StoreOptions::lock_timeout.
/// Reads see only committed transactions, so a reader never sees half a batch.
/// A ResultStore is one SQLite connection: use it from one thread at a time; open one store
/// per thread or process. Movable, not copyable.
class ResultStore {
  public:
    /// Opens (kReadWrite: creates, then migrates) the store at `path`. Throws StoreError when
    /// the file is not a SQLite database, belongs to another application, has a schema newer
    /// than this build, is missing (kReadOnly), older than this build (kReadOnly), or cannot
    /// be written (kReadWrite). A refused file is left exactly as it was.
    static ResultStore open(const std::string& path, OpenMode mode = OpenMode::kReadWrite,
                            const StoreOptions& options = {});

    /// Opens an existing store read-only for a report; a store written by an older build is
    /// first migrated (opened read-write once: the migration is one transaction and keeps
    /// every row), so `tupe report` works on it. Such a migration never reads the paths of a
    /// schema-4 store against this process's working directory (only a writer's open does).
    /// Errors as open().
    static ResultStore open_for_reading(const std::string& path, const StoreOptions& options = {});

    /// True when a file exists at `path` and is not empty. A store another runner has just
    /// created stays empty until its schema is written: code that only reads what is already
    /// stored treats such a file as no store yet instead of failing on it.
    static bool holds_data(const std::string& path);

    ResultStore(ResultStore&&) noexcept;
    ResultStore& operator=(ResultStore&&) noexcept;
    ResultStore(const ResultStore&) = delete;
    ResultStore& operator=(const ResultStore&) = delete;
    ~ResultStore();

    /// The schema version this build writes and reads.
    static int latest_schema_version();
    /// The file's schema version (PRAGMA user_version).
    int schema_version();
    const std::string& path() const;  ///< As given to open().
    OpenMode mode() const;
    /// The folder of the store file, canonical (absolute, symlinks resolved): stored paths
    /// are relative to it, so a store named through a link stores and finds the same rows.
    const std::string& directory() const;

    /// The id of experiment `name`, created with the YAML when new. An existing experiment
    /// keeps its first YAML (each run stores its own resolved config).
    std::int64_t get_or_create_experiment(const std::string& name, const std::string& yaml_path,
                                          const std::string& yaml_text);
    /// Inserts the run, or updates every column of the run with the same (experiment_id,
    /// name); returns its id. Throws for an unknown kind or status or an empty name.
    std::int64_t upsert_run(const RunRecord& run);
    /// Sets the status and error_message (= `error`). "running" sets start_time when it is
    /// empty and clears end_time; finished, failed and stopped set end_time to now.
    void set_run_status(std::int64_t run_id, const std::string& status,
                        const std::string& error = "");
    /// Records the last step the run reached.
    void set_run_step(std::int64_t run_id, std::int64_t step);
    /// Records the identity of a run stored before schema 5 (RunRecord::identity).
    void set_run_identity(std::int64_t run_id, const std::string& identity,
                          const std::string& fingerprint, const std::string& cell);
    /// Adds or replaces (by key) the run's params.
    void add_params(std::int64_t run_id, const std::map<std::string, std::string>& params);
    /// Adds the points in one transaction; a point at an existing (key, step) replaces it.
    void add_metrics(std::int64_t run_id, const std::vector<MetricPoint>& points);
    /// Deletes the run's points with step > `step`, of every key, for a resume from the
    /// checkpoint at `step` after a kill. Returns how many were deleted.
    std::int64_t delete_metrics_after(std::int64_t run_id, std::int64_t step);
    /// Adds the score, replacing the one with the same (run_id, task, split, metric).
    void add_glue_result(const GlueResultRecord& result);
    /// Stores the run's predictions on set.split, replacing any earlier ones of that split,
    /// in one transaction. Throws StoreError when gold and predicted differ in length, or
    /// when ids is neither empty nor as long as predicted.
    void set_predictions(const PredictionSet& set);
    /// Adds the checkpoint, replacing the one with the same (run_id, step).
    void add_checkpoint(const CheckpointRecord& checkpoint);
    /// Adds the artifact, replacing the one with the same (run_id, path).
    void add_artifact(const ArtifactRecord& artifact);
    /// add_artifact for each, all in one transaction: a reader sees all of them or none.
    void add_artifacts(const std::vector<ArtifactRecord>& artifacts);
    /// One output of a run recorded whole, in one transaction: the run's artifacts under the
    /// folder `replace_under` (none when empty) deleted, `artifacts` added and `metrics` added
    /// (the properties an analysis derives from its files). A process killed before the commit
    /// leaves none of it, so an output is never recorded without its metrics.
    void record_output(std::int64_t run_id, const std::string& replace_under,
                       const std::vector<ArtifactRecord>& artifacts,
                       const std::vector<MetricPoint>& metrics);

    /// Claims job `job` of the experiment for `owner`, in one BEGIN IMMEDIATE transaction:
    /// refused (kFinished) when its run is finished, refused (kHeld) while another owner
    /// holds a live claim (claim_health), else taken: a free or released job, a stale claim,
    /// a claim of a gone owner, one handed off by options.handoff_from, or the owner's own.
    /// The new claim has heartbeat now and counts one more attempt unless handed off or the
    /// owner's own.
    ClaimResult claim_job(std::int64_t experiment_id, const std::string& job,
                          const ClaimOwner& owner, const ClaimOptions& options = {});
    /// Sets the heartbeat of every claim `owner` holds to now, in one transaction; returns
    /// those claims (a job missing from them was taken over by another runner).
    std::vector<JobClaim> heartbeat_claims(const ClaimOwner& owner);
    /// Releases the job's claim if `owner` holds it (released_at = now); false when it does
    /// not (never claimed, released, or taken over).
    bool release_claim(std::int64_t experiment_id, const std::string& job, const ClaimOwner& owner);

    /// Writes bundle.run into experiment `experiment_id` with everything it holds, in one
    /// transaction, replacing the run of that name and all of its curves, scores,
    /// predictions, checkpoints and artifacts; its parent is the run called `parent_name` in
    /// this store (none when empty or absent). The job `job` is recorded as gathered with
    /// `token` in the same transaction, and a token gathered before writes nothing: false.
    bool ingest_run(std::int64_t experiment_id, const std::string& job, const std::string& token,
                    const RunBundle& bundle, const std::string& parent_name);
    /// Whether job `job` was gathered with `token` (ingest_run).
    bool gathered(std::int64_t experiment_id, const std::string& job, const std::string& token);

    /// All experiments, oldest first.
    std::vector<ExperimentRecord> list_experiments();
    /// The experiment called `name`, if any.
    std::optional<ExperimentRecord> find_experiment(const std::string& name);
    /// The experiment's runs in insertion order.
    std::vector<RunRecord> list_runs(std::int64_t experiment_id);
    /// The run of the experiment called `name`, if any.
    std::optional<RunRecord> find_run(std::int64_t experiment_id, const std::string& name);
    /// The run with this id, if any.
    std::optional<RunRecord> get_run(std::int64_t run_id);
    /// The run's params by key.
    std::map<std::string, std::string> params(std::int64_t run_id);
    /// The curve `key` of the run by ascending step, only steps > `after_step` (a live plot
    /// polls with the last step it has).
    std::vector<MetricPoint> metrics(
        std::int64_t run_id, const std::string& key,
        std::int64_t after_step = std::numeric_limits<std::int64_t>::min());
    /// The run's metric keys, sorted.
    std::vector<std::string> metric_keys(std::int64_t run_id);
    /// The GLUE scores of every run of the experiment, with run_name and variant filled (a
    /// finetune with no variant of its own gets its parent's), by run then task/split/metric.
    std::vector<GlueResultRecord> glue_results(std::int64_t experiment_id);
    /// The predictions of every run of the experiment, by run id then split.
    std::vector<PredictionSet> predictions(std::int64_t experiment_id);
    /// The run's checkpoints by step.
    std::vector<CheckpointRecord> checkpoints(std::int64_t run_id);
    /// The run's artifacts in insertion order.
    std::vector<ArtifactRecord> artifacts(std::int64_t run_id);
    /// Everything stored of run `run_id` (ingest_run writes it into another store).
    RunBundle read_run_bundle(std::int64_t run_id);
    /// Every claim row of the experiment (held and released), by job name.
    std::vector<JobClaim> list_claims(std::int64_t experiment_id);

  private:
    struct Impl;
    explicit ResultStore(std::unique_ptr<Impl> impl);
    static ResultStore open_impl(const std::string& path, OpenMode mode,
                                 const StoreOptions& options, bool paths_from_working_directory);
    std::unique_ptr<Impl> impl_;
};

/// The forward migrations: element i is the SQL that takes schema version i to i + 1
/// (element 0 creates the version-1 schema). Never edit a shipped step; append one.
const std::vector<std::string>& schema_migrations();

/// `path` in the one form the store and the runner compare paths in: absolute, symlinks
/// resolved where the path exists (std::filesystem::weakly_canonical), normalised, with '/'.
/// Two names of one file or folder give the same text. Never throws.
std::string canonical_path(const std::string& path);

/// Now as ISO-8601 UTC with milliseconds, "2024-05-01T12:34:56.789Z".
std::string utc_now_iso8601();

/// Now in seconds since the Unix epoch, for MetricPoint::wall_time.
double unix_time_now();

}  // namespace experiments
