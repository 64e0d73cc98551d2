/*! \file npy.h
 *  \brief A strict reader and writer for float32 NumPy .npy files (the data contract's format).
 *
 *  Accepted: magic "\x93NUMPY", format versions 1.0, 2.0 and 3.0, a header dictionary with exactly
 *  the keys 'descr', 'fortran_order' and 'shape', descr '<f4', fortran_order False, and a payload
 *  of exactly prod(shape) * 4 bytes. Anything else is refused with an NpyError whose message starts
 *  with the file's path.
 */
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace lstm {

/// A failure to read or write a .npy file; what() starts with the file's path.
class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A float32 array in C order, as read from a .npy file.
struct NpyArray {
  std::vector<std::size_t> shape;  ///< dimensions, outermost first; empty for a scalar
  std::vector<float> data;         ///< prod(shape) elements, C order
};

/// Reads a float32 little-endian C-order .npy file.
/// \param path file to read
/// \throws NpyError naming `path` for a missing, truncated, malformed or wrongly typed file.
NpyArray read_npy(const std::string& path);

/// Reads `path` and requires its shape to equal `expected_shape`.
/// \throws NpyError naming `path`, the shape found and the shape expected.
NpyArray read_npy_shaped(const std::string& path, const std::vector<std::size_t>& expected_shape);

/// Writes `data` (prod(shape) floats, C order) as a version 1.0 '<f4' .npy file.
/// \throws NpyError naming `path` if the file cannot be written.
void write_npy(const std::string& path, const std::vector<std::size_t>& shape, const float* data);

/// "(4, 2, 3)", as NumPy prints a shape.
std::string shape_to_string(const std::vector<std::size_t>& shape);

}  // namespace lstm
