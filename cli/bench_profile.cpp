// Op-class profile of a training step (bench_profile.h): LibTorch's legacy autograd profiler
// writes a Chrome trace ("ph": "X" events with ts and dur in microseconds, one stack per
// thread); each event's self time is its duration minus its children's, summed per class.
#include "bench_profile.h"

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace cli {

namespace {

bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

struct Event {
    std::string name;
    double ts = 0, dur = 0;
};

}  // namespace

std::string op_class_of(const std::string& raw) {
    std::string n = raw;
    for (char& c : n)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    // Autograd nodes run as "autograd::engine::evaluate_function: MmBackward0".
    const auto colon = n.rfind(": ");
    if (colon != std::string::npos) n = n.substr(colon + 2);
    if (n.rfind("aten::", 0) == 0) n = n.substr(6);
    if (has(n, "log_softmax") || has(n, "nll") || has(n, "cross_entropy")) return "loss";
    if (has(n, "softmax")) return "softmax";
    if (has(n, "layer_norm") || has(n, "layernorm")) return "layer_norm";
    if (has(n, "gelu")) return "gelu";
    if (has(n, "dropout") || has(n, "bernoulli")) return "dropout";
    if (has(n, "embedding")) return "embedding";
    if (n == "mm" || n == "addmm" || n == "bmm" || has(n, "matmul") || has(n, "linear") ||
        n.rfind("mmbackward", 0) == 0 || has(n, "addmmbackward") || has(n, "bmmbackward") ||
        n.rfind("mm", 0) == 0)
        return "matmul";
    for (const char* e : {"add", "mul", "div", "sub", "where", "masked_fill", "neg", "sqrt", "pow",
                          "sum", "mean", "norm", "clamp", "fill", "lerp", "exp", "abs"})
        if (n.rfind(e, 0) == 0 || has(n, e)) return "element-wise";
    for (const char* e :
         {"copy",   "to",    "contiguous", "cat",       "clone",   "empty",      "zeros",
          "ones",   "view",  "reshape",    "transpose", "permute", "expand",     "slice",
          "select", "chunk", "split",      "unsqueeze", "squeeze", "as_strided", "t",
          "detach", "index", "stack",      "narrow",    "unbind",  "resize",     "alias"})
        if (n.rfind(e, 0) == 0) return "copies and views";
    return "other ops";
}

StepProfile profile_step(const std::function<void()>& step, int steps,
                         const std::string& trace_path) {
    std::stringstream trace;
    double wall_us = 0;
    {
        torch::autograd::profiler::RecordProfile guard(trace);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < steps; ++i) step();
        wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                      .count();
    }
    if (!trace_path.empty()) {
        std::ofstream out(trace_path);
        out << trace.str();
        if (!out) throw std::runtime_error(trace_path + ": cannot write the profiler trace");
    }
    // Events per thread, in start order; a stack gives each event its children.
    std::map<std::string, std::vector<Event>> by_thread;
    const auto doc = nlohmann::json::parse(trace.str());
    for (const auto& e : doc) {
        if (!e.is_object() || e.value("ph", "") != "X") continue;
        const std::string tid = e.contains("tid") ? e["tid"].dump() : "0";
        by_thread[tid].push_back({e.value("name", ""), e.value("ts", 0.0), e.value("dur", 0.0)});
    }
    std::map<std::string, double> self_us, op_us;
    std::map<std::string, long> count, op_count;
    double accounted = 0;
    for (auto& [tid, events] : by_thread) {
        std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
            return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;  // parents first on ties
        });
        std::vector<std::pair<const Event*, double>> stack;  // event, its children's time
        const auto close = [&](size_t keep) {
            while (stack.size() > keep) {
                const auto [ev, children] = stack.back();
                stack.pop_back();
                const std::string c = op_class_of(ev->name);
                const double self = std::max(0.0, ev->dur - children);
                self_us[c] += self;
                ++count[c];
                op_us[ev->name] += self;
                ++op_count[ev->name];
                if (stack.empty()) accounted += ev->dur;
            }
        };
        for (const auto& ev : events) {
            size_t keep = stack.size();
            while (keep > 0 && stack[keep - 1].first->ts + stack[keep - 1].first->dur <= ev.ts)
                --keep;
            close(keep);
            if (!stack.empty()) stack.back().second += ev.dur;
            stack.push_back({&ev, 0.0});
        }
        close(0);
    }
    StepProfile p;
    p.wall_ms_per_step = wall_us / 1000.0 / steps;
    for (const auto& [c, us] : self_us)
        p.classes.push_back({c, us / 1000.0 / steps, us / wall_us, count[c] / steps});
    const double rest = std::max(0.0, wall_us - accounted);
    p.classes.push_back({"not in an ATen op", rest / 1000.0 / steps, rest / wall_us, 0});
    std::sort(p.classes.begin(), p.classes.end(), [](const OpClassTime& a, const OpClassTime& b) {
        return a.ms_per_step > b.ms_per_step;
    });
    for (const auto& [name, us] : op_us)
        p.ops.push_back({name, us / 1000.0 / steps, us / wall_us, op_count[name] / steps});
    std::sort(p.ops.begin(), p.ops.end(), [](const OpClassTime& a, const OpClassTime& b) {
        return a.ops_per_step > b.ops_per_step;
    });
    return p;
}

}  // namespace cli
