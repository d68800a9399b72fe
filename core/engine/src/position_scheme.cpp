// Positional schemes described and validated (see position_scheme.h).
#include "engine/position_scheme.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "text_util.h"

namespace engine {

using detail::join;

namespace {

const std::vector<std::string>& absolute_schemes_list() {
    static const std::vector<std::string> v = {"input", "sinusoidal", "untied", "decoupled",
                                               "none"};
    return v;
}

const std::vector<std::string>& relative_schemes_list() {
    static const std::vector<std::string> v = {
        "none",  "t5",      "shaw", "shaw_key_query", "rope",
        "alibi", "deberta", "fire", "kerple_log",     "kerple_power"};
    return v;
}

bool one_of(const std::string& x, const std::vector<std::string>& v) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

std::string fmt_factor(double f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", f);
    return f == 1.0 ? "1/sqrt(d)" : std::string("1/sqrt(") + buf + "d)";
}

}  // namespace

const std::vector<std::string>& absolute_position_schemes() { return absolute_schemes_list(); }
const std::vector<std::string>& relative_position_schemes() { return relative_schemes_list(); }

// ---- description -----------------------------------------------------------------------------

PositionDescription describe_position(const ModelConfig& c) {
    auto fail = [](const std::string& m) { throw std::invalid_argument("model." + m); };
    PositionDescription d;
    d.absolute = c.absolute_position;
    d.relative = c.relative_position;
    if (!one_of(d.absolute, absolute_schemes_list()))
        fail("absolute_position: unknown value '" + d.absolute + "' (expected " +
             join(absolute_schemes_list()) + ")");
    if (!one_of(d.relative, relative_schemes_list()))
        fail("relative_position: unknown value '" + d.relative + "' (expected " +
             join(relative_schemes_list()) + ")");
    const bool shaw = d.relative == "shaw" || d.relative == "shaw_key_query";
    if (c.untie_cls && (shaw || d.relative == "deberta"))
        fail("untie_cls: the [CLS] reset is not defined for relative_position = " + d.relative +
             " (its relative embeddings have no [CLS] row); set untie_cls: false");
    if (d.relative == "rope") {
        if (!(c.rope_fraction > 0 && c.rope_fraction <= 1))
            fail("rope_fraction must be in (0, 1], got " + std::to_string(c.rope_fraction));
        if (static_cast<int64_t>(c.head_dim() * c.rope_fraction) / 2 < 1)
            fail("rope_fraction: rotates no pair of dimensions at head_dim " +
                 std::to_string(c.head_dim()));
        if (!(c.rope_base > 1)) fail("rope_base must be > 1, got " + format_double(c.rope_base));
    }
    if ((shaw || d.relative == "deberta") && c.max_relative_distance < 0)
        fail("max_relative_distance must be >= 0 (0 = max_position_embeddings - 1), got " +
             std::to_string(c.max_relative_distance));
    if (c.position_offset < 0)
        fail("position_offset must be >= 0, got " + std::to_string(c.position_offset));
    const bool learned_table =
        d.absolute == "input" || d.absolute == "untied" || d.absolute == "decoupled";
    if (c.randomized_positions_max < 0)
        fail("randomized_positions_max must be >= 0 (0 = off), got " +
             std::to_string(c.randomized_positions_max));
    if (learned_table && c.position_offset + c.randomized_positions_max > c.max_position_embeddings)
        fail("randomized_positions_max: position_offset + " +
             std::to_string(c.randomized_positions_max) +
             " exceeds max_position_embeddings = " + std::to_string(c.max_position_embeddings) +
             ", the rows of the learned table (" + d.absolute + ")");

    d.input_slot = d.absolute == "input" || d.absolute == "sinusoidal";
    d.learned_input = d.absolute == "input";
    d.untied = d.absolute == "untied";
    d.qk_offsets = d.absolute == "decoupled";
    d.rotary = d.relative == "rope";
    d.qk_slot = d.qk_offsets || d.rotary;
    d.untie_cls = c.untie_cls;
    const bool kerple = d.relative == "kerple_log" || d.relative == "kerple_power";
    d.static_bias = d.untied || d.relative == "t5" || d.relative == "alibi" ||
                    d.relative == "fire" || kerple || c.untie_cls;
    d.content_bias = shaw || d.relative == "deberta";
    d.extrapolates = d.absolute == "sinusoidal" || d.absolute == "none";
    // FIRE's normaliser reads the positions themselves, not only their difference (Li et al.
    // 2024: the query's position; here the later of the query's and the key's).
    d.shift_invariant = !d.input_slot && !d.untied && !d.qk_offsets && d.relative != "fire";
    d.order_blind = d.absolute == "none" && d.relative == "none" && !c.untie_cls;
    d.logit_terms = {"content"};
    if (d.relative == "rope") d.logit_terms.push_back("rotation");
    if (d.content_bias) d.logit_terms.push_back("c2p");
    if (d.relative == "shaw_key_query" || d.relative == "deberta") d.logit_terms.push_back("p2c");
    if (d.static_bias) d.logit_terms.push_back("bias");

    std::string s;
    if (d.absolute == "input") s = "learned absolute positions at the input";
    if (d.absolute == "sinusoidal") s = "sinusoidal positions at the input";
    if (d.absolute == "untied") s = "untied positional correlation (TUPE)";
    if (d.absolute == "decoupled") s = "decoupled position projections in attention (BERT-Ad)";
    auto add = [&](const std::string& part) { s += (s.empty() ? "" : " + ") + part; };
    if (d.relative == "t5") add("T5 relative bias");
    if (d.relative == "shaw") add("Shaw relative keys");
    if (d.relative == "shaw_key_query") add("Shaw relative keys and queries");
    if (d.relative == "rope") add("rotary q/k");
    if (d.relative == "alibi") add("ALiBi linear bias");
    if (d.relative == "deberta") add("DeBERTa c2p + p2c");
    if (d.relative == "fire") add("FIRE bias (two-sided)");
    if (d.relative == "kerple_log") add("KERPLE log kernel");
    if (d.relative == "kerple_power") add("KERPLE power kernel");
    if (c.untie_cls) add("[CLS] reset");
    if (s.empty()) s = "no positional information (NoPE)";
    if (c.randomized_positions_max > 0 && !d.order_blind)
        s += ", randomized positions in training (< " + std::to_string(c.randomized_positions_max) +
             ")";
    d.summary = s + ", scale " + fmt_factor(c.attention_scale_factor);
    return d;
}

}  // namespace engine
