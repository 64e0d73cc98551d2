#include "core/lstm_data.h"

#include <climits>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "core/npy.h"

namespace lstm {
namespace {

/// SplitMix64: a small, fast generator with a fixed definition, so the same seed gives the same
/// numbers with any compiler and standard library.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi): 24 random bits, exactly representable in float.
  float uniform(float lo, float hi) {
    const float unit = static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * unit;
  }

 private:
  std::uint64_t state_;
};

/// Fills a tensor from its own stream: (seed, tensor id) -> generator, independent of the others.
std::vector<float> uniform_tensor(std::size_t count, float bound, std::uint64_t seed,
                                  std::uint64_t tensor_id) {
  SplitMix64 seeder(seed ^ (0xA0761D6478BD642Full * (tensor_id + 1)));
  SplitMix64 generator(seeder.next());
  std::vector<float> values(count);
  for (float& value : values)
    value = generator.uniform(-bound, bound);
  return values;
}

std::string join(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

std::string layer_file(const char* stem, int layer) {
  return std::string(stem) + "_l" + std::to_string(layer) + ".npy";
}

[[noreturn]] void fail(const std::string& message) {
  throw std::runtime_error(message);
}

int dimension(const std::string& path, const NpyArray& array, std::size_t index,
              const char* meaning) {
  const std::size_t value = array.shape[index];
  if (value == 0 || value > static_cast<std::size_t>(INT_MAX)) {
    std::ostringstream text;
    text << path << ": " << meaning << " = " << value << " (from shape "
         << shape_to_string(array.shape) << ") must be between 1 and " << INT_MAX;
    fail(text.str());
  }
  return static_cast<int>(value);
}

/// Refuses NaN and Inf: naming the file and the first bad element's index.
void require_finite(const std::string& path, const NpyArray& array) {
  for (std::size_t i = 0; i < array.data.size(); ++i) {
    if (std::isfinite(array.data[i])) continue;
    std::vector<std::size_t> index(array.shape.size());
    std::size_t rest = i;
    for (std::size_t axis = array.shape.size(); axis-- > 0;) {
      index[axis] = rest % array.shape[axis];
      rest /= array.shape[axis];
    }
    std::string position;
    for (std::size_t axis = 0; axis < index.size(); ++axis)
      position += (axis ? ", " : "") + std::to_string(index[axis]);
    fail(path + ": element [" + position + "] is " + (std::isnan(array.data[i]) ? "NaN" : "Inf") +
         "; every input must be finite");
  }
}

/// Reads `path` with exactly `shape` and finite values.
std::vector<float> read_finite(const std::string& path, const std::vector<std::size_t>& shape) {
  NpyArray array = read_npy_shaped(path, shape);
  require_finite(path, array);
  return std::move(array.data);
}

NpyArray read_with_rank(const std::string& path, std::size_t rank, const char* layout) {
  NpyArray array = read_npy(path);
  require_finite(path, array);
  if (array.shape.size() != rank) {
    fail(path + ": expected " + std::to_string(rank) + " dimensions " + layout + ", found shape " +
         shape_to_string(array.shape));
  }
  return array;
}

void require_flag_matches(const std::optional<int>& flag, int from_file, const char* flag_name,
                          const std::string& path, const char* meaning) {
  if (flag && *flag != from_file) {
    std::ostringstream text;
    text << flag_name << " " << *flag << " disagrees with " << path << ", whose shape gives "
         << meaning << " = " << from_file;
    throw FlagDisagreement(text.str());
  }
}

}  // namespace

LstmParams generate_params(const ProblemSize& size, std::uint64_t seed) {
  const TensorCounts counts = count_tensors(size);
  const std::size_t H = size.hidden, four_h = 4 * H;
  const float weight_bound = 1.0f / std::sqrt(static_cast<float>(size.hidden));

  LstmParams params;
  params.size = size;
  params.x = uniform_tensor(counts.x, 1.0f, seed, 0);
  params.h0 = uniform_tensor(counts.state, 1.0f, seed, 1);
  params.c0 = uniform_tensor(counts.state, 1.0f, seed, 2);
  for (int layer = 0; layer < size.layers; ++layer) {
    const std::size_t input = size.layer_input_size(layer);
    const std::uint64_t id = 16 + 4 * static_cast<std::uint64_t>(layer);
    LayerWeights weights;
    weights.w_ih = uniform_tensor(four_h * input, weight_bound, seed, id + 0);
    weights.w_hh = uniform_tensor(four_h * H, weight_bound, seed, id + 1);
    weights.b_ih = uniform_tensor(four_h, weight_bound, seed, id + 2);
    weights.b_hh = uniform_tensor(four_h, weight_bound, seed, id + 3);
    params.layers.push_back(std::move(weights));
  }
  return params;
}

UpstreamGradients generate_upstream(const ProblemSize& size, std::uint64_t seed) {
  const TensorCounts counts = count_tensors(size);
  // Tensor ids 4..6: apart from x, h0, c0 (0..2) and the layers' weights (16 and up).
  return {uniform_tensor(counts.y, 1.0f, seed, 4), uniform_tensor(counts.state, 1.0f, seed, 5),
          uniform_tensor(counts.state, 1.0f, seed, 6)};
}

bool has_upstream_files(const std::string& dir) {
  for (const char* name : {"dy.npy", "dhy.npy", "dcy.npy"}) {
    if (std::filesystem::exists(join(dir, name))) return true;
  }
  return false;
}

UpstreamGradients load_upstream(const std::string& dir, const ProblemSize& size,
                                std::uint64_t seed) {
  const std::size_t T = size.seq_len, B = size.batch, H = size.hidden, L = size.layers;
  const char* names[] = {"dy.npy", "dhy.npy", "dcy.npy"};
  std::string present, absent;
  for (const char* name : names) {
    (std::filesystem::exists(join(dir, name)) ? present : absent) += std::string(" ") + name;
  }
  if (present.empty()) return generate_upstream(size, seed);
  if (!absent.empty()) {
    fail(dir + ": has" + present + " but not" + absent +
         " (give all three upstream gradients, or none to generate them from the seed)");
  }
  return {read_finite(join(dir, "dy.npy"), {T, B, H}), read_finite(join(dir, "dhy.npy"), {L, B, H}),
          read_finite(join(dir, "dcy.npy"), {L, B, H})};
}

LstmParams load_params(const std::string& dir, const SizeFlags& flags) {
  if (!std::filesystem::is_directory(dir)) fail(dir + ": not a directory");
  LstmParams params;
  ProblemSize& size = params.size;

  // x.npy fixes T, B, I; h0.npy fixes L and H (and must agree on B).
  const std::string x_path = join(dir, "x.npy");
  NpyArray x = read_with_rank(x_path, 3, "(T, B, I)");
  size.seq_len = dimension(x_path, x, 0, "T");
  size.batch = dimension(x_path, x, 1, "B");
  size.input_size = dimension(x_path, x, 2, "I");
  const std::string h0_path = join(dir, "h0.npy");
  NpyArray h0 = read_with_rank(h0_path, 3, "(L, B, H)");
  size.layers = dimension(h0_path, h0, 0, "L");
  size.hidden = dimension(h0_path, h0, 2, "H");
  if (h0.shape[1] != static_cast<std::size_t>(size.batch)) {
    fail(h0_path + ": shape " + shape_to_string(h0.shape) + " has B = " +
         std::to_string(h0.shape[1]) + " but x.npy has B = " + std::to_string(size.batch));
  }
  require_flag_matches(flags.seq_len, size.seq_len, "--seq", x_path, "T");
  require_flag_matches(flags.batch, size.batch, "--batch", x_path, "B");
  require_flag_matches(flags.input_size, size.input_size, "--input-size", x_path, "I");
  require_flag_matches(flags.layers, size.layers, "--layers", h0_path, "L");
  require_flag_matches(flags.hidden, size.hidden, "--hidden", h0_path, "H");
  try {
    validate_problem_size(size);
  } catch (const std::exception& error) {
    fail(dir + ": " + error.what());
  }

  params.x = std::move(x.data);
  params.h0 = std::move(h0.data);
  const std::string c0_path = join(dir, "c0.npy");
  NpyArray c0 = read_npy(c0_path);
  if (c0.shape != h0.shape) {
    fail(c0_path + ": shape " + shape_to_string(c0.shape) + " differs from h0.npy's " +
         shape_to_string(h0.shape) + " (h0 and c0 are both (L, B, H))");
  }
  require_finite(c0_path, c0);
  params.c0 = std::move(c0.data);

  const std::size_t H = size.hidden, four_h = 4 * H;
  // Every layer's four files; a missing one, or one whose shape implies another H, is named.
  for (int layer = 0; layer < size.layers; ++layer) {
    const std::size_t input = size.layer_input_size(layer);
    auto read_layer_file = [&](const char* stem, const std::vector<std::size_t>& shape) {
      const std::string path = join(dir, layer_file(stem, layer));
      if (!std::filesystem::exists(path)) {
        fail(path + ": missing, but h0.npy has L = " + std::to_string(size.layers) +
             " layers (each layer k needs weight_ih_lk, weight_hh_lk, bias_ih_lk, bias_hh_lk)");
      }
      NpyArray array = read_npy(path);
      if (array.shape != shape) {
        fail(path + ": shape " + shape_to_string(array.shape) + ", expected " +
             shape_to_string(shape) + " for H = " + std::to_string(H) + " (from h0.npy and " +
             "c0.npy) and I = " + std::to_string(size.input_size) + " (from x.npy)");
      }
      require_finite(path, array);
      return std::move(array.data);
    };
    LayerWeights weights;
    weights.w_ih = read_layer_file("weight_ih", {four_h, input});
    weights.w_hh = read_layer_file("weight_hh", {four_h, H});
    weights.b_ih = read_layer_file("bias_ih", {four_h});
    weights.b_hh = read_layer_file("bias_hh", {four_h});
    params.layers.push_back(std::move(weights));
  }
  // A further layer's weights mean h0.npy and the weight files disagree on L.
  const std::string extra = join(dir, layer_file("weight_ih", size.layers));
  if (std::filesystem::exists(extra)) {
    fail(extra + ": exists, but h0.npy has L = " + std::to_string(size.layers) +
         " layers (weight files for layers 0.." + std::to_string(size.layers - 1) + " expected)");
  }
  return params;
}

void dump_outputs(const std::string& dir, const ProblemSize& size, const LstmOutputs& outputs) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) fail(dir + ": cannot create directory: " + error.message());
  const std::size_t T = size.seq_len, B = size.batch, H = size.hidden, L = size.layers;
  write_npy(join(dir, "y.npy"), {T, B, H}, outputs.y.data());
  write_npy(join(dir, "hy.npy"), {L, B, H}, outputs.hy.data());
  write_npy(join(dir, "cy.npy"), {L, B, H}, outputs.cy.data());
}

LstmOutputs load_outputs(const std::string& dir, const ProblemSize& size) {
  const std::size_t T = size.seq_len, B = size.batch, H = size.hidden, L = size.layers;
  LstmOutputs outputs;
  outputs.y = read_npy_shaped(join(dir, "y.npy"), {T, B, H}).data;
  outputs.hy = read_npy_shaped(join(dir, "hy.npy"), {L, B, H}).data;
  outputs.cy = read_npy_shaped(join(dir, "cy.npy"), {L, B, H}).data;
  return outputs;
}

}  // namespace lstm
