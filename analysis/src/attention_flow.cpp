// Attention rollout and flow (Abnar & Zuidema 2020) and value-weighted attention norms
// (Kobayashi et al. 2020); see attention_flow.h. The maximum flow is Dinic's algorithm on the
// layered token graph, in float64.
#include "analysis/attention_flow.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <vector>

#include "tensor_util.h"

namespace analysis {

using detail::cpu_dbl;
using detail::require;
using detail::shape_of;

torch::Tensor residual_attention(const torch::Tensor& attention) {
    require(attention.defined() && attention.dim() >= 2 && attention.size(-1) == attention.size(-2),
            "residual_attention: attention must be (..., T, T), got " + shape_of(attention));
    auto a = cpu_dbl(attention);
    // Abnar & Zuidema, sec. 3: the residual connection as an identity added to the attention,
    // rows renormalised (their reference code: (A + I) / rowsum).
    a = a + torch::eye(a.size(-1), torch::kDouble);
    return a / a.sum(-1, /*keepdim=*/true).clamp_min(1e-300);
}

namespace {

torch::Tensor flow_layers(const torch::Tensor& attention, bool residual, const char* who) {
    require(attention.defined() && attention.dim() == 3 && attention.size(1) == attention.size(2),
            std::string(who) + ": attention must be (L, T, T), got " + shape_of(attention));
    require(attention.size(0) >= 1 && attention.size(1) >= 1,
            std::string(who) + ": needs at least one layer and one token");
    return residual ? residual_attention(attention) : cpu_dbl(attention);
}

/// Dinic's maximum flow on a small graph with float64 capacities.
class FlowGraph {
  public:
    explicit FlowGraph(int64_t nodes) : adjacency_(static_cast<size_t>(nodes)) {}

    void add_edge(int64_t from, int64_t to, double capacity) {
        const auto f = static_cast<size_t>(from), t = static_cast<size_t>(to);
        adjacency_[f].push_back(
            {to, static_cast<int64_t>(adjacency_[t].size()), capacity, capacity});
        adjacency_[t].push_back({from, static_cast<int64_t>(adjacency_[f].size()) - 1, 0.0, 0.0});
    }

    /// Maximum flow from s to t on the original capacities (restored before each call).
    double max_flow(int64_t s, int64_t t) {
        for (auto& edges : adjacency_)
            for (auto& e : edges) e.capacity = e.initial;
        double total = 0;
        while (levels(s, t)) {
            next_.assign(adjacency_.size(), 0);
            for (double f; (f = push(s, t, kInfinity)) > kEpsilon;) total += f;
        }
        return total;
    }

  private:
    struct Edge {
        int64_t to, reverse;
        double capacity, initial;  ///< residual capacity; the original (0 for a reverse edge)
    };
    static constexpr double kEpsilon = 1e-15;
    static constexpr double kInfinity = std::numeric_limits<double>::infinity();

    bool levels(int64_t s, int64_t t) {
        level_.assign(adjacency_.size(), -1);
        std::queue<int64_t> queue;
        level_[static_cast<size_t>(s)] = 0;
        queue.push(s);
        while (!queue.empty()) {
            const int64_t u = queue.front();
            queue.pop();
            for (const Edge& e : adjacency_[static_cast<size_t>(u)])
                if (e.capacity > kEpsilon && level_[static_cast<size_t>(e.to)] < 0) {
                    level_[static_cast<size_t>(e.to)] = level_[static_cast<size_t>(u)] + 1;
                    queue.push(e.to);
                }
        }
        return level_[static_cast<size_t>(t)] >= 0;
    }

    double push(int64_t u, int64_t t, double limit) {
        if (u == t) return limit;
        const auto uu = static_cast<size_t>(u);
        for (size_t& i = next_[uu]; i < adjacency_[uu].size(); ++i) {
            Edge& e = adjacency_[uu][i];
            if (e.capacity <= kEpsilon || level_[static_cast<size_t>(e.to)] != level_[uu] + 1)
                continue;
            const double f = push(e.to, t, std::min(limit, e.capacity));
            if (f > kEpsilon) {
                e.capacity -= f;
                adjacency_[static_cast<size_t>(e.to)][static_cast<size_t>(e.reverse)].capacity += f;
                return f;
            }
        }
        return 0.0;
    }

    std::vector<std::vector<Edge>> adjacency_;
    std::vector<int64_t> level_;
    std::vector<size_t> next_;
};

}  // namespace

torch::Tensor attention_rollout(const torch::Tensor& attention, bool residual) {
    const auto a = flow_layers(attention, residual, "attention_rollout");
    const int64_t L = a.size(0);
    auto out = torch::empty_like(a);
    out[0] = a[0];
    // Abnar & Zuidema, Eq. 1: the product of the layers' matrices, latest on the left.
    for (int64_t l = 1; l < L; ++l) out[l] = torch::mm(a[l], out[l - 1]);
    return out;
}

torch::Tensor attention_flow_row(const torch::Tensor& attention, int64_t query, bool residual) {
    const auto a = flow_layers(attention, residual, "attention_flow_row");
    const int64_t L = a.size(0), T = a.size(1);
    require(query >= 0 && query < T, "attention_flow_row: query " + std::to_string(query) +
                                         " outside 0.." + std::to_string(T - 1));
    FlowGraph graph((L + 1) * T);
    auto acc = a.accessor<double, 3>();
    // Edge (l, j) -> (l + 1, i) with capacity A_hat_{l+1}[i, j]: input j of layer l + 1 feeds
    // its output i (Abnar & Zuidema, sec. 3, attention flow).
    for (int64_t l = 0; l < L; ++l)
        for (int64_t i = 0; i < T; ++i)
            for (int64_t j = 0; j < T; ++j)
                if (acc[l][i][j] > 0) graph.add_edge(l * T + j, (l + 1) * T + i, acc[l][i][j]);
    auto out = torch::zeros({T}, torch::kDouble);
    auto o = out.accessor<double, 1>();
    for (int64_t j = 0; j < T; ++j) o[j] = graph.max_flow(j, L * T + query);
    return out;
}

ValueNorms value_weighted_norms(const torch::Tensor& probs, const torch::Tensor& transformed) {
    require(probs.defined() && probs.dim() == 4 && probs.size(2) == probs.size(3),
            "value_weighted_norms: probs must be (B, H, T, T), got " + shape_of(probs));
    require(transformed.defined() && transformed.dim() == 4 &&
                transformed.size(0) == probs.size(0) && transformed.size(1) == probs.size(1) &&
                transformed.size(2) == probs.size(3),
            "value_weighted_norms: transformed values must be (B, H, T, C) with B, H, T of probs " +
                shape_of(probs) + ", got " + shape_of(transformed));
    const auto p = cpu_dbl(probs), f = cpu_dbl(transformed);
    ValueNorms out;
    out.value_norm = f.norm(2, -1);              // (B, H, T)
    out.head = p * out.value_norm.unsqueeze(2);  // (B, H, T, T): key j's norm on column j
    auto per_key = f.permute({0, 2, 1, 3});      // (B, H, T, C) -> (B, T, H, C)
    auto gram = torch::matmul(per_key, per_key.transpose(-1, -2));  // (B, T, H, H)
    // Kobayashi et al., sec. 3: ||sum_h alpha^h_ij f_h(x_j)||, via the Gram matrix of the heads.
    auto squared = torch::einsum("bhij,bjhk,bkij->bij", {p, gram, p});  // (B, T, T)
    out.layer = squared.clamp_min(0.0).sqrt();
    return out;
}

torch::Tensor transformed_values(engine::BertLayerImpl& layer, const torch::Tensor& x) {
    require(x.defined() && x.dim() == 3,
            "transformed_values: x must be (B, T, C), got " + shape_of(x));
    auto& self = *layer.attention->self;
    auto& dense = layer.attention->output->dense;
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    const int64_t H = self.num_heads, d = self.head_dim;
    require(C == H * d, "transformed_values: hidden size " + std::to_string(C) + " is not " +
                            std::to_string(H) + " heads x " + std::to_string(d));
    auto v = cpu_dbl(self.value(x)).view({B, T, H, d}).permute({0, 2, 1, 3});  // (B, H, T, d)
    // The output projection's columns h*d..(h+1)*d take head h's context:
    // (C_out, C) -> (C_out, H, d) -> (H, d, C_out).
    auto w = cpu_dbl(dense->weight).view({C, H, d}).permute({1, 2, 0});
    return torch::matmul(v, w.unsqueeze(0));  // (B, H, T, d) x (1, H, d, C) -> (B, H, T, C)
}

// ---- over a batch of sentences ------------------------------------------------------------------

namespace {
// ClsSources::measure by index, in the order of FlowMaps::sources.
const char* const kFlowMeasures[] = {"attention", "value_norm", "rollout", "flow"};
enum FlowMeasure { kAttention = 0, kValueNorm = 1, kRollout = 2, kFlow = 3 };

/// Row (..., T) divided by its sum over the last dimension (0 where the sum is 0).
torch::Tensor normalised(const torch::Tensor& row) {
    return row / row.sum(-1, /*keepdim=*/true).clamp_min(1e-300);
}
}  // namespace

void FlowAccumulator::add_sources(int measure, int64_t layer, int64_t head,
                                  const torch::Tensor& row) {
    const int64_t n = row.size(0);
    const auto r = normalised(row);
    auto& [sum, count] = sources_[{measure, layer, head}];
    sum[0] += r[0].item<double>();
    sum[1] += r.slice(0, 1, n - 1).sum().item<double>();
    sum[2] += r[n - 1].item<double>();
    ++count;
}

void FlowAccumulator::add(engine::BertModel& model, const EncoderTrace& trace,
                          const torch::Tensor& mask) {
    const auto& probs = trace.encoded.attention_probs;
    const auto L = static_cast<int64_t>(probs.size());
    require(L >= 1 && static_cast<int64_t>(trace.attention_inputs.size()) == L,
            "FlowAccumulator: the trace needs attention maps and inputs for every layer");
    const auto m = cpu_dbl(mask);  // (B, T)
    const int64_t B = m.size(0), T = m.size(1), H = probs[0].size(1);
    require(probs[0].dim() == 4 && probs[0].size(0) == B && probs[0].size(2) == T,
            "FlowAccumulator: attention " + shape_of(probs[0]) + " does not match the mask " +
                shape_of(mask));
    if (!rollout_.defined()) {
        const auto z = [](std::vector<int64_t> shape) {
            return torch::zeros(shape, torch::kDouble);
        };
        rollout_ = z({L, T, T}), pair_count_ = z({T, T}), flow_ = z({L, T}), flow_count_ = z({T});
        norm_head_ = z({L, H, T, T}), norm_layer_ = z({L, T, T}), value_norm_ = z({L, H, T});
        token_count_ = z({T}), share_ = z({L, T}), share_head_ = z({L, H, T});
        attention_ = z({L, T}), attention_head_ = z({L, H, T});
    }
    require(rollout_.size(2) == T && norm_head_.size(1) == H,
            "FlowAccumulator: every batch must have the first one's T and H");
    const auto pair = m.unsqueeze(2) * m.unsqueeze(1);  // (B, T, T): both are tokens
    const auto keys = m.unsqueeze(1);                   // (B, 1, T)
    std::vector<torch::Tensor> head_mean;               // per layer (B, T, T)
    std::vector<torch::Tensor> share_rows, share_head_rows, attention_head_rows;
    for (int64_t l = 0; l < L; ++l) {
        const auto p = cpu_dbl(probs[static_cast<size_t>(l)]);  // (B, H, T, T)
        auto* layer = model->encoder->layer[static_cast<size_t>(l)]->as<engine::BertLayerImpl>();
        const ValueNorms vn = value_weighted_norms(
            p, transformed_values(*layer, trace.attention_inputs[static_cast<size_t>(l)]));
        norm_head_[l] += (vn.head * pair.unsqueeze(1)).sum(0);
        norm_layer_[l] += (vn.layer * pair).sum(0);
        value_norm_[l] += (vn.value_norm * keys).sum(0);
        // The [CLS] rows over the sentence's keys, each normalised to sum 1.
        share_rows.push_back(normalised(vn.layer.select(1, 0) * m));         // (B, T)
        share_head_rows.push_back(normalised(vn.head.select(2, 0) * keys));  // (B, H, T)
        attention_head_rows.push_back(normalised(p.select(2, 0) * keys));    // (B, H, T)
        share_[l] += share_rows.back().sum(0);
        share_head_[l] += share_head_rows.back().sum(0);
        attention_head_[l] += attention_head_rows.back().sum(0);
        attention_[l] += attention_head_rows.back().mean(1).sum(0);
        head_mean.push_back(p.mean(1));
    }
    token_count_ += m.sum(0);
    pair_count_ += pair.sum(0);

    for (int64_t b = 0; b < B; ++b) {
        const auto n = static_cast<int64_t>(m[b].sum().item<double>());
        if (n < 1) continue;
        std::vector<torch::Tensor> layers;
        for (const auto& a : head_mean) layers.push_back(a[b].slice(0, 0, n).slice(1, 0, n));
        const auto a = torch::stack(layers);  // (L, n, n)
        const auto rollout = attention_rollout(a);
        rollout_.slice(1, 0, n).slice(2, 0, n) += rollout;
        const bool flow = flow_done_ < flow_budget_;
        for (int64_t l = 0; l < L; ++l) {
            torch::Tensor flow_row;
            if (flow) {
                // Abnar & Zuidema normalise each output's flows to sum 1 (their reference code).
                flow_row = normalised(attention_flow_row(a.slice(0, 0, l + 1), 0));
                flow_[l].slice(0, 0, n) += flow_row;
            }
            if (n < 3) continue;  // [CLS], words and [SEP] need three tokens
            add_sources(kAttention, l, -1, attention_head_rows[l][b].mean(0).slice(0, 0, n));
            add_sources(kValueNorm, l, -1, share_rows[l][b].slice(0, 0, n));
            for (int64_t h = 0; h < H; ++h) {
                add_sources(kAttention, l, h, attention_head_rows[l][b][h].slice(0, 0, n));
                add_sources(kValueNorm, l, h, share_head_rows[l][b][h].slice(0, 0, n));
            }
            add_sources(kRollout, l, -1, rollout[l][0]);
            if (flow) add_sources(kFlow, l, -1, flow_row);
        }
        if (flow) {
            flow_count_.slice(0, 0, n) += 1;
            ++flow_done_;
        }
    }
}

FlowMaps FlowAccumulator::finish() const {
    require(rollout_.defined(), "FlowAccumulator::finish: no batch was added");
    const auto f = [](const torch::Tensor& t) { return t.to(torch::kFloat).contiguous(); };
    const auto pairs = pair_count_.clamp_min(1.0), tokens = token_count_.clamp_min(1.0);
    FlowMaps out;
    out.rollout = f(rollout_ / pairs);
    out.flow_cls = f(flow_ / flow_count_.clamp_min(1.0));
    out.flow_sentences = flow_done_;
    out.norm_head = f(norm_head_ / pairs);
    out.norm_layer = f(norm_layer_ / pairs);
    out.value_norm = f(value_norm_ / tokens);
    out.cls_norm_share = f(share_ / tokens);
    out.cls_norm_share_head = f(share_head_ / tokens);
    out.cls_attention = f(attention_ / tokens);
    out.cls_attention_head = f(attention_head_ / tokens);
    for (const auto& [key, value] : sources_) {
        const auto& [sum, count] = value;
        ClsSources s;
        s.measure = kFlowMeasures[std::get<0>(key)];
        s.layer = std::get<1>(key);
        s.head = std::get<2>(key);
        const double c = static_cast<double>(std::max<int64_t>(count, 1));
        s.cls = sum[0] / c, s.words = sum[1] / c, s.sep = sum[2] / c;
        s.sentences = count;
        out.sources.push_back(s);
    }
    return out;
}

}  // namespace analysis
