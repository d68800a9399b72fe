// The HF remote code that `tupe export` writes beside config.json for every model transformers'
// own BertForMaskedLM cannot compute: the files of python/tupe_hf/, embedded in the library at
// build time (cmake/embed_files.cmake), named in config.json's auto_map.
#pragma once

#include <cstddef>
#include <vector>

namespace analysis::detail {

struct EmbeddedFile {
    const char* name;  ///< the file name in python/tupe_hf/ and in the exported folder
    const unsigned char* data;
    std::size_t size;
};

/// Every file of python/tupe_hf/, in the order analysis/CMakeLists.txt lists them.
const std::vector<EmbeddedFile>& tupe_hf_files();

}  // namespace analysis::detail
