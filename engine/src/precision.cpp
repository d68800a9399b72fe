// Matrix-multiply rate and the precision `dtype: auto` picks (see precision.h).
#include "engine/precision.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace engine {

void synchronize(const torch::Device& device) {
    // A CUDA step is only finished when the stream is; a zero-sized host copy forces that on
    // LibTorch 1.13 and 2.x alike.
    if (device.is_cuda()) torch::zeros({1}, torch::TensorOptions().device(device)).cpu();
}

double matmul_flops(int64_t m, int64_t k, int64_t n, torch::ScalarType dtype,
                    const torch::Device& device, int reps, double budget_s) {
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t0) {
        return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    torch::NoGradGuard no_grad;
    const auto opts = torch::TensorOptions().dtype(dtype).device(device);
    auto a = torch::randn({m, k}, opts), b = torch::randn({k, n}, opts);
    auto out = torch::empty({m, n}, opts);
    torch::mm_out(out, a, b);  // warm-up
    synchronize(device);
    const double flops =
        2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
    double best = 0;
    const auto start = Clock::now();
    for (int rep = 0; rep < reps && (rep == 0 || since(start) < budget_s); ++rep) {
        const auto t0 = Clock::now();
        torch::mm_out(out, a, b);
        synchronize(device);
        best = std::max(best, flops / since(t0));
    }
    return best;
}

namespace {

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            return colon == std::string::npos ? ""
                                              : line.substr(line.find_first_not_of(' ', colon + 1));
        }
    return "unknown cpu";
}

/// A cache line: key, fp32 and bf16 GFLOP/s, the date measured (tab-separated).
struct CachedRates {
    double fp32 = 0, bf16 = 0;
    std::string date;
};

bool read_cached(const std::string& path, const std::string& key, CachedRates& out) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string k, fp32, bf16, date;
        if (!std::getline(fields, k, '\t') || k != key) continue;
        if (!std::getline(fields, fp32, '\t') || !std::getline(fields, bf16, '\t')) return false;
        std::getline(fields, date, '\t');
        try {
            out.fp32 = std::stod(fp32);
            out.bf16 = std::stod(bf16);
        } catch (const std::exception&) {
            return false;
        }
        out.date = date;
        return out.fp32 > 0;
    }
    return false;
}

/// Replaces (or adds) the key's line through a temporary file and a rename; errors ignored.
void write_cached(const std::string& path, const std::string& key, const CachedRates& rates) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    std::vector<std::string> lines;
    {
        std::ifstream in(path);
        std::string line;
        while (std::getline(in, line))
            if (line.rfind(key + "\t", 0) != 0 && !line.empty()) lines.push_back(line);
    }
    char row[512];
    std::snprintf(row, sizeof row, "%s\t%.1f\t%.1f\t%s", key.c_str(), rates.fp32, rates.bf16,
                  rates.date.c_str());
    lines.emplace_back(row);
    const std::string tmp = path + ".tmp" + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::trunc);
        for (const auto& l : lines) out << l << "\n";
        if (!out) {
            fs::remove(tmp, ec);
            return;
        }
    }
    fs::rename(tmp, path, ec);
    if (ec) fs::remove(tmp, ec);
}

std::string today() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char date[16];
    std::strftime(date, sizeof date, "%Y-%m-%d", &tm);
    return date;
}

}  // namespace

std::string precision_cache_path() {
    if (const char* env = std::getenv("TUPE_PRECISION_CACHE"); env && *env)
        return std::string(env) == "off" ? "" : env;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
        return std::string(xdg) + "/tupe/precision.tsv";
    if (const char* home = std::getenv("HOME"); home && *home)
        return std::string(home) + "/.cache/tupe/precision.tsv";
    return "";
}

std::string precision_machine_key(const torch::Device& device) {
    char host[256] = {0};
    if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
    return std::string(host) + "|" + cpu_model_name() + "|" + TORCH_VERSION + "|" + device.str() +
           "|" + std::to_string(at::get_num_threads()) + " threads";
}

PrecisionChoice choose_precision(const std::string& requested, const torch::Device& device,
                                 const std::string& key, bool refresh) {
    if (requested != "fp32" && requested != "bf16" && requested != "fp16" && requested != "auto")
        throw std::invalid_argument(key + ": expected fp32, bf16, fp16 or auto, got '" + requested +
                                    "'");
    if (requested == "fp16" && !device.is_cuda())
        throw std::invalid_argument(key + ": fp16 needs a CUDA device; use bf16 or auto on CPU");
    PrecisionChoice choice;
    if (requested != "auto") {
        choice.dtype = requested;
        choice.reason = "as configured";
        return choice;
    }
    const int64_t n = device.is_cuda() ? 4096 : 512;
    const std::string cache = precision_cache_path();
    const std::string machine = precision_machine_key(device);
    CachedRates rates;
    const bool cached = !refresh && !cache.empty() && read_cached(cache, machine, rates);
    if (!cached) {
        rates.fp32 = matmul_flops(n, n, n, torch::kFloat, device, 3, 0.5) / 1e9;
        try {
            rates.bf16 = matmul_flops(n, n, n, torch::kBFloat16, device, 3, 0.5) / 1e9;
        } catch (const c10::Error&) {
            rates.bf16 = 0;  // no bf16 matmul on this device at all
        }
        rates.date = today();
        if (!cache.empty()) write_cached(cache, machine, rates);
    }
    choice.fp32_gflops = rates.fp32;
    choice.bf16_gflops = rates.bf16;
    const bool fast = choice.bf16_gflops >= kBf16SpeedupForAuto * choice.fp32_gflops;
    choice.dtype = fast ? "bf16" : "fp32";
    char line[512];
    std::snprintf(line, sizeof line,
                  "bf16 matmul %.0f GFLOP/s %s %.1f x fp32's %.0f GFLOP/s on %s (%lld^3; %s)",
                  choice.bf16_gflops, fast ? ">=" : "<", kBf16SpeedupForAuto, choice.fp32_gflops,
                  device.str().c_str(), static_cast<long long>(n),
                  cached          ? ("measured " + rates.date + ", read from " + cache).c_str()
                  : cache.empty() ? "measured now, not cached"
                                  : ("measured now, kept in " + cache).c_str());
    choice.reason = line;
    return choice;
}

}  // namespace engine
