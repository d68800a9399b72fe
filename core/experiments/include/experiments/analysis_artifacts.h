// The files of a `tupe analyze` directory as artifacts of a run in the results store: index.json
// names every file it wrote (matrices, figures, tokens), so the store records each with its
// kind, path, size, hash and the index's description. Used by `tupe analyze --db` and by the
// runner's analysis step (experiment.h, AnalysisSpec).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experiments/result_store.h"

namespace experiments {

/// "sha256:" and 64 lower-case hex digits: SHA-256 (engine/sha256.h) of the file's bytes, read
/// in chunks. Throws engine::InputError naming the file when it cannot be read.
std::string file_hash(const std::string& path);

/// Whether the file at `path` still has the hash `stored`, in the algorithm `stored` names:
/// "sha256:" (file_hash) or "fnv1a64:" (FNV-1a 64 bit, what stores written before SHA-256
/// hold). False for an empty or unknown hash. Throws engine::InputError when the file cannot be
/// read.
bool file_hash_matches(const std::string& path, const std::string& stored);

/// The artifacts of the analysis directory `dir` for run_id: dir/index.json itself and every
/// file it lists, then the same for dir/compare/ when it has an index.json (a --compare run).
/// path = dir/file as given; kind = "analysis-" + the extension without its dot ("analysis-npy",
/// "-csv", "-png", "-txt", "-json"); description = the index's description, with "layer L" and
/// "head H" appended when the entry has them; size and hash (file_hash) read from the file.
/// Throws engine::InputError naming index.json when it is missing or malformed or lists a file
/// that does not exist.
std::vector<ArtifactRecord> analysis_artifacts(std::int64_t run_id, const std::string& dir);

/// analysis_artifacts(run_id, dir), recorded in one transaction (ResultStore::add_artifacts);
/// returns what was recorded. A rerun replaces the rows of the same paths.
std::vector<ArtifactRecord> record_analysis_artifacts(ResultStore& store, std::int64_t run_id,
                                                      const std::string& dir);

/// The id of run `run` of experiment `experiment` in `store`. Throws engine::InputError naming
/// the database and listing the names it has when either is missing.
std::int64_t find_run_id(ResultStore& store, const std::string& experiment, const std::string& run);

}  // namespace experiments
