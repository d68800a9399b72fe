// CoPE, contextual position encoding (Golovneva, Wang, Weston, Sukhbaatar 2024, arXiv
// 2405.18719, and the listing in their paper), made two-sided for an encoder (docs/zoo.md, "CoPE,
// made two-sided"): gates g_ij = sigmoid(q_i . k_j / sqrt(d)), the position of key j for query
// i the sum of the gates g_it over the tokens t between them, both ends included, capped at k
// (max_relative_distance, 0 = max_len - 1), e[p] interpolated between the learned rows
// e[floor p] and e[ceil p], logits += q_i . e[p_ij] / sqrt(d); keys at or left of the query
// read the table cope_left (the paper's), keys to the right cope_right. "Between" is by
// position, so a shift leaves the terms and constant positions make them a per-row constant.
// Shapes: tables (G, k + 1, d); gates, counts, term (B, H, T, T).
#include <algorithm>

#include "engine/batched_matmul.h"
#include "scheme_module.h"

namespace engine::schemes {

namespace {

// One layer group's term: the tables' first n rows (every count a window can reach) and the
// (T, T) indices that depend on the positions only.
class CopeTerms final : public ContentTerm {
  public:
    CopeTerms(torch::Tensor table, torch::Tensor order, torch::Tensor lo, torch::Tensor hi,
              torch::Tensor side, double cap)
        : table_(std::move(table)),
          order_(std::move(order)),
          lo_(std::move(lo)),
          hi_(std::move(hi)),
          side_(std::move(side)),
          cap_(cap) {}

    void add_terms(const torch::Tensor& qs, const torch::Tensor& k, const torch::Tensor& content,
                   double, std::vector<std::pair<std::string, torch::Tensor>>& out) const override {
        const int64_t B = qs.size(0), H = qs.size(1), T = qs.size(2);
        // Golovneva et al.'s gates g_ij = sigmoid(q_i . k_j), on the scaled logits as their
        // listing (content: q.k^T * scale, unrotated).
        auto logits = content.defined() ? content : batched_matmul(qs, k.transpose(-2, -1));
        auto gates = torch::sigmoid(logits);                           // (B, H, T, T)
        if (order_.defined()) gates = gates.index_select(-1, order_);  // keys in position order
        // Their count p_ij = sum_{t=j}^{i} g_it, two-sided: the sum of g_it over the t with
        // min(p_i, p_j) <= p_t <= max(p_i, p_j), a difference of running sums over the keys in
        // position order.
        auto prefix = torch::cat({torch::zeros_like(gates.narrow(-1, 0, 1)), gates.cumsum(-1)},
                                 -1);  // (B, H, T, T + 1): prefix[.., s] = sum of the first s
        auto count = prefix.gather(-1, hi_.expand({B, H, T, T})) -
                     prefix.gather(-1, lo_.expand({B, H, T, T}));  // (B, H, T, T)
        // Their interpolation e[p] = (p - floor p) e[ceil p] + (1 - p + floor p) e[floor p],
        // through the logits q_i . e[r] of the integer rows r, as their listing; p capped at k.
        auto p = count.clamp_max(cap_);
        auto floor = p.floor();
        auto w = p - floor;
        // (B, H, T, d) x (d, 2n) -> (B, H, T, 2n): the left table's rows, then the right's.
        auto per_row = torch::matmul(qs, table_.to(qs.scalar_type()).transpose(0, 1));
        auto at_floor = per_row.gather(-1, floor.to(torch::kLong) + side_);
        auto at_ceil = per_row.gather(-1, p.ceil().to(torch::kLong) + side_);
        out.emplace_back("c2p", at_ceil * w + at_floor * (1 - w));
    }
    const char* slot_name() const override { return "counted positions"; }

  private:
    torch::Tensor table_;    // (2n, d): cope_left's rows 0..n-1, then cope_right's
    torch::Tensor order_;    // (T) the keys sorted by position; undefined when already sorted
    torch::Tensor lo_, hi_;  // (1, 1, T, T): prefix indices of the span's two ends
    torch::Tensor side_;     // (1, 1, T, T): 0 for keys at or left of the query, n right of it
    double cap_;
};

class ContextualPositions final : public SchemeModule {
  public:
    explicit ContextualPositions(PositionEncodingImpl& owner)
        : cap_(relative_distance_clip(owner.config())) {
        // Their listing initialises the table to zeros: no position until the gates learn.
        const ModelConfig& c = owner.config();
        const int64_t G = owner.layer_groups();
        left_ = owner.register_parameter("cope_left", torch::zeros({G, cap_ + 1, c.head_dim()}));
        right_ = owner.register_parameter("cope_right", torch::zeros({G, cap_ + 1, c.head_dim()}));
    }

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        const int64_t T = in.positions.size(0);
        // A count is at most the T tokens of a span: rows 0..min(k, T) are all it can reach.
        const int64_t n = std::min(cap_, T) + 1;
        auto p = in.positions.view({-1});
        auto [sorted, order] = torch::sort(p, /*stable=*/true, /*dim=*/0, /*descending=*/false);
        if (torch::equal(order, torch::arange(T, order.options()))) order = torch::Tensor();
        auto a = torch::minimum(p.view({T, 1}), p.view({1, T}));  // [i][j]: the span's ends
        auto b = torch::maximum(p.view({T, 1}), p.view({1, T}));
        auto lo = torch::searchsorted(sorted, a, /*out_int32=*/false, /*right=*/false);
        auto hi = torch::searchsorted(sorted, b, /*out_int32=*/false, /*right=*/true);
        auto right = p.view({1, T}) > p.view({T, 1});  // [i][j]: key j right of query i
        auto side = right.to(torch::kLong) * n;
        auto shape = [&](const torch::Tensor& t) { return t.view({1, 1, T, T}); };
        for (size_t g = 0; g < terms.layers.size(); ++g) {
            auto table = torch::cat({left_[static_cast<int64_t>(g)].narrow(0, 0, n),
                                     right_[static_cast<int64_t>(g)].narrow(0, 0, n)});  // (2n, d)
            terms.layers[g].content.push_back(std::make_shared<CopeTerms>(
                table, order, shape(lo), shape(hi), shape(side), static_cast<double>(cap_)));
        }
    }

  private:
    int64_t cap_;
    torch::Tensor left_, right_;  // (G, k + 1, d)
};

}  // namespace

std::unique_ptr<SchemeModule> make_cope(PositionEncodingImpl& owner) {
    return std::make_unique<ContextualPositions>(owner);
}

}  // namespace engine::schemes
