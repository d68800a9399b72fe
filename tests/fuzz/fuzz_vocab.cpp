// libFuzzer target for the vocabulary loader (engine::Vocab::load, a vocab.txt file). When a
// vocabulary loads, a WordPiece tokenizer is built on it and encodes a fixed sentence pair and
// the input's last bytes as text, so the tokenizer meets odd vocabularies and odd text. Bad
// files must end in engine::InputError (or another std::exception with a message).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "engine/errors.h"
#include "engine/tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string& path = fuzz::scratch_path("-vocab.txt");
    fuzz::write_file(path, data, size);
    try {
        engine::Vocab vocab = engine::Vocab::load(path);
        const int64_t n = vocab.size();
        for (int64_t id :
             {vocab.pad_id(), vocab.unk_id(), vocab.cls_id(), vocab.sep_id(), vocab.mask_id()})
            if (id < 0 || id >= n) __builtin_trap();  // load() promises the five special tokens
        engine::WordPieceTokenizer tokenizer(std::move(vocab));
        const size_t tail = std::min<size_t>(size, 256);
        const std::string text(reinterpret_cast<const char*>(data + size - tail), tail);
        for (const auto& enc :
             {tokenizer.encode("The quick brown fox, unaffable!", "jumps over it.", 32),
              tokenizer.encode(text, "", 64)}) {
            if (enc.input_ids.size() != enc.token_type_ids.size()) __builtin_trap();
            for (int64_t id : enc.input_ids)
                if (id < 0 || id >= n) __builtin_trap();
        }
    } catch (const engine::InputError&) {
    } catch (const std::exception&) {
    }
    return 0;
}
