// The scheme table and the description built from it (see position_scheme.h). A new scheme is
// one row here, one module in engine/src/schemes/ (CONTRIBUTING.md, "A positional scheme").
#include "engine/position_scheme.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <tuple>

#include "engine/text_util.h"

namespace engine {

namespace {

using Shape = std::optional<std::vector<int64_t>>;

[[noreturn]] void fail(const std::string& message) {
    throw std::invalid_argument("model." + message);
}

// ---- shapes of the parameters (SchemeParameter::shape) ----------------------------------------

int64_t groups(const ModelConfig& c) { return c.shared_pos_term ? 1 : c.num_hidden_layers; }
int64_t clip(const ModelConfig& c) { return relative_distance_clip(c); }

Shape hidden(const ModelConfig& c) { return std::vector<int64_t>{c.hidden_size}; }
Shape square(const ModelConfig& c) { return std::vector<int64_t>{c.hidden_size, c.hidden_size}; }
// A Linear's bias, a norm's shift: absent with model.bias false (engine/norm.h; RMSNorm never).
Shape linear_bias(const ModelConfig& c) { return c.bias ? hidden(c) : std::nullopt; }
Shape norm_bias(const ModelConfig& c) {
    return c.bias && c.norm != "rmsnorm" ? hidden(c) : std::nullopt;
}
Shape scalar(const ModelConfig&) { return std::vector<int64_t>{}; }
Shape per_group_head(const ModelConfig& c) {
    return std::vector<int64_t>{groups(c), c.num_attention_heads};
}

// TUPE's and BERT-Ad's table p, its norm, and the projections U^Q, U^K per group (DeBERTa's
// W_{q,r}, W_{k,r} share the last four).
const SchemeParameter kNorm[] = {{"bert.position_bias.pos_ln.weight", hidden},
                                 {"bert.position_bias.pos_ln.bias", norm_bias}};
std::vector<SchemeParameter> projections() {
    return {{"bert.position_bias.projections.{g}.pos_q_linear.weight", square},
            {"bert.position_bias.projections.{g}.pos_q_linear.bias", linear_bias},
            {"bert.position_bias.projections.{g}.pos_k_linear.weight", square},
            {"bert.position_bias.projections.{g}.pos_k_linear.bias", linear_bias}};
}
std::vector<SchemeParameter> table(Shape (*rows)(const ModelConfig&)) {
    std::vector<SchemeParameter> out = {
        {"bert.position_bias.pos.weight", rows}, kNorm[0], kNorm[1]};
    for (const auto& p : projections()) out.push_back(p);
    return out;
}

// ---- checks of the fields a scheme reads (SchemeRow::validate) --------------------------------

void check_t5(const ModelConfig& c) {
    if (c.rel_pos_bins < 4 || c.rel_pos_bins % 2 != 0)
        fail("rel_pos_bins must be even and >= 4, got " + std::to_string(c.rel_pos_bins));
    if (c.max_rel_pos <= c.rel_pos_bins / 4)
        fail("max_rel_pos must exceed rel_pos_bins / 4 (" + std::to_string(c.rel_pos_bins / 4) +
             "), got " + std::to_string(c.max_rel_pos));
}

void check_rope(const ModelConfig& c) {
    if (!(c.rope_fraction > 0 && c.rope_fraction <= 1))
        fail("rope_fraction must be in (0, 1], got " + std::to_string(c.rope_fraction));
    if (static_cast<int64_t>(c.head_dim() * c.rope_fraction) / 2 < 1)
        fail("rope_fraction: rotates no pair of dimensions at head_dim " +
             std::to_string(c.head_dim()));
    if (!(c.rope_base > 1)) fail("rope_base must be > 1, got " + format_double(c.rope_base));
}

void check_relative_distance(const ModelConfig& c) {
    if (c.max_relative_distance < 0)
        fail("max_relative_distance must be >= 0 (0 = max_position_embeddings - 1), got " +
             std::to_string(c.max_relative_distance));
}

// ---- the cost model's terms (cost_model.h's legend: B batch, T tokens, N = B*T, C hidden, H
// heads, d = C/H, L layers, G layer groups, e bytes per activation, 2k relative rows) ------------

// TUPE (untied): p'U^Q and p'U^K over the T+1 rows (positions and [CLS]) 2*2*(T+1)*C*C, and the
// (H, T+1, T+1) correlations 2*(T+1)^2*C, per group.
double untied_flops(const CostShape& s) {
    return s.G * (2 * 2 * (s.T + 1) * s.C * s.C + 2 * (s.T + 1) * (s.T + 1) * s.C);
}
// BERT-Ad (decoupled): p'U^Q and p'U^K 2*2*T*C*C per group.
double decoupled_flops(const CostShape& s) { return s.G * 2 * 2 * s.T * s.C * s.C; }
// DeBERTa: Q_r, K_r over the 2k relative rows 2*2*2k*C*C per group, and the c2p and p2c logits
// against those rows 2*2*N*2k*C per layer.
double deberta_flops(const CostShape& s) {
    return s.G * 2 * 2 * s.k2 * s.C * s.C + s.L * 2 * 2 * s.N * s.k2 * s.C;
}
// Shaw: q.r_(j-i) 2*N*T*C per layer; Shaw key-query adds k.r: 2*2*N*T*C.
double shaw_flops(const CostShape& s) { return s.L * 1 * 2 * s.N * s.T * s.C; }
double shaw_kq_flops(const CostShape& s) { return s.L * 2 * 2 * s.N * s.T * s.C; }
// FIRE: its MLP 1 -> 32 -> H at every query/key pair, 2*32*(1+H)*T*T per group (computed once
// per step, not per sequence).
double fire_flops(const CostShape& s) { return s.G * s.T * s.T * 2 * 32 * (1 + s.H); }

// Shaw: the relative keys r_ij, G*T*T*d*4 (under bf16 also their bf16 copies, L*T*T*d*e), and
// per layer the contiguous q its batched product saves, N*C*e (shaw-kq also k*scale and its
// copy, 2*N*C*e more, and in backward the second gradient of the keys, T*T*d*4).
double shaw_memory(const CostShape& s, bool key_query) {
    const double t = s.T;
    return s.G * t * t * s.d * 4 + (s.bf16 ? s.L * t * t * s.d * s.e : 0.0) +
           s.L * (key_query ? 3.0 : 1.0) * s.N * s.C * s.e + (key_query ? t * t * s.d * 4 : 0.0);
}
double shaw_only_memory(const CostShape& s) { return shaw_memory(s, false); }
double shaw_kq_memory(const CostShape& s) { return shaw_memory(s, true); }
// DeBERTa: per layer the c2p and p2c products against every relative row, which the gathers
// keep for backward, 2*B*H*T*2k*e, and k*scale, N*C*e; in backward one gather gradient,
// B*H*T*2k*4.
double deberta_memory(const CostShape& s) {
    const double BHT = s.B * s.H * s.T;
    return s.L * (2 * BHT * s.k2 * s.e + s.N * s.C * s.e) + BHT * s.k2 * 4;
}
// KERPLE: per group two fp32 (H, T, T) tensors its kernel's backward keeps, 2*H*T*T*4.
double kerple_memory(const CostShape& s) { return s.G * 2 * s.H * s.T * s.T * 4; }
// FIRE: per group the MLP's hidden and output activations at every (i, j), T*T*(32 + H)*e, and
// its fp32 inputs, 4*T*T*4; in backward one hidden gradient, T*T*32*4.
double fire_memory(const CostShape& s) {
    return s.G * s.T * s.T * ((32 + s.H) * s.e + 4 * 4) + s.T * s.T * 32 * 4;
}

// CoPE: the table rows a count can reach, min(k, T) + 1 (a count is at most the T tokens of
// the span); per layer q against both tables, 2 * 2*N*n*C.
double cope_rows(const CostShape& s) { return std::min(s.k2 / 2, s.T) + 1; }
double cope_flops(const CostShape& s) { return s.L * 2 * 2 * s.N * cope_rows(s) * s.C; }
// Per layer what autograd keeps and the backward's transients: the gates, the capped count, the
// interpolation weights w and 1 - w, the two gathered logits and one gradient of that size (7
// S-sized tensors), the floor and ceil indices (int64, 2 S), the (B, H, T, 2n) product against
// the tables, and q's scaled copy.
double cope_memory(const CostShape& s) {
    const double S = s.B * s.H * s.T * s.T, BHTn = s.B * s.H * s.T * cope_rows(s);
    return s.L * (7 * S * s.e + 2 * S * 8 + 2 * BHTn * s.e + s.N * s.C * s.e);
}

// ---- the table -------------------------------------------------------------------------------

using Rows = std::vector<SchemeRow>;

constexpr const char* kShawC2p =
    "content-to-position term: each query against the relative-position key r_{j-i} of its "
    "distance to the key (Shaw)";
using A = SchemeAxis;

// A new row at the end of `t`, to be filled before the next one is added.
SchemeRow* row(Rows& t, Scheme id, A axis, const char* name, const char* summary,
               const char* source) {
    SchemeRow r;
    r.id = id, r.axis = axis, r.name = name, r.summary = summary, r.source = source;
    t.push_back(std::move(r));
    return &t.back();
}

// Absolute schemes (model.absolute_position), then "none" (either field).
void add_absolute_rows(Rows& t) {
    SchemeRow* r = nullptr;
    r = row(t, Scheme::kInput, A::kAbsolute, "input", "learned absolute positions at the input",
            "Devlin et al. 2019");
    r->input_slot = r->learned_input = r->learned_table = r->reads_absolute_positions = true;
    r->fields = {"scale_input_positions"};
    r->parameters = {
        {"bert.embeddings.position_embeddings.weight", [](const ModelConfig& c) {
             return Shape(std::vector<int64_t>{c.max_position_embeddings, c.hidden_size});
         }}};
    r->hf_position_type = "absolute";
    r = row(t, Scheme::kSinusoidal, A::kAbsolute, "sinusoidal", "sinusoidal positions at the input",
            "Vaswani et al. 2017, sec. 3.5");
    r->input_slot = r->reads_absolute_positions = true;
    r->fields = {"scale_input_positions"};
    r = row(t, Scheme::kUntied, A::kAbsolute, "untied", "untied positional correlation (TUPE)",
            "Ke, He, Liu, ICLR 2021, Eq. 6-7; guolinke/TUPE");
    r->static_bias = r->untied = r->learned_table = r->reads_absolute_positions = true;
    r->per_layer_group = true;
    r->fields = {"shared_pos_term"};
    r->parameters = table([](const ModelConfig& c) {
        return Shape(std::vector<int64_t>{c.max_position_embeddings + 1, c.hidden_size});
    });
    r->flops = untied_flops;
    r = row(t, Scheme::kDecoupled, A::kAbsolute, "decoupled",
            "decoupled position projections in attention (BERT-Ad)",
            "Ke, He, Liu, ICLR 2021, Eq. 6");
    r->qk_offsets = r->learned_table = r->reads_absolute_positions = r->per_layer_group = true;
    r->fields = {"shared_pos_term"};
    r->parameters = table([](const ModelConfig& c) {
        return Shape(std::vector<int64_t>{c.max_position_embeddings, c.hidden_size});
    });
    r->flops = decoupled_flops;
    // "none" on either axis: no row runs.
    row(t, Scheme::kNone, A::kBoth, "none", "", "");
}

// Relative schemes (model.relative_position), each with its own content, bias or rotation.
void add_relative_rows(Rows& t) {
    SchemeRow* r = nullptr;
    r = row(t, Scheme::kT5, A::kRelative, "t5", "T5 relative bias",
            "Raffel et al. 2020; relative_position_bucket in guolinke/TUPE");
    r->static_bias = true;
    r->fields = {"rel_pos_bins", "max_rel_pos"};
    r->validate = check_t5;
    r->parameters = {
        {"bert.position_bias.relative_attention_bias.weight", [](const ModelConfig& c) {
             return Shape(std::vector<int64_t>{c.rel_pos_bins + 1, c.num_attention_heads});
         }}};
    auto shaw_table = [](const ModelConfig& c) {
        return Shape(std::vector<int64_t>{2 * clip(c) + 1, c.head_dim()});
    };
    r = row(t, Scheme::kShaw, A::kRelative, "shaw", "Shaw relative keys",
            "Shaw et al. 2018; HF modeling_bert relative_key");
    r->content_bias = r->per_layer_group = true, r->takes_cls_reset = false;
    r->logit_terms = {{"c2p", kShawC2p}};
    r->fields = {"max_relative_distance", "shared_pos_term"};
    r->validate = check_relative_distance;
    r->parameters = {{"bert.position_bias.distance_embedding.{g}.weight", shaw_table}};
    r->hf_position_type = "relative_key", r->hf_layer_parameter = "distance_embedding";
    r->flops = shaw_flops, r->memory = shaw_only_memory;
    const SchemeRow shaw = *r;
    r = row(t, Scheme::kShawKeyQuery, A::kRelative, "shaw_key_query",
            "Shaw relative keys and queries", "Huang et al. 2020; HF relative_key_query");
    r->content_bias = r->per_layer_group = true, r->takes_cls_reset = false;
    r->logit_terms = {{"c2p", kShawC2p},
                      {"p2c",
                       "position-to-content term: each key against the relative-position key "
                       "r_{j-i} of its distance to the query (Shaw key-query)"}};
    r->fields = shaw.fields, r->validate = shaw.validate, r->parameters = shaw.parameters;
    r->hf_position_type = "relative_key_query", r->hf_layer_parameter = "distance_embedding";
    r->flops = shaw_kq_flops, r->memory = shaw_kq_memory;
    r = row(t, Scheme::kRope, A::kRelative, "rope", "rotary q/k", "Su et al., RoFormer, Eq. 14-16");
    r->rotary = true;
    r->logit_terms = {{"rotation",
                       "RoPE rotation term: q.k^T * scale with q and k rotated by their "
                       "positions, minus the unrotated content term"}};
    r->fields = {"rope_fraction", "rope_base", "rope_base_local"};
    r->validate = check_rope;
    r = row(t, Scheme::kAlibi, A::kRelative, "alibi", "ALiBi linear bias",
            "Press, Smith, Lewis, ICLR 2022, sec. 3 (symmetric)");
    r->static_bias = true;
    r = row(t, Scheme::kDeberta, A::kRelative, "deberta", "DeBERTa c2p + p2c",
            "He et al., DeBERTa, Eq. 3-4");
    r->content_bias = r->per_layer_group = true, r->takes_cls_reset = false;
    r->logit_terms = {{"c2p",
                       "content-to-position term: each query against the relative-position "
                       "key K_r[delta(i,j)] of its distance to the key (DeBERTa)"},
                      {"p2c",
                       "position-to-content term: each key against the relative-position "
                       "query Q_r[delta(j,i)] of its distance to the query (DeBERTa)"}};
    r->fields = {"max_relative_distance", "shared_pos_term"};
    r->validate = check_relative_distance;
    r->parameters = projections();
    r->parameters.push_back({"bert.position_bias.rel_embeddings.weight", [](const ModelConfig& c) {
                                 return Shape(std::vector<int64_t>{2 * clip(c), c.hidden_size});
                             }});
    r->flops = deberta_flops, r->memory = deberta_memory;
    r = row(t, Scheme::kFire, A::kRelative, "fire", "FIRE bias (two-sided)",
            "Li et al., FIRE, ICLR 2024, and their listing");
    r->static_bias = r->reads_absolute_positions = r->per_layer_group = true;
    r->fields = {"shared_pos_term"};
    // FIRE's MLP keeps its biases whatever model.bias says (its input x = 0 needs them).
    r->parameters = {{"bert.position_bias.fire.{g}.c", scalar},
                     {"bert.position_bias.fire.{g}.L_multiplier", scalar},
                     {"bert.position_bias.fire.{g}.mlp.0.weight",
                      [](const ModelConfig&) {
                          return Shape(std::vector<int64_t>{32, 1});
                      }},
                     {"bert.position_bias.fire.{g}.mlp.0.bias",
                      [](const ModelConfig&) { return Shape(std::vector<int64_t>{32}); }},
                     {"bert.position_bias.fire.{g}.mlp.2.weight",
                      [](const ModelConfig& c) {
                          return Shape(std::vector<int64_t>{c.num_attention_heads, 32});
                      }},
                     {"bert.position_bias.fire.{g}.mlp.2.bias", [](const ModelConfig& c) {
                          return Shape(std::vector<int64_t>{c.num_attention_heads});
                      }}};
    r->flops = fire_flops, r->memory = fire_memory;
    for (const auto& [id, name, summary] :
         {std::tuple{Scheme::kKerpleLog, "kerple_log", "KERPLE log kernel"},
          std::tuple{Scheme::kKerplePower, "kerple_power", "KERPLE power kernel"}}) {
        r = row(t, id, A::kRelative, name, summary, "Chi et al., KERPLE, NeurIPS 2022");
        r->static_bias = r->per_layer_group = true;
        r->fields = {"shared_pos_term"};
        r->parameters = {{"bert.position_bias.kerple_r1", per_group_head},
                         {"bert.position_bias.kerple_r2", per_group_head}};
        r->memory = kerple_memory;
    }
    r = row(t, Scheme::kCope, A::kRelative, "cope", "CoPE counted positions (two-sided)",
            "Golovneva et al. 2024, arXiv 2405.18719");
    r->content_bias = r->per_layer_group = true, r->takes_cls_reset = false;
    r->logit_terms = {{"c2p",
                       "content-to-position term: each query against the interpolated "
                       "position embedding e[p_ij] of the key's counted position, p_ij the sum "
                       "of the query's gates between them (CoPE)"}};
    r->fields = {"max_relative_distance", "shared_pos_term"};
    r->validate = check_relative_distance;
    auto cope_table = [](const ModelConfig& c) {
        return Shape(std::vector<int64_t>{groups(c), clip(c) + 1, c.head_dim()});
    };
    r->parameters = {{"bert.position_bias.cope_left", cope_table},
                     {"bert.position_bias.cope_right", cope_table}};
    r->flops = cope_flops, r->memory = cope_memory;
}

std::vector<SchemeRow> make_table() {
    Rows t;
    t.reserve(20);  // row() hands out pointers into it
    add_absolute_rows(t);
    add_relative_rows(t);
    // The modifier: TUPE's [CLS] reset with learned theta1 / theta2 on any other scheme.
    SchemeRow* r = row(t, Scheme::kClsReset, A::kModifier, "untie_cls", "[CLS] reset",
                       "Ke, He, Liu, ICLR 2021, Eq. 9 and App. B");
    r->static_bias = true;
    r->fields = {"untie_cls"};
    r->parameters = {{"bert.position_bias.cls_theta", [](const ModelConfig& c) {
                          return Shape(std::vector<int64_t>{2, c.num_attention_heads});
                      }}};
    return t;
}

bool on_axis(const SchemeRow& row, SchemeAxis axis) {
    return row.axis == axis || (row.axis == SchemeAxis::kBoth && axis != SchemeAxis::kModifier);
}

std::vector<std::string> names_on(SchemeAxis axis) {
    std::vector<std::string> out;
    for (const auto& row : scheme_table())
        if (on_axis(row, axis) && row.id != Scheme::kNone) out.emplace_back(row.name);
    // "none" last among the absolute values, first among the relative ones (display order).
    if (axis == SchemeAxis::kAbsolute) out.emplace_back(scheme_row(Scheme::kNone).name);
    if (axis == SchemeAxis::kRelative) out.insert(out.begin(), scheme_row(Scheme::kNone).name);
    return out;
}

std::string fmt_factor(double f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", f);
    return f == 1.0 ? "1/sqrt(d)" : std::string("1/sqrt(") + buf + "d)";
}

}  // namespace

const std::vector<SchemeRow>& scheme_table() {
    static const std::vector<SchemeRow> table = make_table();
    return table;
}

const SchemeRow& scheme_row(Scheme id) {
    for (const auto& row : scheme_table())
        if (row.id == id) return row;
    throw std::logic_error("scheme_row: no row for scheme " + std::to_string(int(id)));
}

std::optional<Scheme> find_scheme(SchemeAxis axis, const std::string& name) {
    for (const auto& row : scheme_table())
        if (on_axis(row, axis) && name == row.name) return row.id;  // the table's one lookup
    return std::nullopt;
}

const std::vector<std::string>& absolute_position_schemes() {
    static const std::vector<std::string> v = names_on(SchemeAxis::kAbsolute);
    return v;
}
const std::vector<std::string>& relative_position_schemes() {
    static const std::vector<std::string> v = names_on(SchemeAxis::kRelative);
    return v;
}

int64_t relative_distance_clip(const ModelConfig& c) {
    return c.max_relative_distance > 0 ? c.max_relative_distance : c.max_position_embeddings - 1;
}

std::vector<Scheme> active_schemes(const ModelConfig& c) {
    const auto abs = find_scheme(SchemeAxis::kAbsolute, c.absolute_position);
    if (!abs)
        fail("absolute_position: unknown value '" + c.absolute_position + "' (expected " +
             join(absolute_position_schemes()) + ")");
    const auto rel = find_scheme(SchemeAxis::kRelative, c.relative_position);
    if (!rel)
        fail("relative_position: unknown value '" + c.relative_position + "' (expected " +
             join(relative_position_schemes()) + ")");
    std::vector<Scheme> out;
    if (*abs != Scheme::kNone) out.push_back(*abs);
    if (*rel != Scheme::kNone) out.push_back(*rel);
    // TUPE's untied term resets [CLS] from its own table rows 0 and 1.
    if (c.untie_cls && *abs != Scheme::kUntied) out.push_back(Scheme::kClsReset);
    return out;
}

PositionDescription describe_position(const ModelConfig& c) {
    const std::vector<Scheme> active = active_schemes(c);
    PositionDescription d;
    d.absolute = c.absolute_position;
    d.relative = c.relative_position;
    d.absolute_id = *find_scheme(SchemeAxis::kAbsolute, d.absolute);
    d.relative_id = *find_scheme(SchemeAxis::kRelative, d.relative);
    const SchemeRow& relative = scheme_row(d.relative_id);
    if (c.untie_cls && !relative.takes_cls_reset)
        fail("untie_cls: the [CLS] reset is not defined for relative_position = " + d.relative +
             " (its relative embeddings have no [CLS] row); set untie_cls: false");
    bool learned_table = false;
    for (Scheme id : active) {
        const SchemeRow& row = scheme_row(id);
        if (row.validate) row.validate(c);
        learned_table = learned_table || row.learned_table;
    }
    if (c.position_offset < 0)
        fail("position_offset must be >= 0, got " + std::to_string(c.position_offset));
    if (c.randomized_positions_max < 0)
        fail("randomized_positions_max must be >= 0 (0 = off), got " +
             std::to_string(c.randomized_positions_max));
    if (learned_table && c.position_offset + c.randomized_positions_max > c.max_position_embeddings)
        fail("randomized_positions_max: position_offset + " +
             std::to_string(c.randomized_positions_max) +
             " exceeds max_position_embeddings = " + std::to_string(c.max_position_embeddings) +
             ", the rows of the learned table (" + d.absolute + ")");

    d.untie_cls = c.untie_cls;
    d.extrapolates = !learned_table;
    d.shift_invariant = true;
    d.order_blind = active.empty();
    // What "content" is depends on where the positions went; "bias" is every static bias.
    const bool positions_in_content = std::any_of(active.begin(), active.end(), [](Scheme id) {
        return scheme_row(id).input_slot || scheme_row(id).qk_offsets;
    });
    d.logit_terms = {"content"};
    d.logit_term_meanings = {
        positions_in_content
            ? "content term q.k^T * scale, the positions added at the input (or to q and k) "
              "included"
            : "content term q.k^T * scale of the words alone (no positions in q and k; "
              "unrotated for RoPE)"};
    std::string s;
    for (Scheme id : active) {
        const SchemeRow& row = scheme_row(id);
        d.input_slot = d.input_slot || row.input_slot;
        d.learned_input = d.learned_input || row.learned_input;
        d.qk_offsets = d.qk_offsets || row.qk_offsets;
        d.rotary = d.rotary || row.rotary;
        d.static_bias = d.static_bias || row.static_bias;
        d.content_bias = d.content_bias || row.content_bias;
        d.untied = d.untied || row.untied;
        // FIRE's normaliser reads the positions themselves, not only their difference (Li et
        // al. 2024: the query's position; here the later of the query's and the key's).
        d.shift_invariant = d.shift_invariant && !row.reads_absolute_positions;
        for (const SchemeTerm& term : row.logit_terms) {
            d.logit_terms.emplace_back(term.name);
            d.logit_term_meanings.emplace_back(term.meaning);
        }
        for (const char* field : row.fields)
            if (std::find(d.fields.begin(), d.fields.end(), field) == d.fields.end())
                d.fields.emplace_back(field);
        d.sources.emplace_back(row.source);
        if (row.axis != SchemeAxis::kModifier)
            s += (s.empty() ? "" : " + ") + std::string(row.summary);
    }
    d.qk_slot = d.qk_offsets || d.rotary;
    if (d.static_bias) {
        d.logit_terms.emplace_back("bias");
        d.logit_term_meanings.emplace_back(
            "static positional bias, the same for every sentence (TUPE's untied correlation "
            "and [CLS] reset, T5's relative bias, ALiBi's distance penalty: what the scheme "
            "has)");
    }
    // The reset is part of TUPE's own term, and a modifier elsewhere: named in both cases.
    if (c.untie_cls)
        s += (s.empty() ? "" : " + ") + std::string(scheme_row(Scheme::kClsReset).summary);
    if (s.empty()) s = "no positional information (NoPE)";
    if (c.randomized_positions_max > 0 && !d.order_blind)
        s += ", randomized positions in training (< " + std::to_string(c.randomized_positions_max) +
             ")";
    d.summary = s + ", scale " + fmt_factor(c.attention_scale_factor);
    return d;
}

}  // namespace engine
