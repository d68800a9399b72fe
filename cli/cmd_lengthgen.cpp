// `tupe lengthgen STUDY.yaml`: length generalisation in an encoder (Ruoss et al., ACL 2023),
// reproduced on the Chomsky-hierarchy classification tasks (analysis/chomsky_tasks.h). Every
// (task, preset, randomized, seed) of the study trains from scratch and is tested at every test
// length (experiments/lengthgen.h); each finished run appends one line to DIR/results.jsonl, so
// a killed study resumes where it stopped. Then the summary over seeds (mean and 95% t-interval
// at each length, at the training lengths and beyond, with the chance level) on stdout and as
// DIR/lengthgen.json, .csv and .png.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "analysis/text_format.h"
#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/errors.h"
#include "experiments/build_info.h"
#include "experiments/lengthgen.h"
#include "number_cells.h"
#if TUPE_WITH_QT
#include "plotting/plotting.h"
#endif

namespace cli {

namespace fs = std::filesystem;

namespace {

std::string scheme_label(const experiments::LengthgenCell& c) {
    return c.preset + (c.randomized ? " +rand" : "") +
           (c.random_test_positions ? ", random test positions" : "");
}

std::string pct(double x) { return std::isfinite(x) ? analysis::fixed_number(x, 1) : "-"; }

std::string with_interval(double m, double lo, double hi) {
    if (!std::isfinite(m)) return "-";
    return pct(m) + " [" + pct(lo) + ", " + pct(hi) + "]";
}

std::string render_lengthgen_table(const experiments::LengthgenStudy& s,
                                   const std::vector<experiments::LengthgenCell>& cells) {
    std::vector<std::string> header = {"task", "scheme", "seeds"};
    for (int64_t L : s.test_lengths) header.push_back(std::to_string(L));
    const std::string Lt = std::to_string(s.train_max_length);
    header.insert(header.end(), {"<= " + Lt, "> " + Lt, "chance"});
    std::vector<std::vector<std::string>> rows = {header};
    for (const auto& c : cells) {
        std::vector<std::string> row = {c.task, scheme_label(c), std::to_string(c.seeds)};
        for (double m : c.mean) row.push_back(pct(m));
        row.push_back(with_interval(c.in_mean, c.in_lo, c.in_hi));
        row.push_back(with_interval(c.out_mean, c.out_lo, c.out_hi));
        row.push_back(pct(c.chance));
        rows.push_back(row);
    }
    std::ostringstream os;
    os << format_table(rows) << "accuracy (%) on " << s.test_examples
       << " test inputs per length, mean over seeds; "
       << "<= " << Lt << " / > " << Lt
       << ": the lengths at / beyond training averaged per seed, mean [95% t-interval]; trained "
          "on lengths "
       << s.train_min_length << "-" << s.train_max_length
       << "; chance: 100 / classes; +rand: randomized positions below "
       << s.randomized_positions_max
       << " in training, tested at 0..T-1 and (Ruoss et al.'s evaluation) at random positions\n";
    return os.str();
}

nlohmann::json cell_json(const experiments::LengthgenCell& c) {
    nlohmann::json j = {{"task", c.task},
                        {"preset", c.preset},
                        {"randomized", c.randomized},
                        {"random_test_positions", c.random_test_positions},
                        {"seeds", c.seeds},
                        {"chance", c.chance},
                        {"in_mean", number_or_null(c.in_mean)},
                        {"in_ci", {number_or_null(c.in_lo), number_or_null(c.in_hi)}},
                        {"beyond_mean", number_or_null(c.out_mean)},
                        {"beyond_ci", {number_or_null(c.out_lo), number_or_null(c.out_hi)}}};
    nlohmann::json by_length = nlohmann::json::array();
    for (size_t k = 0; k < c.mean.size(); ++k)
        by_length.push_back(
            {number_or_null(c.mean[k]), number_or_null(c.lo[k]), number_or_null(c.hi[k])});
    j["accuracy_mean_lo_hi"] = by_length;
    return j;
}

std::string render_lengthgen_json(const experiments::LengthgenStudy& s,
                                  const std::vector<experiments::LengthgenCell>& cells,
                                  double seconds) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& c : cells) list.push_back(cell_json(c));
    nlohmann::json j = {{"study", s.name},
                        {"git_commit", experiments::git_commit()},
                        {"train_lengths", {s.train_min_length, s.train_max_length}},
                        {"test_lengths", s.test_lengths},
                        {"test_examples", s.test_examples},
                        {"randomized_positions_max", s.randomized_positions_max},
                        {"run_seconds", seconds},
                        {"cells", list}};
    return j.dump(2) + "\n";
}

std::string render_lengthgen_csv(const experiments::LengthgenStudy& s,
                                 const std::vector<experiments::LengthgenCell>& cells) {
    std::ostringstream os;
    os << "task,preset,randomized,random_test_positions,seeds,length,in_training,mean,ci_lo,"
          "ci_hi,chance\n";
    for (const auto& c : cells)
        for (size_t k = 0; k < s.test_lengths.size(); ++k)
            os << c.task << "," << c.preset << "," << (c.randomized ? "true" : "false") << ","
               << (c.random_test_positions ? "true" : "false") << "," << c.seeds << ","
               << s.test_lengths[k] << ","
               << (s.test_lengths[k] <= s.train_max_length ? "true" : "false") << ","
               << analysis::exact_number(c.mean[k]) << "," << analysis::exact_number(c.lo[k]) << ","
               << analysis::exact_number(c.hi[k]) << "," << analysis::exact_number(c.chance)
               << "\n";
    return os.str();
}

#if TUPE_WITH_QT
/// lengthgen.png: one panel per (task, preset), accuracy against test length: plain, randomized
/// (tested at 0..T-1) and randomized tested at random positions, each with its 95% band over
/// seeds; chance dashed and the longest training length dotted.
void save_lengthgen_figure(const experiments::LengthgenStudy& s,
                           const std::vector<experiments::LengthgenCell>& cells,
                           const fs::path& path) {
    plotting::OffscreenSession session;
    std::vector<plotting::LinePlot> panels;
    const double x0 = static_cast<double>(s.test_lengths.front()),
                 x1 = static_cast<double>(s.test_lengths.back());
    for (const auto& task : s.tasks)
        for (const auto& preset : s.presets) {
            plotting::LinePlot p;
            p.title = task + ", " + preset + " (trained on lengths " +
                      std::to_string(s.train_min_length) + "-" +
                      std::to_string(s.train_max_length) + ")";
            p.x_label = "test length (symbols)";
            p.y_label = "accuracy (%)";
            p.y_min = 0, p.y_max = 100;
            double chance = 0;
            for (const auto& c : cells) {
                if (c.task != task || c.preset != preset) continue;
                chance = c.chance;
                plotting::Series line;
                // Short names: the legend shares a panel's width with four others.
                line.name = !c.randomized             ? "plain"
                            : c.random_test_positions ? "rand, random pos."
                                                      : "rand, 0..T-1";
                line.markers = true;
                for (size_t k = 0; k < c.mean.size(); ++k) {
                    line.x.push_back(static_cast<double>(s.test_lengths[k]));
                    line.y.push_back(c.mean[k]);
                    line.band_lo.push_back(std::clamp(c.lo[k], 0.0, 100.0));
                    line.band_hi.push_back(std::clamp(c.hi[k], 0.0, 100.0));
                }
                p.series.push_back(line);
            }
            if (p.series.empty()) continue;
            plotting::Series chance_line, train_edge;
            chance_line.name = "chance";
            chance_line.dashed = true;
            chance_line.x = {x0, x1}, chance_line.y = {chance, chance};
            train_edge.name = "train max";
            train_edge.dashed = train_edge.dotted = true;
            train_edge.x = {double(s.train_max_length), double(s.train_max_length)};
            train_edge.y = {0, 100};
            p.series.push_back(chance_line);
            p.series.push_back(train_edge);
            panels.push_back(p);
        }
    if (panels.empty()) return;
    plotting::save_line_plot_grid_png(panels, panels.size() > 2 ? 3 : int(panels.size()),
                                      path.string(), 520, 330);
    std::cerr << "wrote " << path.string() << "\n";
}
#endif

}  // namespace

int cmd_lengthgen(const Argv& argv) {
    Args args(argv, command_spec("lengthgen"));
    if (args.positionals().size() != 1) throw UsageError("expected one STUDY.yaml");
    const std::string format = args.get("format");
    const auto study = experiments::load_lengthgen_study(args.positionals()[0]);
    const fs::path out = args.get("out", "runs/lengthgen/" + study.name);
    long long shard = 0, shards = 1;
    if (args.has("shard")) {
        const std::string v = args.get("shard");
        if (std::sscanf(v.c_str(), "%lld/%lld", &shard, &shards) != 2 || shards < 1 || shard < 0 ||
            shard >= shards)
            throw UsageError("--shard must be K/N with 0 <= K < N, got '" + v + "'");
    }
    create_output_dir(out.string());
    const std::string results_path = (out / "results.jsonl").string();

    const auto jobs = experiments::lengthgen_jobs(study);
    // A line is a job's result only when its identity is the job's (lengthgen_identity): one
    // trained with another lr, example count, model, ... is another result, and the study
    // stops in one line naming what changed rather than count it as done.
    std::map<std::string, std::string> identity;  // job key -> identity now
    for (const auto& job : jobs)
        identity[job.key()] = experiments::lengthgen_identity(study, job).text();
    std::set<std::string> done;
    std::map<std::string, std::string> changed;  // job key -> changes
    std::vector<experiments::LengthgenResult> results;
    for (auto& r : experiments::read_lengthgen_results(results_path)) {
        const auto it = identity.find(r.job.key());
        if (it == identity.end()) continue;  // another study's job in the same folder
        if (r.identity != it->second) {
            std::string what;
            for (const auto& c : r.identity.empty()
                                     ? std::vector<std::string>{"written without its settings"}
                                     : experiments::identity_changes(r.identity, it->second))
                what += (what.empty() ? "" : "; ") + c;
            changed.emplace(r.job.key(), what);
            continue;
        }
        done.insert(r.job.key());
        changed.erase(r.job.key());
        results.push_back(std::move(r));
    }
    for (const auto& key : done) changed.erase(key);
    if (!changed.empty())
        throw engine::InputError(
            results_path,
            std::to_string(changed.size()) +
                " of the study's runs were trained with other "
                "settings (" +
                changed.begin()->first + ": " + changed.begin()->second +
                (changed.size() > 1 ? "; and " + std::to_string(changed.size() - 1) + " more"
                                    : "") +
                "); give the study another --out, or delete those lines to train them again");
    std::vector<experiments::LengthgenJob> todo;
    for (size_t i = 0; i < jobs.size(); ++i)
        if (static_cast<long long>(i) % shards == shard && !done.count(jobs[i].key()))
            todo.push_back(jobs[i]);
    std::cerr << "lengthgen " << study.name << ": " << jobs.size() << " runs, " << done.size()
              << " already in " << results_path << ", " << todo.size() << " to train"
              << (shards > 1 ? " in shard " + std::to_string(shard) + "/" + std::to_string(shards)
                             : "")
              << (args.has("no-train") ? " (--no-train: none)" : "") << "\n";

    const auto start = std::chrono::steady_clock::now();
    if (!args.has("no-train")) {
        torch::set_num_threads(static_cast<int>(study.threads));
        StopOnSignal stop_on_signal;
        experiments::LengthgenCallbacks cb;
        cb.stop = stop_on_signal.flag();
        for (size_t i = 0; i < todo.size(); ++i) {
            const auto& job = todo[i];
            auto r = experiments::run_lengthgen_job(study, job, cb);
            r.identity = identity.at(job.key());
            experiments::append_lengthgen_result(results_path, r);
            results.push_back(r);
            double in = 0, beyond = 0;
            int n_in = 0, n_beyond = 0;
            for (size_t k = 0; k < r.lengths.size(); ++k) {
                if (r.lengths[k] <= study.train_max_length)
                    in += r.accuracy[k], ++n_in;
                else
                    beyond += r.accuracy[k], ++n_beyond;
            }
            const double elapsed =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            std::cerr << "lengthgen [" << (i + 1) << "/" << todo.size() << "] " << job.key()
                      << ": accuracy " << pct(n_in ? in / n_in : NAN)
                      << "% at <= " << study.train_max_length << ", "
                      << pct(n_beyond ? beyond / n_beyond : NAN) << "% beyond"
                      << (r.accuracy_random_positions.empty()
                              ? std::string()
                              : " (random test positions: " +
                                    pct(r.accuracy_random_positions.back()) + "% at " +
                                    std::to_string(r.lengths.back()) + ")")
                      << "; train loss " << analysis::fixed_number(r.train_loss, 3) << ", "
                      << format_duration(r.seconds) << "; eta "
                      << format_duration(elapsed / double(i + 1) * double(todo.size() - i - 1))
                      << std::endl;
        }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    // Every shard's lines as they are now, the study's own only.
    results.clear();
    for (auto& r : experiments::read_lengthgen_results(results_path)) {
        const auto it = identity.find(r.job.key());
        if (it != identity.end() && it->second == r.identity) results.push_back(std::move(r));
    }
    const auto cells = experiments::summarize_lengthgen(study, results);
    if (format == "json")
        std::cout << render_lengthgen_json(study, cells, seconds);
    else if (format == "csv")
        std::cout << render_lengthgen_csv(study, cells);
    else
        std::cout << render_lengthgen_table(study, cells);
    write_report_files(out.string(), "lengthgen", render_lengthgen_json(study, cells, seconds),
                       render_lengthgen_csv(study, cells));
#if TUPE_WITH_QT
    save_lengthgen_figure(study, cells, out / "lengthgen.png");
#endif
    return 0;
}

}  // namespace cli
