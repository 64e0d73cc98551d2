// What the test-only oracle stages share: reading a problem back from the device, writing host
// tensors to it, and --perturb, which moves one element of one output past its bound so that a
// test can see the harness's check fail for that tensor.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "core/lstm_data.h"
#include "harness/cuda_utils.h"
#include "harness/stage.h"

namespace lstm::oracle {

/// Copies `count` floats from the device.
inline std::vector<float> download(const float* device, std::size_t count) {
  std::vector<float> host(count);
  CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

/// The problem's inputs and parameters, read back from the device.
inline LstmParams download_params(const DeviceTensors& t) {
  const ProblemSize& s = t.size;
  const TensorCounts counts = count_tensors(s);
  LstmParams params;
  params.size = s;
  params.x = download(t.x, counts.x);
  params.h0 = download(t.h0, counts.state);
  params.c0 = download(t.c0, counts.state);
  const std::size_t four_h = 4 * static_cast<std::size_t>(s.hidden);
  for (int layer = 0; layer < s.layers; ++layer) {
    params.layers.push_back({download(t.w_ih[layer], four_h * s.layer_input_size(layer)),
                             download(t.w_hh[layer], four_h * s.hidden),
                             download(t.b_ih[layer], four_h), download(t.b_hh[layer], four_h)});
  }
  return params;
}

/// Enqueues a copy of `host` to `device` on `stream`.
inline void upload(float* device, const std::vector<float>& host, cudaStream_t stream) {
  CUDA_CHECK(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(float),
                             cudaMemcpyHostToDevice, stream));
}

/// float copies of double values.
inline std::vector<float> to_float(const std::vector<double>& values) {
  return std::vector<float>(values.begin(), values.end());
}

/// --perturb NAME: the output tensor whose first element the stage moves by 1 (far past any
/// bound), or "" for none.
inline void add_perturb_flag(CLI::App& app, std::string& perturbed) {
  app.add_option("--perturb", perturbed,
                 "write output NAME (y, hy, dx, grad_weight_hh_l0, ...) with its first element "
                 "off by 1: the check must fail for that tensor");
}

/// Moves the first element of `values` by 1 when `name` is the perturbed tensor.
inline void maybe_perturb(const std::string& perturbed, const std::string& name,
                          std::vector<float>& values) {
  if (perturbed == name && !values.empty()) values[0] += 1.0f;
}

}  // namespace lstm::oracle
