/*! \file test_npy.cpp
 *  \brief Tests of the strict float32 .npy reader and writer: round trips, hand-built files in
 *         every accepted version, and malformed files that must be refused with a specific reason.
 */
#include "core/npy.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace lstm {
namespace {

const std::string kMagic("\x93NUMPY", 6);
const std::string kF4Header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";

/// A .npy file's bytes: magic, version, little-endian header length (2 bytes for version 1,
/// 4 bytes otherwise), header text as given, payload as given.
std::string make_npy(int major, int minor, const std::string& header, const std::string& payload) {
  std::string bytes = kMagic;
  bytes += static_cast<char>(major);
  bytes += static_cast<char>(minor);
  const std::size_t length_size = major == 1 ? 2 : 4;
  for (std::size_t i = 0; i < length_size; ++i) {
    bytes += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  }
  return bytes + header + payload;
}

/// Little-endian float32 bytes of `values`.
std::string float_bytes(const std::vector<float>& values) {
  std::string bytes;
  for (float v : values) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    for (int i = 0; i < 4; ++i) {
      bytes += static_cast<char>((bits >> (8 * i)) & 0xFF);
    }
  }
  return bytes;
}

std::vector<float> iota_floats(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = 0.5f * static_cast<float>(i) - 1.0f;
  }
  return v;
}

std::uint32_t bits_of(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

/// Each test gets a fresh temporary directory, removed afterwards.
class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::random_device rd;
    std::string safe_name;
    for (char c : name) {
      safe_name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    }
    do {
      dir_ = fs::temp_directory_path() / ("test_npy_" + safe_name + "_" + std::to_string(rd()));
    } while (!fs::create_directory(dir_));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string write_file(const std::string& name, const std::string& bytes) const {
    const std::string p = path(name);
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << p;
    return p;
  }

  static std::string read_file(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  /// Expects read_npy(p) to throw NpyError whose message starts with "<p>: " and contains reason.
  static void expect_refused(const std::string& p, const std::string& reason) {
    try {
      read_npy(p);
      ADD_FAILURE() << p << " was accepted; expected refusal with: " << reason;
    } catch (const NpyError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(p + ": ", 0), 0u) << what;
      EXPECT_NE(what.find(reason), std::string::npos)
          << "message: " << what << "\nexpected: " << reason;
    }
  }

  fs::path dir_;
};

// ---------------------------------------------------------------------------------------------
// Round trips and the writer's format

void expect_round_trip(const std::string& p, const std::vector<std::size_t>& shape,
                       const std::vector<float>& values) {
  write_npy(p, shape, values.data());
  const NpyArray a = read_npy(p);
  EXPECT_EQ(a.shape, shape);
  ASSERT_EQ(a.data.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(bits_of(a.data[i]), bits_of(values[i])) << "element " << i;
  }
}

TEST_F(NpyTest, RoundTripScalar) {
  expect_round_trip(path("s.npy"), {}, {-3.25f});
}

TEST_F(NpyTest, RoundTripVectorWithSpecialValues) {
  const float denorm = std::numeric_limits<float>::denorm_min();
  const std::vector<float> values = {-0.0f,
                                     denorm,
                                     -denorm * 12345.0f,
                                     std::numeric_limits<float>::infinity(),
                                     -std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::quiet_NaN(),
                                     std::numeric_limits<float>::max()};
  expect_round_trip(path("v.npy"), {7}, values);
}

TEST_F(NpyTest, RoundTripMatrix) {
  std::vector<float> values = iota_floats(15);
  values[3] = -1e-30f;
  values[7] = 1e30f;
  expect_round_trip(path("m.npy"), {3, 5}, values);
}

TEST_F(NpyTest, RoundTrip3d) {
  std::vector<float> values = iota_floats(24);
  values[0] = std::nextafter(0.0f, -1.0f);  // negative denormal
  values[23] = 3.14159265f;
  expect_round_trip(path("t.npy"), {2, 3, 4}, values);
}

TEST_F(NpyTest, RoundTripEmptyArray) {
  const std::string p = path("e.npy");
  write_npy(p, {0, 3}, nullptr);
  const NpyArray a = read_npy(p);
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{0, 3}));
  EXPECT_TRUE(a.data.empty());
}

TEST_F(NpyTest, WriterProducesNumpysExactLayout) {
  const std::string p = path("m.npy");
  const std::vector<float> values = iota_floats(15);
  write_npy(p, {3, 5}, values.data());
  const std::string bytes = read_file(p);
  // NumPy pads with 1 to 64 spaces so that magic + version + length + header is a multiple of 64.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), }";
  const std::string header = dict + std::string(128 - 10 - dict.size() - 1, ' ') + "\n";
  EXPECT_EQ(bytes, make_npy(1, 0, header, float_bytes(values)));
}

TEST_F(NpyTest, WriterAlignsEveryShapeTo64Bytes) {
  const std::vector<std::vector<std::size_t>> shapes = {
      {}, {1}, {123456}, {2, 3}, {1, 2, 1, 2, 1, 2, 1, 2, 1, 10, 100, 3}};
  for (const auto& shape : shapes) {
    const std::string p = path("a.npy");
    std::size_t count = 1;
    for (std::size_t d : shape) {
      count *= d;
    }
    const std::vector<float> values(count, 1.5f);
    write_npy(p, shape, values.data());
    const std::string bytes = read_file(p);
    ASSERT_GE(bytes.size(), 10u);
    const std::size_t header_size = static_cast<unsigned char>(bytes[8]) |
                                    static_cast<std::size_t>(static_cast<unsigned char>(bytes[9]))
                                        << 8;
    EXPECT_EQ((10 + header_size) % 64, 0u) << shape_to_string(shape);
    EXPECT_EQ(bytes[10 + header_size - 1], '\n') << shape_to_string(shape);
    EXPECT_NE(bytes.find("'shape': " + shape_to_string(shape) + ", }"), std::string::npos);
    EXPECT_EQ(bytes.size(), 10 + header_size + 4 * count);
    EXPECT_EQ(read_npy(p).shape, shape);
  }
}

TEST_F(NpyTest, ShapeToString) {
  EXPECT_EQ(shape_to_string({}), "()");
  EXPECT_EQ(shape_to_string({5}), "(5,)");
  EXPECT_EQ(shape_to_string({4, 2, 3}), "(4, 2, 3)");
}

TEST_F(NpyTest, WriteToMissingDirectoryThrows) {
  const std::string p = path("no_such_dir/x.npy");
  const float v = 1.0f;
  try {
    write_npy(p, {1}, &v);
    ADD_FAILURE() << "write_npy succeeded";
  } catch (const NpyError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(p + ": ", 0), 0u) << what;
    EXPECT_NE(what.find("cannot write"), std::string::npos) << what;
  }
}

// ---------------------------------------------------------------------------------------------
// Hand-built files that must be accepted

TEST_F(NpyTest, ReadsVersion2) {
  const std::vector<float> values = iota_floats(6);
  const std::string p = write_file("v2.npy", make_npy(2, 0, kF4Header, float_bytes(values)));
  const NpyArray a = read_npy(p);
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(a.data, values);
}

TEST_F(NpyTest, ReadsVersion3) {
  const std::vector<float> values = iota_floats(6);
  const std::string p = write_file("v3.npy", make_npy(3, 0, kF4Header, float_bytes(values)));
  const NpyArray a = read_npy(p);
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(a.data, values);
}

TEST_F(NpyTest, ReadsDoubleQuotesNoTrailingCommaAnyOrderAnyWhitespace) {
  const std::vector<float> values = iota_floats(4);
  const std::string header =
      "{ \"shape\" :\t( 4 , ) ,\n \"fortran_order\": False,\"descr\":\"<f4\"}   \n";
  const std::string p = write_file("dq.npy", make_npy(1, 0, header, float_bytes(values)));
  const NpyArray a = read_npy(p);
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{4}));
  EXPECT_EQ(a.data, values);
}

TEST_F(NpyTest, ReadsHandBuiltScalar) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': ()}\n";
  const std::string p = write_file("s.npy", make_npy(1, 0, header, float_bytes({42.0f})));
  const NpyArray a = read_npy(p);
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.data, std::vector<float>{42.0f});
}

TEST_F(NpyTest, ReadShapedAcceptsMatchingShape) {
  const std::vector<float> values = iota_floats(6);
  const std::string p = write_file("ok.npy", make_npy(1, 0, kF4Header, float_bytes(values)));
  EXPECT_EQ(read_npy_shaped(p, {2, 3}).data, values);
}

TEST_F(NpyTest, ReadShapedRefusesWrongShape) {
  const std::vector<float> values = iota_floats(6);
  const std::string p = write_file("ws.npy", make_npy(1, 0, kF4Header, float_bytes(values)));
  try {
    read_npy_shaped(p, {3, 2});
    ADD_FAILURE() << "wrong shape accepted";
  } catch (const NpyError& e) {
    EXPECT_EQ(std::string(e.what()), p + ": shape (2, 3) where (3, 2) was expected");
  }
}

// ---------------------------------------------------------------------------------------------
// Files that must be refused

TEST_F(NpyTest, RefusesMissingFile) {
  expect_refused(path("absent.npy"), "missing (no such file)");
}

TEST_F(NpyTest, RefusesDirectory) {
  expect_refused(dir_.string(), "is a directory");
}

TEST_F(NpyTest, ReadShapedRefusesMissingFile) {
  EXPECT_THROW(read_npy_shaped(path("absent.npy"), {1}), NpyError);
}

/// One malformed file: its bytes and the reason it must be refused with.
struct BadCase {
  std::string name;
  std::string bytes;
  std::string reason;
};

/// Lets a failing case print as its name rather than as raw bytes.
void PrintTo(const BadCase& c, std::ostream* os) {
  *os << c.name;
}

std::string header_with(const std::string& descr, const std::string& fortran,
                        const std::string& shape) {
  return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n";
}

std::vector<BadCase> bad_cases() {
  const std::string six = float_bytes(iota_floats(6));
  const std::string max = std::to_string(std::numeric_limits<std::size_t>::max());
  const std::string half = std::to_string(std::numeric_limits<std::size_t>::max() / 2);
  std::string beyond = make_npy(1, 0, kF4Header, six);
  beyond[8] = '\xff';  // header length 0x7fff: far past the end of the file
  beyond[9] = '\x7f';
  std::string bad_magic = make_npy(1, 0, kF4Header, six);
  bad_magic[5] = 'Z';
  return {
      {"Empty", "", "empty file (0 bytes)"},
      {"ShorterThanMagic", "\x93NUM", "not a .npy file (bad magic)"},
      {"BadMagic", bad_magic, "not a .npy file (bad magic)"},
      {"Version4", make_npy(4, 0, kF4Header, six), "unsupported .npy version 4.0"},
      {"Version1_1", make_npy(1, 1, kF4Header, six), "unsupported .npy version 1.1"},
      {"MagicOnly", kMagic, "truncated header"},
      {"NoHeaderLength", kMagic + "\x01" + std::string(1, '\0') + "\x05", "truncated header"},
      {"HeaderLengthBeyondEnd", beyond, "truncated header"},
      {"HeaderNotADict", make_npy(1, 0, "[('descr', '<f4')]\n", six), "malformed header"},
      {"EmptyHeader", make_npy(1, 0, "", six), "malformed header"},
      {"UnterminatedDict", make_npy(1, 0, "{'descr': '<f4', 'fortran_order': False", ""),
       "malformed header"},
      {"JunkAfterDict", make_npy(1, 0, kF4Header + "x", six), "malformed header"},
      {"UnquotedKey",
       make_npy(1, 0, "{descr: '<f4', 'fortran_order': False, 'shape': (2, 3)}", six),
       "malformed header"},
      {"DuplicateKey",
       make_npy(1, 0, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
                six),
       "malformed header"},
      {"MissingShape", make_npy(1, 0, "{'descr': '<f4', 'fortran_order': False, }\n", six),
       "missing key 'shape'"},
      {"MissingDescr", make_npy(1, 0, "{'fortran_order': False, 'shape': (2, 3), }\n", six),
       "missing key 'descr'"},
      {"ExtraKey",
       make_npy(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'order': 'C', }\n",
                six),
       "unexpected key 'order'"},
      {"DescrF8", make_npy(1, 0, header_with("'<f8'", "False", "(2, 3)"), six + six),
       "dtype '<f8' is not float32 little-endian ('<f4')"},
      {"DescrBigEndian", make_npy(1, 0, header_with("'>f4'", "False", "(2, 3)"), six),
       "dtype '>f4' is not float32 little-endian ('<f4')"},
      {"DescrI4", make_npy(1, 0, header_with("'<i4'", "False", "(2, 3)"), six),
       "dtype '<i4' is not float32 little-endian ('<f4')"},
      {"DescrNativeOrder", make_npy(1, 0, header_with("'=f4'", "False", "(2, 3)"), six),
       "dtype '=f4' is not float32 little-endian ('<f4')"},
      {"DescrNotApplicable", make_npy(1, 0, header_with("'|f4'", "False", "(2, 3)"), six),
       "dtype '|f4' is not float32 little-endian ('<f4')"},
      {"DescrStructured", make_npy(1, 0, header_with("[('a', '<f4')]", "False", "(2, 3)"), six),
       "is not float32 little-endian ('<f4')"},
      {"FortranOrder", make_npy(1, 0, header_with("'<f4'", "True", "(2, 3)"), six),
       "Fortran order is not supported"},
      {"FortranOrderNotBool", make_npy(1, 0, header_with("'<f4'", "0", "(2, 3)"), six),
       "malformed header"},
      {"ShapeNegative", make_npy(1, 0, header_with("'<f4'", "False", "(2, -3)"), six),
       "malformed shape"},
      {"ShapeNonInteger", make_npy(1, 0, header_with("'<f4'", "False", "(2.5, 3)"), six),
       "malformed shape"},
      {"ShapeString", make_npy(1, 0, header_with("'<f4'", "False", "('2', 3)"), six),
       "malformed shape"},
      {"ShapeNotATuple", make_npy(1, 0, header_with("'<f4'", "False", "(6)"), six),
       "malformed shape"},
      {"ShapeList", make_npy(1, 0, header_with("'<f4'", "False", "[2, 3]"), six),
       "malformed shape"},
      {"ShapeDimOverflows", make_npy(1, 0, header_with("'<f4'", "False", "(" + max + "0,)"), six),
       "size overflows"},
      {"ShapeProductOverflows",
       make_npy(1, 0, header_with("'<f4'", "False", "(" + max + ", 2)"), six), "size overflows"},
      {"ShapeByteCountOverflows",
       make_npy(1, 0, header_with("'<f4'", "False", "(" + half + ",)"), six), "size overflows"},
      {"PayloadOneFloatShort", make_npy(1, 0, kF4Header, float_bytes(iota_floats(5))),
       "truncated payload: expected 24 bytes, found 20"},
      {"PayloadHugeShape", make_npy(1, 0, header_with("'<f4'", "False", "(1000000000, 1000)"), six),
       "truncated payload: expected 4000000000000 bytes, found 24"},
      {"PayloadThreeExtraBytes", make_npy(1, 0, kF4Header, six + "abc"),
       "trailing bytes after payload"},
  };
}

class NpyBadFileTest : public NpyTest, public ::testing::WithParamInterface<BadCase> {};

TEST_P(NpyBadFileTest, IsRefused) {
  const BadCase& c = GetParam();
  expect_refused(write_file(c.name + ".npy", c.bytes), c.reason);
}

INSTANTIATE_TEST_SUITE_P(Malformed, NpyBadFileTest, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace lstm
