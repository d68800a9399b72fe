// Argument parsing, progress bar and tables for the `tupe` command line.
#include "cli_util.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "command_table.h"
#include "engine/corpus.h"
#include "engine/errors.h"

namespace cli {

Args::Args(const std::vector<std::string>& argv, const CommandSpec& spec) : spec_(&spec) {
    auto find = [&](const std::string& n) -> const OptionSpec* {
        for (const auto& o : spec.options)
            if (o.name == n) return &o;
        return nullptr;
    };
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
            positionals_.push_back(a);
            continue;
        }
        std::string name = a.substr(2), value;
        const auto eq = name.find('=');
        const bool inline_value = eq != std::string::npos;
        if (inline_value) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
        }
        const OptionSpec* o = find(name);
        if (!o)
            throw UsageError("unknown option --" + name + " (`tupe " + spec.name +
                             " --help` lists the options)");
        if (o->value.empty()) {
            if (inline_value) throw UsageError("--" + name + " takes no value");
            values_[name].push_back("1");
            continue;
        }
        if (!inline_value) {
            if (i + 1 >= argv.size()) throw UsageError("--" + name + " needs a value");
            value = argv[++i];
        }
        if (!o->repeatable && values_.count(name)) throw UsageError("--" + name + " given twice");
        if (!o->choices.empty() &&
            std::find(o->choices.begin(), o->choices.end(), value) == o->choices.end()) {
            std::string allowed;
            for (size_t k = 0; k < o->choices.size(); ++k)
                allowed += (k == 0                       ? ""
                            : k + 1 == o->choices.size() ? " or "
                                                         : ", ") +
                           o->choices[k];
            throw UsageError("--" + name + ": expected " + allowed + ", got '" + value + "'");
        }
        // A bounded integer is checked now, before the command reads any file.
        if (o->min) parse_int(name, value);
        values_[name].push_back(value);
    }
    for (const auto& o : spec.options)
        if (o.required && !has(o.name)) throw UsageError("missing --" + o.name);
}

bool Args::has(const std::string& name) const { return values_.count(name) > 0; }

std::string Args::get(const std::string& name) const {
    auto it = values_.find(name);
    if (it != values_.end()) return it->second.back();
    for (const auto& o : spec_->options)
        if (o.name == name) return o.fallback;
    throw std::logic_error("tupe " + spec_->name + ": option --" + name +
                           " is not in the command table");
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second.back();
}

std::string Args::required(const std::string& name) const {
    if (!has(name)) throw UsageError("missing --" + name);
    return get(name);
}

long long Args::parse_int(const std::string& name, const std::string& v) const {
    std::optional<long long> min;
    for (const auto& o : spec_->options)
        if (o.name == name) min = o.min;
    const std::string expected = "--" + name + ": expected an integer" +
                                 (min ? " >= " + std::to_string(*min) : std::string()) + ", got '" +
                                 v + "'";
    long long out = 0;
    bool parsed = false;
    try {
        size_t used = 0;
        out = std::stoll(v, &used);
        parsed = used == v.size();
    } catch (const std::exception&) {
    }
    if (!parsed || (min && out < *min)) throw UsageError(expected);
    return out;
}

long long Args::get_int(const std::string& name) const { return parse_int(name, get(name)); }

long long Args::get_int(const std::string& name, long long fallback) const {
    if (!has(name)) return fallback;
    return parse_int(name, get(name));
}

std::vector<std::string> Args::all(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::string format_duration(double s) {
    char buf[32];
    if (!std::isfinite(s) || s < 0) return "?";
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%dh%02dm", int(s / 3600), int(s / 60) % 60);
    else if (s >= 60)
        std::snprintf(buf, sizeof buf, "%dm%02ds", int(s / 60), int(s) % 60);
    else
        std::snprintf(buf, sizeof buf, "%.1fs", s);
    return buf;
}

std::string format_count(double value) {
    std::string digits = std::to_string(static_cast<long long>(std::llround(value)));
    std::string out;
    int n = 0;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
        if (n && n % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
        out.insert(out.begin(), *it);
        ++n;
    }
    return out;
}

ProgressBar::ProgressBar(long long total, long long plain_every)
    : total_(std::max(1LL, total)),
      plain_every_(std::max(1LL, plain_every)),
      tty_(isatty(fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(long long done, const std::string& status) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    update(done, status, done > 0 ? elapsed / frac - elapsed : NAN);
}

void ProgressBar::update(long long done, const std::string& status, double eta) {
    const auto now = std::chrono::steady_clock::now();
    const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    std::ostringstream line;
    line << done << "/" << total_ << "  " << status << "  ETA " << format_duration(eta);
    if (tty_) {
        // Redraw at most ~10 times per second, and always at the end.
        if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
        const int width = 24, filled = static_cast<int>(frac * width);
        std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] "
                  << line.str() << "\033[K" << std::flush;
        last_draw_ = now;
        drawn_ = true;
    } else if ((done % plain_every_ == 0 && done != last_done_) || done >= total_ ||
               now - last_draw_ >= std::chrono::seconds(15)) {
        // Logs and CI: a line every plain_every updates, and at least every 15 seconds.
        std::cerr << line.str() << "\n";
        last_draw_ = now;
    }
    last_done_ = done;
}

void ProgressBar::finish() {
    if (tty_ && drawn_) std::cerr << "\n";
    drawn_ = false;
}

namespace {
std::atomic<bool> g_stop{false};
std::atomic<bool> g_warned{false};
extern "C" void set_stop_flag(int) { g_stop.store(true); }
extern "C" void set_warned_flag(int) {
    g_warned.store(true);
    g_stop.store(true);
}
}  // namespace

void catch_warning_signal() { std::signal(SIGUSR1, set_warned_flag); }
bool warning_signal_caught() { return g_warned.load(); }

StopOnSignal::StopOnSignal() {
    g_stop.store(g_warned.load());  // a warning caught before this keeps its stop
    std::signal(SIGINT, set_stop_flag);
    std::signal(SIGTERM, set_stop_flag);
}

StopOnSignal::~StopOnSignal() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
}

const std::atomic<bool>* StopOnSignal::flag() const { return &g_stop; }

std::string format_table(const std::vector<std::vector<std::string>>& rows) {
    std::vector<size_t> width;
    for (const auto& r : rows)
        for (size_t i = 0; i < r.size(); ++i) {
            if (width.size() <= i) width.push_back(0);
            width[i] = std::max(width[i], r[i].size());
        }
    std::ostringstream os;
    for (size_t k = 0; k < rows.size(); ++k) {
        for (size_t i = 0; i < rows[k].size(); ++i) {
            // Left-align the first column, right-align numbers.
            const std::string& cell = rows[k][i];
            const std::string pad(width[i] - cell.size(), ' ');
            os << (i ? "  " : "") << (i == 0 ? cell + pad : pad + cell);
        }
        os << "\n";
        if (k == 0) {
            size_t total = 0;
            for (size_t i = 0; i < width.size(); ++i) total += width[i] + (i ? 2 : 0);
            os << std::string(total, '-') << "\n";
        }
    }
    return os.str();
}

void create_output_dir(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw engine::InputError(dir, "cannot create directory: " + ec.message());
}

void write_report_files(const std::string& dir, const std::string& stem, const std::string& json,
                        const std::string& csv) {
    create_output_dir(dir);
    const auto base = std::filesystem::path(dir) / stem;
    const std::string json_path = base.string() + ".json", csv_path = base.string() + ".csv";
    write_text_file(json_path, json);
    write_text_file(csv_path, csv);
    std::cerr << "wrote " << json_path << " and " << csv_path << "\n";
}

void write_text_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) throw engine::InputError(path, "cannot write");
}

void require_corpus_file(const std::string& path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status))
        throw engine::InputError(path, "corpus file not found");
    if (std::filesystem::is_directory(status))
        throw engine::InputError(path, "corpus path is a directory");
}

engine::WordPieceTokenizer checkpoint_tokenizer(const std::string& vocab_flag,
                                                const std::string& checkpoint,
                                                const engine::PretrainConfig& config) {
    const std::string beside =
        (std::filesystem::path(checkpoint).parent_path() / "vocab.txt").string();
    const std::string path = !vocab_flag.empty()               ? vocab_flag
                             : std::filesystem::exists(beside) ? beside
                                                               : config.data.vocab;
    engine::WordPieceTokenizer tokenizer(engine::Vocab::load(path), config.data.lower_case);
    if (tokenizer.vocab().size() != config.model.vocab_size)
        throw engine::InputError(path, "has " + std::to_string(tokenizer.vocab().size()) +
                                           " tokens but the checkpoint's model has " +
                                           std::to_string(config.model.vocab_size));
    return tokenizer;
}

std::vector<int64_t> validation_stream(const engine::PretrainConfig& config,
                                       const engine::WordPieceTokenizer& tokenizer) {
    const auto corpus =
        engine::load_or_build_corpus(config.data.corpus, tokenizer, config.data.cache_dir);
    const auto blocks = engine::make_blocks(corpus, tokenizer.vocab(), config.data);
    std::vector<int64_t> stream;
    for (const auto& b : blocks.validation)
        for (int64_t id : b.ids)
            if (!tokenizer.vocab().is_special(id)) stream.push_back(id);
    if (stream.empty()) throw engine::InputError(config.data.corpus, "no validation documents");
    return stream;
}

}  // namespace cli
