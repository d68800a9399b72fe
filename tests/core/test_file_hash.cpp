// file_hash / file_hash_matches (experiments/analysis_artifacts.h): a stored hash against the
// file it names, SHA-256 ("sha256:") and the older FNV-1a 64 ("fnv1a64:"): the same bytes
// match, one changed byte does not, a missing file is an InputError naming it, and an empty
// or unknown hash never matches.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/errors.h"
#include "experiments/analysis_artifacts.h"
#include "support/test_support.h"

namespace {

using experiments::file_hash;
using experiments::file_hash_matches;

class FileHashTest : public test_support::TempDirTest {
  protected:
    FileHashTest() : TempDirTest(test_support::per_test_name("tupe_file_hash")) {}
};

TEST_F(FileHashTest, Sha256OfAKnownFile) {
    // FIPS 180-2, appendix B.1: SHA-256("abc").
    const auto path = write("abc.txt", "abc").string();
    EXPECT_EQ(file_hash(path),
              "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(FileHashTest, MatchingFileMatches) {
    const auto path = write("m.npy", "some bytes\n").string();
    const std::string stored = file_hash(path);
    EXPECT_TRUE(file_hash_matches(path, stored));
    // The same bytes under another name match too: the hash is of the content.
    EXPECT_TRUE(file_hash_matches(write("copy.npy", "some bytes\n").string(), stored));
}

TEST_F(FileHashTest, ModifiedFileDoesNotMatch) {
    const auto path = write("m.npy", "some bytes\n").string();
    const std::string stored = file_hash(path);
    write("m.npy", "some bytes!");  // same length, one byte changed
    EXPECT_FALSE(file_hash_matches(path, stored));
    write("m.npy", "some bytes\n");  // changed back
    EXPECT_TRUE(file_hash_matches(path, stored));
    write("m.npy", "");
    EXPECT_FALSE(file_hash_matches(path, stored));
}

TEST_F(FileHashTest, MissingFileIsAnInputErrorNamingIt) {
    const std::string path = file("missing.npy");
    const std::string stored = "sha256:" + std::string(64, '0');
    try {
        file_hash_matches(path, stored);
        FAIL() << "expected an InputError for a missing file";
    } catch (const engine::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("missing.npy"), std::string::npos) << e.what();
    }
    EXPECT_THROW(file_hash_matches(path, "fnv1a64:a430d84680aabd0b"), engine::InputError);
}

TEST_F(FileHashTest, OlderFnv1a64HashesAreStillChecked) {
    // FNV-1a 64 of "hello" (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
    const auto path = write("old.txt", "hello").string();
    EXPECT_TRUE(file_hash_matches(path, "fnv1a64:a430d84680aabd0b"));
    EXPECT_FALSE(file_hash_matches(path, "fnv1a64:a430d84680aabd0c"));
    write("old.txt", "hellO");
    EXPECT_FALSE(file_hash_matches(path, "fnv1a64:a430d84680aabd0b"));
}

TEST_F(FileHashTest, EmptyOrUnknownHashNeverMatches) {
    const auto path = write("x.txt", "abc").string();
    EXPECT_FALSE(file_hash_matches(path, ""));
    EXPECT_FALSE(file_hash_matches(path, "md5:900150983cd24fb0d6963f7d28e17f72"));
    // The SHA-256 digits without their algorithm are not a hash this store wrote.
    EXPECT_FALSE(file_hash_matches(
        path, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
}

}  // namespace
