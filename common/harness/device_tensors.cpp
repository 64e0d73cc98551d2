#include "harness/device_tensors.h"

namespace lstm {

bool same_tensors(const DeviceTensors& a, const DeviceTensors& b) {
  return a.size == b.size && a.x == b.x && a.h0 == b.h0 && a.c0 == b.c0 && a.w_ih == b.w_ih &&
         a.w_hh == b.w_hh && a.b_ih == b.b_ih && a.b_hh == b.b_hh && a.y == b.y && a.hy == b.hy &&
         a.cy == b.cy && a.dy == b.dy && a.dhy == b.dhy && a.dcy == b.dcy && a.dx == b.dx &&
         a.dh0 == b.dh0 && a.dc0 == b.dc0 && a.grad_w_ih == b.grad_w_ih &&
         a.grad_w_hh == b.grad_w_hh && a.grad_b_ih == b.grad_b_ih && a.grad_b_hh == b.grad_b_hh;
}

DeviceProblem::DeviceProblem(const LstmParams& params, const UpstreamGradients* upstream) {
  const ProblemSize& size = params.size;
  tensors_.size = size;
  x_.upload(params.x);
  h0_.upload(params.h0);
  c0_.upload(params.c0);
  tensors_.x = x_.data();
  tensors_.h0 = h0_.data();
  tensors_.c0 = c0_.data();
  for (const LayerWeights& layer : params.layers) {
    for (const std::vector<float>* host : {&layer.w_ih, &layer.w_hh, &layer.b_ih, &layer.b_hh}) {
      weights_.emplace_back();
      weights_.back().upload(*host);
    }
    const std::size_t first = weights_.size() - 4;
    tensors_.w_ih.push_back(weights_[first + 0].data());
    tensors_.w_hh.push_back(weights_[first + 1].data());
    tensors_.b_ih.push_back(weights_[first + 2].data());
    tensors_.b_hh.push_back(weights_[first + 3].data());
  }

  const StageKind kind = upstream ? StageKind::kTraining : StageKind::kForward;
  for (const OutputTensor& layout : output_layouts(size, kind)) {
    outputs_.emplace_back(element_count(layout.shape));
  }
  // output_layouts' order: y, hy, cy, then dx, dh0, dc0 and four gradients per layer.
  tensors_.y = outputs_[0].data();
  tensors_.hy = outputs_[1].data();
  tensors_.cy = outputs_[2].data();
  if (upstream) {
    dy_.upload(upstream->dy);
    dhy_.upload(upstream->dhy);
    dcy_.upload(upstream->dcy);
    tensors_.dy = dy_.data();
    tensors_.dhy = dhy_.data();
    tensors_.dcy = dcy_.data();
    tensors_.dx = outputs_[3].data();
    tensors_.dh0 = outputs_[4].data();
    tensors_.dc0 = outputs_[5].data();
    for (int layer = 0; layer < size.layers; ++layer) {
      const std::size_t first = 6 + 4 * static_cast<std::size_t>(layer);
      tensors_.grad_w_ih.push_back(outputs_[first + 0].data());
      tensors_.grad_w_hh.push_back(outputs_[first + 1].data());
      tensors_.grad_b_ih.push_back(outputs_[first + 2].data());
      tensors_.grad_b_hh.push_back(outputs_[first + 3].data());
    }
  }
}

void DeviceProblem::poison_outputs(cudaStream_t stream) {
  // 0xFF in every byte is a NaN in float32: the check rejects any element left unwritten.
  for (DeviceBuffer<float>& output : outputs_) {
    CUDA_CHECK(cudaMemsetAsync(output.data(), 0xFF, output.bytes(), stream));
  }
}

std::vector<OutputTensor> DeviceProblem::download_outputs(StageKind kind) const {
  std::vector<OutputTensor> tensors = output_layouts(tensors_.size, kind);
  if (tensors.size() > outputs_.size()) {
    throw std::logic_error("download_outputs: a forward problem has no gradient buffers");
  }
  for (std::size_t i = 0; i < tensors.size(); ++i)
    tensors[i].values = outputs_[i].download();
  return tensors;
}

std::size_t DeviceProblem::bytes_needed(const ProblemSize& size, bool training) {
  const TensorCounts counts = count_tensors(size);
  return training ? counts.training_bytes : counts.bytes;
}

void device_memory(std::size_t* free_bytes, std::size_t* total_bytes) {
  CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

}  // namespace lstm
