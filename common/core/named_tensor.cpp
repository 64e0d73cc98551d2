#include "core/named_tensor.h"

#include <filesystem>
#include <stdexcept>

#include "core/npy.h"

namespace lstm {

std::vector<OutputTensor> output_layouts(const ProblemSize& size, StageKind kind) {
  const std::size_t T = size.seq_len, B = size.batch, H = size.hidden, L = size.layers;
  const std::size_t I = size.input_size, four_h = 4 * H;
  const std::vector<std::string> sequence_axes = {"t", "b", "j"}, state_axes = {"layer", "b", "j"};
  std::vector<OutputTensor> layouts = {{"y", {T, B, H}, sequence_axes, {}},
                                       {"hy", {L, B, H}, state_axes, {}},
                                       {"cy", {L, B, H}, state_axes, {}}};
  if (kind == StageKind::kTraining) {
    layouts.push_back({"dx", {T, B, I}, {"t", "b", "i"}, {}});
    layouts.push_back({"dh0", {L, B, H}, state_axes, {}});
    layouts.push_back({"dc0", {L, B, H}, state_axes, {}});
    for (int layer = 0; layer < size.layers; ++layer) {
      const std::string suffix = "_l" + std::to_string(layer);
      const std::size_t input = size.layer_input_size(layer);
      layouts.push_back({"grad_weight_ih" + suffix, {four_h, input}, {"row", "col"}, {}});
      layouts.push_back({"grad_weight_hh" + suffix, {four_h, H}, {"row", "col"}, {}});
      layouts.push_back({"grad_bias_ih" + suffix, {four_h}, {"row"}, {}});
      layouts.push_back({"grad_bias_hh" + suffix, {four_h}, {"row"}, {}});
    }
  }
  return layouts;
}

std::size_t element_count(const std::vector<std::size_t>& shape) {
  std::size_t count = 1;
  for (std::size_t dimension : shape)
    count = checked_mul(count, dimension, "a tensor");
  return count;
}

void dump_tensors(const std::string& dir, const std::vector<OutputTensor>& tensors) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw std::runtime_error(dir + ": cannot create directory: " + error.message());
  for (const OutputTensor& tensor : tensors) {
    if (tensor.values.size() != element_count(tensor.shape)) {
      throw std::invalid_argument("dump_tensors: " + tensor.name + " has " +
                                  std::to_string(tensor.values.size()) + " values for shape " +
                                  shape_to_string(tensor.shape));
    }
    write_npy((std::filesystem::path(dir) / (tensor.name + ".npy")).string(), tensor.shape,
              tensor.values.data());
  }
}

std::vector<ReferenceTensor> load_reference_tensors(const std::string& dir,
                                                    const std::vector<OutputTensor>& layouts) {
  std::vector<ReferenceTensor> tensors;
  for (const OutputTensor& layout : layouts) {
    const std::string path = (std::filesystem::path(dir) / (layout.name + ".npy")).string();
    const NpyArray array = read_npy_shaped(path, layout.shape);
    tensors.push_back({layout.name, layout.shape, layout.axes,
                       std::vector<double>(array.data.begin(), array.data.end())});
  }
  return tensors;
}

}  // namespace lstm
