// Analysis directories recorded in the results store (see analysis_artifacts.h): index.json
// read with its schema (analysis/analysis_index.h), each listed file measured and hashed, all rows
// in one transaction.
#include "experiments/analysis_artifacts.h"

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "analysis/analysis_index.h"
#include "engine/errors.h"
#include "engine/sha256.h"

namespace experiments {

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw engine::InputError(path.string(), "cannot open");
    std::ostringstream os;
    os << in.rdbuf();
    if (in.bad()) throw engine::InputError(path.string(), "read failed");
    return os.str();
}

ArtifactRecord artifact_for(std::int64_t run_id, const fs::path& path,
                            const std::string& description) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) throw engine::InputError(path.string(), "cannot read its size: " + ec.message());
    ArtifactRecord a;
    a.run_id = run_id;
    std::string ext = path.extension().string();
    a.kind = "analysis-" + (ext.empty() ? std::string("file") : ext.substr(1));
    a.path = path.string();
    a.size = static_cast<std::int64_t>(size);
    a.hash = file_hash(path.string());
    a.description = description;
    return a;
}

/// dir/index.json and the files it lists, appended to `out`.
void add_directory(std::int64_t run_id, const fs::path& dir, std::vector<ArtifactRecord>& out) {
    const fs::path index_path = dir / "index.json";
    std::error_code ec;
    if (!fs::is_regular_file(index_path, ec))
        throw engine::InputError(index_path.string(), "missing: not a `tupe analyze` directory");
    // The schema of index.json is analysis/analysis_index.h's (the writer's own).
    const analysis::AnalysisIndex index =
        analysis::parse_index_json(read_all(index_path), index_path.string());
    if (index.files.empty()) throw engine::InputError(index_path.string(), "lists no files");
    out.push_back(artifact_for(run_id, index_path,
                               "index of the analysis of " +
                                   (index.model.empty() ? "a model" : index.model) +
                                   ": every file with what it holds, layer, head, shape and "
                                   "statistics"));
    for (const auto& entry : index.files) {
        if (entry.file.empty())
            throw engine::InputError(index_path.string(), "a \"files\" entry has no \"file\"");
        const fs::path file = dir / entry.file;
        if (!fs::is_regular_file(file, ec))
            throw engine::InputError(index_path.string(),
                                     "lists " + entry.file + ", which does not exist");
        std::string description = entry.description;
        if (entry.layer >= 0) description += "; layer " + std::to_string(entry.layer);
        if (entry.head >= 0) description += "; head " + std::to_string(entry.head);
        out.push_back(artifact_for(run_id, file, description));
    }
}

constexpr const char* kSha256Prefix = "sha256:";
constexpr const char* kFnv1a64Prefix = "fnv1a64:";

// The hash file_hash wrote before SHA-256: FNV-1a (64 bit), kept so older stores still verify.
std::string fnv1a64_file_hash(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw engine::InputError(path, "cannot open to hash");
    std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64-bit offset basis
    std::vector<char> buf(1 << 16);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        const auto n = in.gcount();
        for (std::streamsize i = 0; i < n; ++i) {
            h ^= static_cast<unsigned char>(buf[static_cast<std::size_t>(i)]);
            h *= 0x100000001b3ULL;  // FNV prime
        }
    }
    if (in.bad()) throw engine::InputError(path, "read failed while hashing");
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016" PRIx64, h);
    return std::string(kFnv1a64Prefix) + hex;
}

}  // namespace

std::string file_hash(const std::string& path) {
    return std::string(kSha256Prefix) + engine::sha256_file_hex(path);
}

bool file_hash_matches(const std::string& path, const std::string& stored) {
    if (stored.rfind(kFnv1a64Prefix, 0) == 0) return fnv1a64_file_hash(path) == stored;
    if (stored.rfind(kSha256Prefix, 0) == 0) return file_hash(path) == stored;
    return false;
}

std::vector<ArtifactRecord> analysis_artifacts(std::int64_t run_id, const std::string& dir) {
    std::vector<ArtifactRecord> out;
    add_directory(run_id, fs::path(dir), out);
    std::error_code ec;
    if (fs::is_regular_file(fs::path(dir) / "compare" / "index.json", ec))
        add_directory(run_id, fs::path(dir) / "compare", out);
    return out;
}

std::vector<ArtifactRecord> record_analysis_artifacts(ResultStore& store, std::int64_t run_id,
                                                      const std::string& dir) {
    auto artifacts = analysis_artifacts(run_id, dir);
    store.add_artifacts(artifacts);
    return artifacts;
}

std::int64_t find_run_id(ResultStore& store, const std::string& experiment,
                         const std::string& run) {
    auto e = store.find_experiment(experiment);
    if (!e) {
        std::string names;
        for (const auto& x : store.list_experiments())
            names += (names.empty() ? "" : ", ") + x.name;
        throw engine::InputError(store.path(), "no experiment named '" + experiment + "' (has: " +
                                                   (names.empty() ? "none" : names) + ")");
    }
    auto r = store.find_run(e->id, run);
    if (!r) {
        std::string names;
        for (const auto& x : store.list_runs(e->id))
            if (x.kind == "pretrain") names += (names.empty() ? "" : ", ") + x.name;
        throw engine::InputError(store.path(),
                                 "experiment '" + experiment + "' has no run named '" + run +
                                     "' (pretrain runs: " + (names.empty() ? "none" : names) + ")");
    }
    return r->id;
}

}  // namespace experiments
