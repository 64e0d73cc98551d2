/*! \file npy.cpp
 *  \brief A strict reader and writer for float32 NumPy .npy files; see npy.h for what is accepted.
 */
#include "core/npy.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

namespace lstm {
namespace {

// The payload is memcpy'd between float arrays and little-endian '<f4' bytes.
static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559,
              "float must be IEEE 754 binary32");
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the .npy payload code assumes a "
              "little-endian host");
#endif

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
constexpr std::size_t kVersionSize = 2;
constexpr std::size_t kAlignment = 64;  // NumPy aligns the payload of the files it writes to 64
constexpr std::size_t kMaxHeaderV1 = 0xFFFF;

const char* const kKeys[] = {"descr", "fortran_order", "shape"};

/// Throws NpyError("<path>: <reason>").
[[noreturn]] void fail(const std::string& path, const std::string& reason) {
  throw NpyError(path + ": " + reason);
}

/// Whitespace as Python's tokenizer sees it inside a dict literal.
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/// A position in a piece of header text.
struct Cursor {
  std::string_view text;
  std::size_t pos = 0;

  bool at_end() const { return pos >= text.size(); }
  char peek() const { return at_end() ? '\0' : text[pos]; }
  void skip_space() {
    while (!at_end() && is_space(text[pos])) {
      ++pos;
    }
  }
  bool consume(char c) {
    if (at_end() || text[pos] != c) {
      return false;
    }
    ++pos;
    return true;
  }
};

/// Reads a '...' or "..." string without escapes (none of the accepted keys or values needs one).
std::optional<std::string> parse_quoted(Cursor& c) {
  const char quote = c.peek();
  if (quote != '\'' && quote != '"') {
    return std::nullopt;
  }
  const std::size_t end = c.text.find(quote, c.pos + 1);
  if (end == std::string_view::npos) {
    return std::nullopt;
  }
  std::string s(c.text.substr(c.pos + 1, end - c.pos - 1));
  if (s.find_first_of("\\\n") != std::string::npos) {
    return std::nullopt;
  }
  c.pos = end + 1;
  return s;
}

/// Returns the raw text of one dict value: everything up to the ',' or '}' that ends it at
/// bracket depth 0, without surrounding whitespace. Strings and nested brackets are skipped over.
std::string scan_value(const std::string& path, Cursor& c) {
  const std::size_t begin = c.pos;
  int depth = 0;
  while (!c.at_end()) {
    const char ch = c.peek();
    if (ch == '\'' || ch == '"') {
      const std::size_t end = c.text.find(ch, c.pos + 1);
      if (end == std::string_view::npos) {
        fail(path, "malformed header");
      }
      c.pos = end + 1;
      continue;
    }
    if (depth == 0 && (ch == ',' || ch == '}')) {
      break;
    }
    if (ch == '(' || ch == '[' || ch == '{') {
      ++depth;
    } else if (ch == ')' || ch == ']' || ch == '}') {
      if (--depth < 0) {
        fail(path, "malformed header");
      }
    }
    ++c.pos;
  }
  std::string_view value = c.text.substr(begin, c.pos - begin);
  while (!value.empty() && is_space(value.back())) {
    value.remove_suffix(1);
  }
  if (c.at_end() || depth != 0 || value.empty()) {
    fail(path, "malformed header");
  }
  return std::string(value);
}

/// Parses the header dict into key -> raw value text; refuses unknown, duplicate and missing keys.
std::map<std::string, std::string> parse_header_dict(const std::string& path,
                                                     std::string_view header) {
  Cursor c{header};
  c.skip_space();
  if (!c.consume('{')) {
    fail(path, "malformed header");
  }
  std::map<std::string, std::string> dict;
  for (;;) {
    c.skip_space();
    if (c.consume('}')) {
      break;  // empty dict, or a trailing comma before the brace
    }
    const std::optional<std::string> key = parse_quoted(c);
    if (!key) {
      fail(path, "malformed header");
    }
    if (*key != kKeys[0] && *key != kKeys[1] && *key != kKeys[2]) {
      fail(path, "unexpected key '" + *key + "'");
    }
    if (dict.count(*key) != 0) {
      fail(path, "malformed header (duplicate key '" + *key + "')");
    }
    c.skip_space();
    if (!c.consume(':')) {
      fail(path, "malformed header");
    }
    c.skip_space();
    dict[*key] = scan_value(path, c);
    c.skip_space();
    if (c.consume(',')) {
      continue;
    }
    if (c.consume('}')) {
      break;
    }
    fail(path, "malformed header");
  }
  c.skip_space();  // NumPy pads the header with spaces and ends it with '\n'
  if (!c.at_end()) {
    fail(path, "malformed header");
  }
  for (const char* key : kKeys) {
    if (dict.count(key) == 0) {
      fail(path, std::string("missing key '") + key + "'");
    }
  }
  return dict;
}

/// Checks that the raw descr value is exactly the string '<f4'.
void check_descr(const std::string& path, const std::string& raw) {
  Cursor c{raw};
  const std::optional<std::string> descr = parse_quoted(c);
  const bool is_string = descr && c.at_end();
  if (!is_string || *descr != "<f4") {
    // A descr that is not a plain string (e.g. a structured dtype's list) shows as raw text.
    fail(path, "dtype '" + (is_string ? *descr : raw) + "' is not float32 little-endian ('<f4')");
  }
}

void check_fortran_order(const std::string& path, const std::string& raw) {
  if (raw == "True") {
    fail(path, "Fortran order is not supported");
  }
  if (raw != "False") {
    fail(path, "malformed header");
  }
}

/// Parses one non-negative decimal integer that must fit in size_t.
std::size_t parse_dim(const std::string& path, Cursor& c) {
  if (!is_digit(c.peek())) {
    fail(path, "malformed shape");
  }
  if (c.peek() == '0' && c.pos + 1 < c.text.size() && is_digit(c.text[c.pos + 1])) {
    fail(path, "malformed shape");  // Python 3 has no leading zeros in decimal literals
  }
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  std::size_t value = 0;
  while (is_digit(c.peek())) {
    const auto digit = static_cast<std::size_t>(c.peek() - '0');
    if (value > (kMax - digit) / 10) {
      fail(path, "size overflows");
    }
    value = value * 10 + digit;
    ++c.pos;
  }
  return value;
}

/// Parses a Python tuple of non-negative integers: "()", "(5,)", "(2, 3)", "(2, 3,)".
std::vector<std::size_t> parse_shape(const std::string& path, const std::string& raw) {
  Cursor c{raw};
  if (!c.consume('(')) {
    fail(path, "malformed shape");
  }
  std::vector<std::size_t> shape;
  c.skip_space();
  if (!c.consume(')')) {
    for (;;) {
      c.skip_space();
      shape.push_back(parse_dim(path, c));
      c.skip_space();
      if (c.consume(')')) {
        if (shape.size() == 1) {
          fail(path, "malformed shape");  // "(5)" is an int in Python, not a tuple
        }
        break;
      }
      if (!c.consume(',')) {
        fail(path, "malformed shape");
      }
      c.skip_space();
      if (c.consume(')')) {
        break;
      }
    }
  }
  if (!c.at_end()) {
    fail(path, "malformed shape");
  }
  return shape;
}

/// prod(shape), 1 for a scalar; throws "size overflows" where it does not fit in size_t.
std::size_t element_count(const std::string& path, const std::vector<std::size_t>& shape) {
  for (std::size_t dim : shape) {
    if (dim == 0) {
      return 0;  // an empty array, however large its other dimensions
    }
  }
  std::size_t count = 1;
  for (std::size_t dim : shape) {
    if (count > std::numeric_limits<std::size_t>::max() / dim) {
      fail(path, "size overflows");
    }
    count *= dim;
  }
  return count;
}

/// The payload size of `count` floats; throws "size overflows" where it does not fit in size_t.
std::size_t payload_bytes(const std::string& path, std::size_t count) {
  if (count > std::numeric_limits<std::size_t>::max() / sizeof(float)) {
    fail(path, "size overflows");
  }
  return count * sizeof(float);
}

/// Reads exactly `n` bytes; the caller has already checked them against the file size.
void read_exact(const std::string& path, std::ifstream& in, void* dst, std::size_t n) {
  if (n != 0 && !in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n))) {
    fail(path, "read error");
  }
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  if (!std::filesystem::exists(path)) fail(path, "missing (no such file)");
  if (std::filesystem::is_directory(path)) fail(path, "is a directory, not a .npy file");
  std::ifstream in(path, std::ios::binary);
  const int open_errno = errno;
  std::error_code ec;
  const std::uintmax_t file_size = std::filesystem::file_size(path, ec);
  if (!in || ec) {
    fail(path, "cannot open: " + (ec ? ec.message() : std::string(std::strerror(open_errno))));
  }

  unsigned char magic[kMagicSize];
  if (file_size == 0) fail(path, "empty file (0 bytes), not a .npy file");
  if (file_size < kMagicSize) {
    fail(path, "not a .npy file (bad magic)");
  }
  read_exact(path, in, magic, kMagicSize);
  if (std::memcmp(magic, kMagic, kMagicSize) != 0) {
    fail(path, "not a .npy file (bad magic)");
  }

  unsigned char version[kVersionSize];
  if (file_size < kMagicSize + kVersionSize) {
    fail(path, "truncated header");
  }
  read_exact(path, in, version, kVersionSize);
  const int major = version[0];
  const int minor = version[1];
  if (minor != 0 || major < 1 || major > 3) {
    fail(path, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor));
  }

  // Version 1.0: a 2-byte header length; 2.0 and 3.0 (utf-8 header): 4 bytes; little-endian.
  const std::size_t length_size = major == 1 ? 2 : 4;
  const std::size_t preamble_size = kMagicSize + kVersionSize + length_size;
  if (file_size < preamble_size) {
    fail(path, "truncated header");
  }
  unsigned char length_bytes[4];
  read_exact(path, in, length_bytes, length_size);
  std::uint32_t header_size = 0;
  for (std::size_t i = length_size; i-- > 0;) {
    header_size = (header_size << 8) | length_bytes[i];
  }
  if (file_size - preamble_size < header_size) {
    fail(path, "truncated header");
  }
  std::string header(header_size, '\0');
  read_exact(path, in, header.data(), header.size());

  const std::map<std::string, std::string> dict = parse_header_dict(path, header);
  check_descr(path, dict.at("descr"));
  check_fortran_order(path, dict.at("fortran_order"));
  NpyArray array;
  array.shape = parse_shape(path, dict.at("shape"));
  const std::size_t count = element_count(path, array.shape);
  const std::size_t expected = payload_bytes(path, count);

  // Compare with the file size before allocating, so a bogus shape cannot trigger a huge one.
  const std::uintmax_t found = file_size - preamble_size - header_size;
  if (found < expected) {
    fail(path, "truncated payload: expected " + std::to_string(expected) + " bytes, found " +
                   std::to_string(found));
  }
  if (found > expected) {
    fail(path, "trailing bytes after payload (expected " + std::to_string(expected) +
                   " bytes, found " + std::to_string(found) + ")");
  }
  array.data.resize(count);
  read_exact(path, in, array.data.data(), expected);
  return array;
}

NpyArray read_npy_shaped(const std::string& path, const std::vector<std::size_t>& expected_shape) {
  NpyArray array = read_npy(path);
  if (array.shape != expected_shape) {
    fail(path, "shape " + shape_to_string(array.shape) + " where " +
                   shape_to_string(expected_shape) + " was expected");
  }
  return array;
}

void write_npy(const std::string& path, const std::vector<std::size_t>& shape, const float* data) {
  const std::size_t bytes = payload_bytes(path, element_count(path, shape));
  if (bytes != 0 && data == nullptr) {
    fail(path, "no data to write");
  }

  // NumPy's own layout: the dict, then 1 to 64 spaces and '\n' so that the payload is aligned.
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_to_string(shape) + ", }";
  const std::size_t unpadded = kMagicSize + kVersionSize + 2 + header.size() + 1;
  header.append(kAlignment - unpadded % kAlignment, ' ');
  header.push_back('\n');
  if (header.size() > kMaxHeaderV1) {
    fail(path, "shape has too many dimensions for a version 1.0 header");
  }

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    fail(path, std::string("cannot write: ") + std::strerror(errno));
  }
  std::string preamble(kMagic, kMagicSize);
  preamble += '\x01';  // version 1.0
  preamble += '\x00';
  preamble += static_cast<char>(header.size() & 0xFF);  // little-endian 2-byte header length
  preamble += static_cast<char>(header.size() >> 8);
  out.write(preamble.data(), static_cast<std::streamsize>(preamble.size()));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (bytes != 0) {
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  }
  out.close();
  if (!out) {
    fail(path, std::string("cannot write: ") + std::strerror(errno));
  }
}

std::string shape_to_string(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) {
      s += ", ";
    }
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) {
    s += ",";  // NumPy's one-element tuple
  }
  return s + ")";
}

}  // namespace lstm
