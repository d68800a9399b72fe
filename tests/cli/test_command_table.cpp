// The command line's one source of options (cli/command_table.h): every option of every command
// parses, shows in `--help` with its default and completes in bash; the parser refuses what the
// table does not allow; and the machine-readable faces (`info --format json`, `status --format
// json`, `run --progress jsonl`) print what programs can read, run as a user would.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "command_table.h"
#include "curves_plot.h"
#include "json_progress.h"
#include "support/test_support.h"

namespace fs = std::filesystem;
using cli::Args;
using cli::command_spec;
using cli::UsageError;

namespace {

// A value the option accepts: its first choice, else something of the placeholder's kind.
std::string sample_value(const cli::OptionSpec& o) {
    if (!o.choices.empty()) return o.choices.front();
    if (o.min && *o.min > 1) return std::to_string(*o.min);
    return "1";
}

// The required options of `spec` with sample values, except `skip`.
std::vector<std::string> required_args(const cli::CommandSpec& spec, const std::string& skip = "") {
    std::vector<std::string> argv;
    for (const auto& o : spec.options)
        if (o.required && o.name != skip) argv.insert(argv.end(), {"--" + o.name, sample_value(o)});
    return argv;
}

std::string usage_error(const std::vector<std::string>& argv, const cli::CommandSpec& spec) {
    try {
        Args args(argv, spec);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(CommandTable, EveryOptionParsesAndShowsInTheHelpWithItsDefault) {
    std::set<std::string> names;
    int options = 0;
    for (const auto& spec : cli::command_table()) {
        EXPECT_TRUE(names.insert(spec.name).second) << "two commands named " << spec.name;
        EXPECT_NE(spec.run, nullptr) << spec.name;
        const std::string help = cli::help_text(spec);
        const std::string usage = cli::usage_line(spec);
        std::set<std::string> seen;
        for (const auto& o : spec.options) {
            ++options;
            EXPECT_TRUE(seen.insert(o.name).second) << spec.name << ": --" << o.name << " twice";
            EXPECT_FALSE(o.help.empty()) << spec.name << " --" << o.name << " has no meaning";
            auto argv = required_args(spec, o.name);
            argv.push_back("--" + o.name);
            if (!o.value.empty()) argv.push_back(sample_value(o));
            Args args(argv, spec);
            EXPECT_TRUE(args.has(o.name)) << spec.name << " --" << o.name;
            // The help line of the option: its name, then its meaning and default.
            const std::string head = "  --" + o.name + (o.value.empty() ? "" : " " + o.value);
            const auto at = help.find(head);
            ASSERT_NE(at, std::string::npos) << spec.name << " --help lacks --" << o.name << "\n"
                                             << help;
            const std::string line = help.substr(at, help.find("\n  --", at + 1) - at);
            EXPECT_NE(line.find(o.help.substr(0, 20)), std::string::npos) << line;
            if (o.required)
                EXPECT_NE(line.find("[required]"), std::string::npos) << line;
            else if (!o.default_note.empty())
                EXPECT_NE(line.find("[default: " + o.default_note + "]"), std::string::npos)
                    << line;
            else if (!o.fallback.empty())
                EXPECT_NE(line.find("[default: " + o.fallback + "]"), std::string::npos) << line;
            EXPECT_NE(usage.find("--" + o.name), std::string::npos) << usage;
        }
    }
    EXPECT_GT(options, 80);  // the table is the whole command line, not a sample of it
    for (const char* c : {"run", "status", "info", "submit", "analyze", "bench", "completion"})
        EXPECT_TRUE(names.count(c)) << c;
    // The flags the issue asked to be named.
    EXPECT_NE(cli::usage_line(command_spec("run")).find("[--quiet]"), std::string::npos);
    EXPECT_NE(cli::usage_line(command_spec("run")).find("[--progress bar|jsonl]"),
              std::string::npos);
    EXPECT_NE(cli::usage_line(command_spec("info")).find("[--format table|json]"),
              std::string::npos);
    EXPECT_NE(cli::usage_line(command_spec("status")).find("[--format table|json]"),
              std::string::npos);
}

TEST(CommandTable, DefaultsReadByTheCommandsAreTheOnesTheHelpShows) {
    const auto& spec = command_spec("extrapolate");
    Args args({"CKPT", "--corpus", "c.txt"}, spec);
    EXPECT_EQ(args.get("lengths"), "1,1.5,2,4");
    EXPECT_EQ(args.get_int("max-tokens"), 60000);
    EXPECT_EQ(args.get("format"), "table");
    EXPECT_NE(cli::help_text(spec).find("[default: 60000]"), std::string::npos);
    Args given({"CKPT", "--corpus", "c.txt", "--max-tokens=123"}, spec);
    EXPECT_EQ(given.get_int("max-tokens"), 123);
    EXPECT_EQ(given.positionals(), std::vector<std::string>{"CKPT"});
    Args report({}, command_spec("report"));
    EXPECT_EQ(report.get("db"), "results/tupe.sqlite");
    // An option the table lacks is a programming error, not a silent empty default.
    EXPECT_THROW(report.get("no-such-option"), std::logic_error);
}

TEST(CommandTable, RefusesUnknownOptionsValuesOutsideTheChoicesAndMissingRequired) {
    const auto& run = command_spec("run");
    EXPECT_NE(usage_error({"x.yaml", "--jbos", "2"}, run).find("unknown option --jbos"),
              std::string::npos);
    EXPECT_NE(usage_error({"x.yaml", "--jbos", "2"}, run).find("`tupe run --help`"),
              std::string::npos);
    EXPECT_EQ(usage_error({"x.yaml", "--progress", "xml"}, run),
              "--progress: expected bar or jsonl, got 'xml'");
    EXPECT_EQ(usage_error({"x.yaml", "--quiet=1"}, run), "--quiet takes no value");
    EXPECT_EQ(usage_error({"x.yaml", "--jobs"}, run), "--jobs needs a value");
    EXPECT_EQ(usage_error({"x.yaml", "--jobs", "1", "--jobs", "2"}, run), "--jobs given twice");
    EXPECT_EQ(usage_error({"x.yaml", "--set", "a=1", "--set", "b=2"}, run), "");
    EXPECT_EQ(usage_error({"--dev", "d.tsv", "--predictions", "p.tsv"}, command_spec("score")),
              "missing --task");
    Args bad({"x.yaml", "--nproc-per-node", "two"}, run);
    EXPECT_THROW(bad.get_int("nproc-per-node"), UsageError);
}

TEST(CommandTable, RefusesIntegersBelowTheOptionsMinimumWhileParsing) {
    const auto& run = command_spec("run");
    EXPECT_EQ(usage_error({"x.yaml", "--jobs", "-1"}, run),
              "--jobs: expected an integer >= 0, got '-1'");
    EXPECT_EQ(usage_error({"x.yaml", "--threads=-2"}, run),
              "--threads: expected an integer >= 0, got '-2'");
    EXPECT_EQ(usage_error({"x.yaml", "--jobs", "many"}, run),
              "--jobs: expected an integer >= 0, got 'many'");
    EXPECT_EQ(Args({"x.yaml", "--jobs", "0"}, run).get_int("jobs"), 0);
    const auto& vocab = command_spec("build-vocab");
    EXPECT_EQ(usage_error({"--corpus", "c.txt", "--out", "v.txt", "--size", "3"}, vocab),
              "--size: expected an integer >= 10, got '3'");
    EXPECT_EQ(Args({"--corpus", "c.txt", "--out", "v.txt", "--size", "10"}, vocab).get_int("size"),
              10);
    EXPECT_NE(cli::help_text(vocab).find("(>= 10) [default: 8000]"), std::string::npos)
        << cli::help_text(vocab);
}

#if TUPE_WITH_QT
TEST(CurvesPlot, DrawsStepZeroOnALinearAxis) {
    // Two seeds of one variant and another variant; step 0 is the untrained model.
    const cli::CurveTable table = {{0, {{0, 9.0}, {1, 9.5}, {2, 9.25}}},
                                   {50, {{0, 6.0}, {1, 6.5}, {2, 5.5}}},
                                   {100, {{0, 5.0}, {1, 5.5}, {2, 4.5}}}};
    const auto plot =
        cli::curves_plot("loss", {"bert-a@seed1", "bert-a@seed2", "tupe-a"},
                         {"/nonexistent/a", "/nonexistent/b", "/nonexistent/c"}, table);
    ASSERT_EQ(plot.series.size(), 2u);  // no floor.txt: no reference lines
    EXPECT_EQ(plot.series[0].name, "bert-a (2 seeds)");
    EXPECT_EQ(plot.series[0].x, (std::vector<double>{0, 50, 100}));
    EXPECT_EQ(plot.series[0].y, (std::vector<double>{9.25, 6.25, 5.25}));
    EXPECT_EQ(plot.series[0].band_lo.front(), 9.0);
    EXPECT_EQ(plot.series[1].x, (std::vector<double>{0, 50, 100}));
    EXPECT_EQ(plot.series[1].y.front(), 9.25);
}
#endif

// A step slower than the heartbeat (BERT-Base on a CPU) still shows the run alive: the last
// progress comes again, marked, until the summary ends the stream. Bounds are generous: the
// heartbeat is 50 ms, and the test waits up to 10 s for two of them.
TEST(JsonProgress, RepeatsTheLastProgressWhileAStepIsSlowAndStopsAtTheSummary) {
    std::ostringstream out;
    auto lines = [&] {
        std::vector<nlohmann::json> v;
        std::istringstream in(out.str());
        for (std::string l; std::getline(in, l);) v.push_back(nlohmann::json::parse(l));
        return v;
    };
    {
        cli::JsonProgress progress(true, out, std::chrono::milliseconds(50));
        experiments::PlanProgress p;
        p.total = 3;
        p.current = "bert-a";
        p.job_fraction = 0.25;
        p.job_status = "step 5/20";
        progress.progress(p);
        for (int i = 0; i < 1000; ++i) {
            int beats = 0;
            for (const auto& e : lines()) beats += e.value("heartbeat", false) ? 1 : 0;
            if (beats >= 2) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        progress.emit({{"event", "summary"}, {"finished", 3}});
        const size_t at_summary = lines().size();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        EXPECT_EQ(lines().size(), at_summary);  // nothing after the summary
        progress.progress(p);
        EXPECT_EQ(lines().size(), at_summary);
    }
    const auto events = lines();
    ASSERT_GE(events.size(), 5u) << out.str();
    EXPECT_EQ(events[0].at("event"), "job");
    EXPECT_EQ(events[0].at("index"), 1);
    EXPECT_EQ(events[1].at("event"), "progress");
    EXPECT_FALSE(events[1].contains("heartbeat"));
    int beats = 0;
    double elapsed = -1;
    for (size_t i = 2; i + 1 < events.size(); ++i) {
        EXPECT_EQ(events[i].at("heartbeat"), true);
        EXPECT_EQ(events[i].at("fraction"), 0.25);
        EXPECT_EQ(events[i].at("status"), "step 5/20");
        EXPECT_GE(events[i].at("job_elapsed_s").get<double>(), elapsed);
        elapsed = events[i].at("job_elapsed_s").get<double>();
        ++beats;
    }
    EXPECT_GE(beats, 2);
    EXPECT_EQ(events.back().at("event"), "summary");
}

#ifdef TUPE_CLI
namespace {

class CliFacesTest : public test_support::TempDirTest {
  protected:
    CliFacesTest() : TempDirTest(test_support::per_test_name("tupe_cli_faces")) {}
    test_support::CliResult tupe(const std::string& args) const {
        return test_support::run_tupe(args, dir_ / "stderr.txt");
    }
    // Completions bash offers for the words (the last one is being typed).
    std::vector<std::string> complete(const fs::path& script,
                                      const std::vector<std::string>& words) const {
        std::string array;
        for (const auto& w : words) array += test_support::quote(w) + " ";
        const std::string cmd = "source " + test_support::quote(script.string()) +
                                "; COMP_WORDS=(" + array +
                                "); COMP_CWORD=" + std::to_string(words.size() - 1) +
                                "; _tupe; printf '%s\\n' \"${COMPREPLY[@]}\"";
        auto r = test_support::run_cli("/bin/bash", "-c " + test_support::quote(cmd),
                                       dir_ / "stderr.txt");
        EXPECT_EQ(r.status, 0) << r.err;
        std::vector<std::string> out;
        std::istringstream lines(r.out);
        for (std::string l; std::getline(lines, l);)
            if (!l.empty()) out.push_back(l);
        return out;
    }
};

}  // namespace

TEST_F(CliFacesTest, HelpOfEveryCommandListsItsOptions) {
    for (const auto& spec : cli::command_table()) {
        auto r = tupe(spec.name + " --help");
        ASSERT_EQ(r.status, 0) << spec.name << ": " << r.err;
        EXPECT_EQ(r.out, cli::help_text(spec));
    }
    auto top = tupe("--help");
    EXPECT_EQ(top.status, 0);
    for (const auto& spec : cli::command_table())
        EXPECT_NE(top.out.find("  " + spec.name + " "), std::string::npos) << spec.name;
    auto bad = tupe("report --format xml");
    EXPECT_EQ(bad.status, 2);
    EXPECT_NE(bad.err.find("--format: expected table, markdown, csv, latex or json, got 'xml'"),
              std::string::npos)
        << bad.err;
    EXPECT_NE(bad.err.find("usage: tupe report [--db FILE]"), std::string::npos) << bad.err;
}

// Small inputs of the issue-27 list, each answered in one line naming what is wrong, without
// any training: tokenize input of invalid UTF-8 (a warning, not silence), a vocabulary size
// below the minimum, a negative --jobs, and a directory where a checkpoint is expected.
TEST_F(CliFacesTest, BadSmallInputsAreNamedInOneLine) {
    const fs::path vocab = dir_ / "vocab.txt";
    test_support::write_vocab(vocab, {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cat", "dog"});
    const fs::path text = test_support::write_file(dir_ / "in.txt", "cat\ndog \xff\ncat\n");
    auto tok = tupe("tokenize --vocab " + test_support::quote(vocab.string()) + " --file " +
                    test_support::quote(text.string()));
    EXPECT_EQ(tok.status, 0) << tok.err;
    EXPECT_EQ(tok.out, "cat\ndog\ncat\n");
    EXPECT_NE(tok.err.find(text.string() + ":2: invalid UTF-8 (1 line in all"), std::string::npos)
        << tok.err;

    auto size = tupe("build-vocab --corpus " + test_support::quote(text.string()) + " --out " +
                     test_support::quote((dir_ / "v.txt").string()) + " --size 3");
    EXPECT_EQ(size.status, 2);
    EXPECT_NE(size.err.find("--size: expected an integer >= 10, got '3'"), std::string::npos)
        << size.err;
    EXPECT_FALSE(fs::exists(dir_ / "v.txt"));

    auto jobs = tupe("run " + test_support::quote((dir_ / "none.yaml").string()) + " --jobs -1");
    EXPECT_EQ(jobs.status, 2);
    EXPECT_NE(jobs.err.find("--jobs: expected an integer >= 0, got '-1'"), std::string::npos)
        << jobs.err;

    const fs::path run = dir_ / "run";
    fs::create_directories(run);
    std::ofstream(run / "checkpoint.pt") << "x";
    auto info = tupe("info " + test_support::quote(run.string()));
    EXPECT_NE(info.status, 0);
    EXPECT_NE(info.err.find("is a directory, not a checkpoint file; its newest checkpoint is " +
                            (run / "checkpoint.pt").string()),
              std::string::npos)
        << info.err;
    EXPECT_EQ(info.err.find("corrupted"), std::string::npos) << info.err;
}

TEST_F(CliFacesTest, TheBuildInstallsACompletionScriptThatCompletesCommandsOptionsAndChoices) {
    // The build wrote it from the binary's own table; it must be what `completion bash` prints.
    const fs::path built = fs::path(TUPE_CLI).parent_path().parent_path() / "completion" / "tupe";
    ASSERT_TRUE(fs::exists(built)) << built;
    auto printed = tupe("completion bash");
    ASSERT_EQ(printed.status, 0) << printed.err;
    EXPECT_EQ(test_support::read_file(built), printed.out);
    EXPECT_EQ(printed.out, cli::bash_completion_script());
    auto syntax = test_support::run_cli("/bin/bash", "-n " + test_support::quote(built.string()),
                                        dir_ / "stderr.txt");
    EXPECT_EQ(syntax.status, 0) << syntax.err;

    EXPECT_EQ(complete(built, {"tupe", "sub"}), std::vector<std::string>{"submit"});
    EXPECT_EQ(complete(built, {"tupe", "run", "x.yaml", "--pro"}),
              std::vector<std::string>{"--progress"});
    EXPECT_EQ(complete(built, {"tupe", "run", "x.yaml", "--progress", ""}),
              (std::vector<std::string>{"bar", "jsonl"}));
    EXPECT_EQ(complete(built, {"tupe", "report", "--format", "l"}),
              std::vector<std::string>{"latex"});
    // Every option of a command is offered after "--".
    const auto all = complete(built, {"tupe", "analyze", "--"});
    for (const auto& o : command_spec("analyze").options)
        EXPECT_NE(std::find(all.begin(), all.end(), "--" + o.name), all.end()) << o.name;
    // A run's positional completes to experiment files.
    test_support::write_file(dir_ / "study.yaml", "name: x\n");
    test_support::write_file(dir_ / "notes.txt", "x\n");
    const auto files = complete(built, {"tupe", "run", (dir_ / "s").string()});
    EXPECT_EQ(files, std::vector<std::string>{(dir_ / "study.yaml").string()});
    auto wrong = tupe("completion zsh");
    EXPECT_EQ(wrong.status, 2);
}

TEST_F(CliFacesTest, InfoAndStatusSpeakJsonAndRunReportsJsonLines) {
    test_support::write_tiny_pretraining(dir_);
    auto pre = tupe("pretrain --config " + test_support::quote((dir_ / "tiny.yaml").string()) +
                    " --out " + test_support::quote((dir_ / "run").string()));
    ASSERT_EQ(pre.status, 0) << pre.err;
    auto info = tupe("info " + test_support::quote((dir_ / "run" / "checkpoint.pt").string()) +
                     " --format json");
    ASSERT_EQ(info.status, 0) << info.err;
    const auto j = nlohmann::json::parse(info.out);
    EXPECT_EQ(j.at("preset"), "tupe-r");
    EXPECT_EQ(j.at("step"), 3);
    EXPECT_EQ(j.at("max_position_embeddings"), 32);
    EXPECT_GT(j.at("parameters").at("total").get<long long>(), 0);
    EXPECT_TRUE(j.at("floor").is_object());

    // A one-variant study on a toy corpus (enough sentences for the built-in tasks): its plan
    // in JSON before and after `run --progress jsonl`, whose every stdout line is one event.
    const fs::path data = dir_ / "toy";
    fs::create_directories(data);
    test_support::write_toy_corpus(data, 16, 30, 7, 11);
    const fs::path study = dir_ / "study.yaml";
    test_support::write_file(
        study,
        "name: faces\nvariants: [bert-a]\nmodel: {size: tiny, max_position_embeddings: 32}\n"
        "data: {corpus: " +
            (data / "corpus.txt").string() + ", vocab: " + (data / "vocab.txt").string() +
            ", cache_dir: " + (dir_ / "cache").string() +
            ", max_seq_len: 32, validation_fraction: 0.25}\n"
            "train: {steps: 6, batch_size: 4, eval_interval: 3, checkpoint_interval: 3, "
            "log_interval: 1, threads: 1}\ncheckpoints: [1.0]\n"
            "glue: {data: builtin, tasks: [syn-cola], synthetic_train: 16, "
            "synthetic_dev: 8}\n"
            "finetune: {lrs: [1.0e-3], seeds: [1], batch_size: 8, epochs: 1, "
            "max_seq_len: 32}\n"
            "database: " +
            (dir_ / "r.sqlite").string() + "\nruns_dir: " + (dir_ / "runs").string() + "\n");
    const std::string q = test_support::quote(study.string());
    auto before = tupe("status " + q + " --format json");
    ASSERT_EQ(before.status, 0) << before.err;
    const auto s0 = nlohmann::json::parse(before.out);
    ASSERT_EQ(s0.at("jobs").size(), 2u);
    EXPECT_EQ(s0.at("jobs")[0].at("kind"), "pretrain");
    EXPECT_EQ(s0.at("counts").at("pending"), 2);

    auto run = tupe("run " + q + " --progress jsonl --threads 1");
    ASSERT_EQ(run.status, 0) << run.err;
    std::vector<nlohmann::json> events;
    std::istringstream lines(run.out);
    for (std::string l; std::getline(lines, l);) {
        ASSERT_NO_THROW(events.push_back(nlohmann::json::parse(l))) << "not JSON: " << l;
    }
    ASSERT_GE(events.size(), 4u) << run.out;
    EXPECT_EQ(events.front().at("event"), "plan");
    EXPECT_EQ(events.front().at("jobs"), 2);
    EXPECT_EQ(events.back().at("event"), "summary");
    EXPECT_EQ(events.back().at("finished"), 2);
    EXPECT_EQ(events.back().at("failed"), 0);
    std::vector<std::string> jobs;
    int progress = 0;
    long long done = 0;
    for (const auto& e : events) {
        if (e.at("event") == "job") jobs.push_back(e.at("job"));
        if (e.at("event") == "progress") {
            ++progress;
            EXPECT_GE(e.at("fraction").get<double>(), 0.0);
            EXPECT_LE(e.at("fraction").get<double>(), 1.0);
            EXPECT_GE(e.at("done").get<long long>(), done);  // jobs done never go back
            done = e.at("done").get<long long>();
            EXPECT_EQ(e.at("total"), 2);
        }
    }
    ASSERT_EQ(jobs.size(), 2u);
    EXPECT_EQ(jobs[0], "bert-a");
    EXPECT_EQ(jobs[1], "bert-a/step6/syn-cola/lr0.001/seed1");
    EXPECT_GE(progress, 2);
    EXPECT_EQ(done, 1);

    auto after = tupe("status " + q + " --format json");
    ASSERT_EQ(after.status, 0) << after.err;
    const auto s1 = nlohmann::json::parse(after.out);
    EXPECT_EQ(s1.at("counts").at("finished"), 2);
    EXPECT_EQ(s1.at("jobs")[0].at("step"), 6);
}
#endif
