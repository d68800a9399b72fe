// BERT-A's learned absolute positions at the input (Devlin et al. 2019; HF "absolute"): row p_t
// of bert.embeddings.position_embeddings (max_len, C), which the embeddings own and
// attach_input_table hands in, added to token t's word embedding. Shapes: (T) -> (T, C).
#include "scheme_module.h"

namespace engine::schemes {

namespace {

class LearnedInputTable final : public SchemeModule {
  public:
    explicit LearnedInputTable(PositionEncodingImpl& owner) : owner_(owner) {}

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        torch::nn::Embedding table = owner_.input_table();
        TORCH_CHECK(!table.is_empty(), "PositionEncoding: no input table attached");
        terms.input = table->weight.index_select(0, in.positions.to(table->weight.device()));
    }

  private:
    PositionEncodingImpl& owner_;
};

}  // namespace

std::unique_ptr<SchemeModule> make_learned_input(PositionEncodingImpl& owner) {
    return std::make_unique<LearnedInputTable>(owner);
}

}  // namespace engine::schemes
