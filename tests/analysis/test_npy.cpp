// Tests of the .npy and CSV writers (analysis/npy.h): round trips per dtype and rank, the
// version 1.0 header layout (64-byte alignment, 1-d trailing comma), clear errors naming the
// file for bad input, and, when /usr/bin/python3 has NumPy, NumPy itself loading our files.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "analysis/npy.h"
#include "engine/errors.h"
#include "support/test_support.h"

namespace fs = std::filesystem;
using analysis::read_npy;
using analysis::write_csv;
using analysis::write_npy;

namespace {

/// A fresh directory per test (tupe_npy_<test>_<random>), removed afterwards; file(name) is the
/// path of a file in it.
class NpyTest : public test_support::TempDirTest {
  protected:
    NpyTest()
        : TempDirTest("tupe_npy_" + test_support::test_name() + "_" + test_support::random_tag()) {}
};

using test_support::read_file;

/// A .npy v1.0 file with a hand-written header dict (padded as numpy pads) and raw data bytes.
void write_raw_npy(const std::string& path, const std::string& dict, const std::string& data) {
    std::string header = dict;
    header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::ofstream out(path, std::ios::binary);
    out << "\x93NUMPY" << '\x01' << '\x00';
    out << static_cast<char>(header.size() & 0xff) << static_cast<char>(header.size() >> 8);
    out << header << data;
}

/// Runs `body` expecting an engine::InputError whose message names `path` and contains `what`.
template <typename F>
void expect_input_error(F body, const std::string& path, const std::string& what) {
    try {
        body();
        FAIL() << "expected engine::InputError for " << path;
    } catch (const engine::InputError& e) {
        EXPECT_EQ(e.path(), path);
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
}

bool python_has_numpy() {
    return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

}  // namespace

TEST_F(NpyTest, RoundTripFloat32ThreeD) {
    torch::manual_seed(1);
    const torch::Tensor t = torch::randn({2, 3, 4});
    write_npy(file("a.npy"), t);
    const torch::Tensor back = read_npy(file("a.npy"));
    EXPECT_EQ(back.scalar_type(), torch::kFloat);
    EXPECT_EQ(back.sizes(), t.sizes());
    EXPECT_TRUE(torch::equal(back, t));
}

TEST_F(NpyTest, RoundTripInt64OneD) {
    const torch::Tensor t = torch::arange(7, torch::kLong) * int64_t{1000000007} - 3;
    write_npy(file("ids.npy"), t);
    const torch::Tensor back = read_npy(file("ids.npy"));
    EXPECT_EQ(back.scalar_type(), torch::kLong);
    EXPECT_EQ(back.dim(), 1);
    EXPECT_TRUE(torch::equal(back, t));
}

TEST_F(NpyTest, RoundTripOtherDtypes) {
    const torch::Tensor f64 = torch::linspace(-1.0, 1.0, 6, torch::kDouble).view({2, 3});
    const torch::Tensor i32 = torch::arange(-4, 4, torch::kInt);
    const torch::Tensor u8 = torch::arange(0, 256, torch::kLong).to(torch::kByte).view({16, 16});
    const torch::Tensor b = torch::tensor({true, false, true});
    for (const torch::Tensor& t : {f64, i32, u8, b}) {
        write_npy(file("t.npy"), t);
        const torch::Tensor back = read_npy(file("t.npy"));
        EXPECT_EQ(back.scalar_type(), t.scalar_type());
        EXPECT_TRUE(torch::equal(back, t)) << t.scalar_type();
    }
}

TEST_F(NpyTest, HalfAndBFloat16AreWrittenAsFloat32) {
    const torch::Tensor t = torch::tensor({0.5, -2.0, 3.25});
    for (auto type : {torch::kHalf, torch::kBFloat16}) {
        write_npy(file("h.npy"), t.to(type));
        const torch::Tensor back = read_npy(file("h.npy"));
        EXPECT_EQ(back.scalar_type(), torch::kFloat);
        EXPECT_TRUE(torch::equal(back, t.to(torch::kFloat)));
    }
}

TEST_F(NpyTest, NonContiguousScalarAndEmptyTensors) {
    const torch::Tensor t = torch::arange(12, torch::kFloat).view({3, 4}).t();  // (4, 3) view
    write_npy(file("t.npy"), t);
    EXPECT_TRUE(torch::equal(read_npy(file("t.npy")), t));

    const torch::Tensor scalar = torch::tensor(2.5);
    write_npy(file("s.npy"), scalar);
    const torch::Tensor s = read_npy(file("s.npy"));
    EXPECT_EQ(s.dim(), 0);
    EXPECT_EQ(s.item<float>(), 2.5f);

    const torch::Tensor empty = torch::zeros({0, 3});
    write_npy(file("e.npy"), empty);
    EXPECT_EQ(read_npy(file("e.npy")).sizes(), empty.sizes());
}

TEST_F(NpyTest, HeaderIsVersion1PaddedToMultipleOf64) {
    const std::vector<std::pair<torch::Tensor, std::string>> cases = {
        {torch::zeros({5}, torch::kLong),
         "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }"},
        {torch::zeros({2, 3, 4}), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }"},
        {torch::zeros({1, 2, 3, 4, 5, 6, 7}, torch::kDouble), "'shape': (1, 2, 3, 4, 5, 6, 7), }"},
    };
    for (const auto& [t, expected] : cases) {
        write_npy(file("h.npy"), t);
        const std::string bytes = read_file(file("h.npy"));
        ASSERT_GE(bytes.size(), 10u);
        EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
        EXPECT_EQ(bytes[6], '\x01');
        EXPECT_EQ(bytes[7], '\x00');
        const size_t header_len = static_cast<unsigned char>(bytes[8]) |
                                  (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
        EXPECT_EQ((10 + header_len) % 64, 0u) << header_len;
        const std::string header = bytes.substr(10, header_len);
        EXPECT_EQ(header.back(), '\n');
        EXPECT_NE(header.find(expected), std::string::npos) << header;
        EXPECT_EQ(static_cast<int64_t>(bytes.size() - 10 - header_len),
                  t.numel() * t.element_size());
    }
}

TEST_F(NpyTest, TruncatedDataThrowsNamingTheFile) {
    const std::string p = file("trunc.npy");
    write_npy(p, torch::ones({4, 4}));
    fs::resize_file(p, fs::file_size(p) - 5);
    expect_input_error([&] { read_npy(p); }, p, "truncated");

    // Truncated inside the header too.
    fs::resize_file(p, 20);
    expect_input_error([&] { read_npy(p); }, p, "truncated");
}

TEST_F(NpyTest, BadMagicThrowsNamingTheFile) {
    const std::string p = file("bad.npy");
    std::ofstream(p) << "this is not a numpy file at all\n";
    expect_input_error([&] { read_npy(p); }, p, "magic");

    const std::string tiny = file("tiny.npy");
    std::ofstream(tiny) << "\x93NU";
    expect_input_error([&] { read_npy(tiny); }, tiny, "magic");
}

TEST_F(NpyTest, MissingFileThrowsNamingTheFile) {
    const std::string p = file("does_not_exist.npy");
    expect_input_error([&] { read_npy(p); }, p, "cannot open");
}

TEST_F(NpyTest, FortranOrderAndUnsupportedDtypesThrow) {
    const std::string fortran = file("f.npy");
    write_raw_npy(fortran, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                  std::string(16, '\0'));
    expect_input_error([&] { read_npy(fortran); }, fortran, "Fortran");

    const std::string half = file("f2.npy");
    write_raw_npy(half, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",
                  std::string(4, '\0'));
    expect_input_error([&] { read_npy(half); }, half, "'<f2'");

    const std::string big = file("big.npy");
    write_raw_npy(big, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
                  std::string(4, '\0'));
    expect_input_error([&] { read_npy(big); }, big, "big-endian");

    const std::string no_shape = file("ns.npy");
    write_raw_npy(no_shape, "{'descr': '<f4', 'fortran_order': False, }", std::string(4, '\0'));
    expect_input_error([&] { read_npy(no_shape); }, no_shape, "shape");

    const std::string extra = file("extra.npy");
    write_raw_npy(extra, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }",
                  std::string(8, '\0'));
    expect_input_error([&] { read_npy(extra); }, extra, "unexpected bytes");
}

TEST_F(NpyTest, ReadsHandWrittenNumpyStyleHeader) {
    // Double quotes and a different key order are still valid Python dict literals.
    const std::string p = file("hand.npy");
    const int32_t values[3] = {7, -1, 42};
    write_raw_npy(p, "{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<i4\"}",
                  std::string(reinterpret_cast<const char*>(values), sizeof(values)));
    const torch::Tensor t = read_npy(p);
    EXPECT_TRUE(torch::equal(t, torch::tensor({7, -1, 42}, torch::kInt)));
}

TEST_F(NpyTest, WriteIntoMissingDirectoryThrowsAndLeavesNoFile) {
    const std::string p = file("no/such/dir/x.npy");
    expect_input_error([&] { write_npy(p, torch::ones({2})); }, p, "cannot open");
    EXPECT_FALSE(fs::exists(p + ".tmp"));
}

TEST_F(NpyTest, OverwriteReplacesAndLeavesNoTemporary) {
    const std::string p = file("x.npy");
    write_npy(p, torch::ones({100}));
    write_npy(p, torch::zeros({2}, torch::kLong));
    EXPECT_TRUE(torch::equal(read_npy(p), torch::zeros({2}, torch::kLong)));
    EXPECT_FALSE(fs::exists(p + ".tmp"));
}

TEST_F(NpyTest, UnsupportedWriteDtypeThrows) {
    const std::string p = file("c.npy");
    expect_input_error([&] { write_npy(p, torch::zeros({2}, torch::kShort)); }, p, "dtype");
    EXPECT_FALSE(fs::exists(p));
}

TEST_F(NpyTest, CsvRowsUseSixSignificantDigits) {
    const std::string p = file("m.csv");
    write_csv(
        p,
        torch::tensor({1.0, 2.5, -3.0, 1.0 / 3.0, 1e-7, 1234567.0}, torch::kDouble).view({2, 3}));
    EXPECT_EQ(read_file(p), "1,2.5,-3\n0.333333,1e-07,1.23457e+06\n");
    write_csv(p, torch::tensor({4, 5}, torch::kLong).view({2, 1}));
    EXPECT_EQ(read_file(p), "4\n5\n");
    EXPECT_THROW(write_csv(p, torch::ones({3})), std::invalid_argument);
}

TEST_F(NpyTest, NumpyLoadsOurFiles) {
    if (!python_has_numpy())
        GTEST_SKIP() << "/usr/bin/python3 with numpy not available; cannot cross-check with NumPy";
    torch::manual_seed(3);
    const torch::Tensor f = torch::randn({2, 3, 5});
    const torch::Tensor ids = torch::arange(11, torch::kLong);
    write_npy(file("f.npy"), f);
    write_npy(file("ids.npy"), ids);
    const std::string script = file("check.py");
    std::ofstream(script)
        << "import sys, numpy as np\n"
           "for p in sys.argv[1:-1]:\n"
           "    a = np.load(p)\n"
           "    print(a.dtype.str, a.shape, repr(float(a.astype(np.float64).sum())))\n";
    const std::string out = file("out.txt");
    const std::string cmd = "/usr/bin/python3 '" + script + "' '" + file("f.npy") + "' '" +
                            file("ids.npy") + "' x > '" + out + "' 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << read_file(out);

    std::istringstream lines(read_file(out));
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    EXPECT_EQ(line.substr(0, line.rfind(' ')), "<f4 (2, 3, 5)");
    EXPECT_NEAR(std::stod(line.substr(line.rfind(' ') + 1)),
                f.to(torch::kDouble).sum().item<double>(), 1e-9);
    ASSERT_TRUE(std::getline(lines, line));
    EXPECT_EQ(line, "<i8 (11,) 55.0");
}

TEST_F(NpyTest, ReadsFilesNumpyWrote) {
    if (!python_has_numpy())
        GTEST_SKIP() << "/usr/bin/python3 with numpy not available; cannot cross-check with NumPy";
    const std::string dir = dir_.string();
    const std::string script = file("make.py");
    std::ofstream(script)
        << "import sys, numpy as np\n"
           "d = sys.argv[1]\n"
           "np.save(d + '/f.npy', np.arange(24, dtype=np.float32).reshape(2, 3, 4))\n"
           "np.save(d + '/i.npy', np.array([5, -6, 7], dtype=np.int64))\n"
           "np.save(d + '/u.npy', np.array([[1, 255]], dtype=np.uint8))\n"
           "np.save(d + '/t.npy', np.arange(6, dtype=np.float64).reshape(2, 3).T)\n"
           "np.save(d + '/h.npy', np.ones(3, dtype=np.float16))\n";
    const std::string cmd = "/usr/bin/python3 '" + script + "' '" + dir + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);

    EXPECT_TRUE(
        torch::equal(read_npy(file("f.npy")), torch::arange(24, torch::kFloat).view({2, 3, 4})));
    EXPECT_TRUE(torch::equal(read_npy(file("i.npy")), torch::tensor({5, -6, 7}, torch::kLong)));
    EXPECT_TRUE(torch::equal(read_npy(file("u.npy")),
                             torch::tensor({1, 255}, torch::kInt).to(torch::kByte).view({1, 2})));
    // NumPy saves a transposed C array as Fortran order; we refuse rather than misread it.
    expect_input_error([&] { read_npy(file("t.npy")); }, file("t.npy"), "Fortran");
    expect_input_error([&] { read_npy(file("h.npy")); }, file("h.npy"), "'<f2'");
}
