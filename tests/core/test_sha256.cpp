// SHA-256 (engine/sha256.h) against the FIPS 180-2 / NIST known answers: the empty message,
// "abc", the 448-bit two-block message and one million 'a'; streaming in uneven pieces equals
// one update; a file's hash equals the hash of its bytes, across the 64 KiB read chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "engine/errors.h"
#include "engine/sha256.h"
#include "support/test_support.h"

using namespace engine;

namespace {

std::string hex_of(Sha256& s) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (std::uint8_t b : s.digest()) {
        out.push_back(digits[b >> 4]);
        out.push_back(digits[b & 0xf]);
    }
    return out;
}

}  // namespace

TEST(Sha256, EmptyMessageKnownAnswer) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, AbcKnownAnswer) {
    EXPECT_EQ(sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, TwoBlockMessageKnownAnswer) {
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, MillionAKnownAnswer) {
    EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, StreamingInPiecesEqualsOneUpdate) {
    const std::string msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    Sha256 s;
    std::size_t at = 0;
    for (std::size_t piece : {1u, 7u, 0u, 30u, 64u}) {
        const std::size_t n = std::min(piece, msg.size() - at);
        s.update(msg.data() + at, n);
        at += n;
    }
    s.update(msg.data() + at, msg.size() - at);
    EXPECT_EQ(hex_of(s), sha256_hex(msg));
}

TEST(Sha256, FileHashEqualsStringHash) {
    // Over one 64 KiB read chunk, not a multiple of the 64-byte block.
    std::string bytes;
    for (int i = 0; i < 70000; ++i) bytes.push_back(static_cast<char>((i * 131) % 256));
    const test_support::TempFile file(test_support::per_test_name("tupe_sha256") + ".bin", bytes);
    EXPECT_EQ(sha256_file_hex(file.path()), sha256_hex(bytes));
}

TEST(Sha256, MissingFileThrowsInputErrorNamingIt) {
    const std::string path = "/nonexistent/tupe_sha256_missing.bin";
    try {
        sha256_file_hex(path);
        FAIL() << "no exception";
    } catch (const InputError& e) {
        EXPECT_EQ(e.path(), path);
    }
}
