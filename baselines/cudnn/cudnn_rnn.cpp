/*! \file baselines/cudnn/cudnn_rnn.cpp
 *  \brief The plumbing both cuDNN baselines share (see cudnn_rnn.h): error checks, descriptors,
 *         and the checked map between PyTorch's tensors and a cuDNN weight space.
 */
#include "cudnn_rnn.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace lstm::baseline_cudnn {
namespace {

constexpr int kGates = 4;                       // i, f, g, o
constexpr int kLinearLayers = 2 * kGates;       // W (input) and R (recurrent) per gate
constexpr unsigned long long kDropoutSeed = 1;  // unused: the dropout probability is 0

/// Whether `status` means "cuDNN does not support this configuration": the 3000-3999 range
/// (CUDNN_STATUS_NOT_SUPPORTED and its cuDNN 9 sub-codes), or any status cuDNN names so.
bool is_not_supported(cudnnStatus_t status) {
  const int code = static_cast<int>(status);
  if (code >= 3000 && code < 4000) return true;
  const char* name = cudnnGetErrorString(status);
  static constexpr char kPrefix[] = "CUDNN_STATUS_NOT_SUPPORTED";
  return name != nullptr && std::strncmp(name, kPrefix, sizeof(kPrefix) - 1) == 0;
}

cudnnRNNAlgo_t to_cudnn(Algo algo) {
  switch (algo) {
    case Algo::kStandard:
      return CUDNN_RNN_ALGO_STANDARD;
    case Algo::kPersistStatic:
      return CUDNN_RNN_ALGO_PERSIST_STATIC;
    case Algo::kPersistDynamic:
      return CUDNN_RNN_ALGO_PERSIST_DYNAMIC;
  }
  throw std::invalid_argument("unknown cuDNN algorithm");
}

/// One weight or bias block of a weight space, for the overlap check.
struct Block {
  std::size_t offset = 0;  ///< bytes from the start of the weight space
  std::size_t bytes = 0;
  std::string label;  ///< "layer 1 linLayerID 5 matrix"
};

cudnnDataType_t to_cudnn(Precision precision) {
  switch (precision) {
    case Precision::kFp16:
      return CUDNN_DATA_HALF;
    case Precision::kBf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

/// Requires that `desc` (as cudnnGetRNNWeightParams filled it) describes data of `element` (the
/// network's type) laid out exactly as a packed row-major array of shape `expected` (unit
/// dimensions aside), and that `address` lies, aligned to an element, inside the space. Returns
/// the block it occupies.
/// \throws std::runtime_error naming the space, the block and both shapes otherwise.
Block check_block(cudnnTensorDescriptor_t desc, const void* address, const void* space_begin,
                  std::size_t space_bytes, const std::vector<int>& expected, ElementType element,
                  cudnnDataType_t element_type_cudnn, const std::string& space_name,
                  const std::string& label) {
  constexpr int kMaxDims = 8;
  cudnnDataType_t type{};
  int dims_count = 0;
  int dims[kMaxDims] = {};
  int strides[kMaxDims] = {};
  CUDNN_CHECK(cudnnGetTensorNdDescriptor(desc, kMaxDims, &type, &dims_count, dims, strides));

  std::ostringstream reported;
  reported << "dims {";
  for (int d = 0; d < std::min(dims_count, kMaxDims); ++d)
    reported << (d ? ", " : "") << dims[d];
  reported << "} strides {";
  for (int d = 0; d < std::min(dims_count, kMaxDims); ++d)
    reported << (d ? ", " : "") << strides[d];
  reported << "}";
  std::ostringstream wanted;
  wanted << "row-major {";
  for (std::size_t d = 0; d < expected.size(); ++d)
    wanted << (d ? ", " : "") << expected[d];
  wanted << "} " << element_type_name(element);
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("cuDNN " + space_name + ", " + label + ": " + why +
                             " (cuDNN reports " + reported.str() +
                             "; the PyTorch block it maps to is " + wanted.str() + ")");
  };

  if (dims_count < 1 || dims_count > kMaxDims) fail("unexpected number of dimensions");
  if (type != element_type_cudnn) {
    fail(std::string("data type is not the network's (") + element_type_name(element) + ")");
  }
  // The dimensions larger than 1 must be the expected ones, in order; those of size 1 (e.g. the
  // leading 1 of cuDNN's {1, rows, cols}) do not change the memory layout.
  std::vector<int> reported_big, expected_big;
  for (int d = 0; d < dims_count; ++d)
    if (dims[d] != 1) reported_big.push_back(dims[d]);
  for (int extent : expected)
    if (extent != 1) expected_big.push_back(extent);
  if (reported_big != expected_big) fail("shape differs");
  // Packed row-major: a dimension's stride is the product of the dimensions after it.
  long long inner = 1;
  for (int d = dims_count - 1; d >= 0; --d) {
    if (dims[d] != 1 && strides[d] != inner) fail("not a packed row-major block");
    inner *= dims[d];
  }

  const auto* begin = static_cast<const unsigned char*>(space_begin);
  const auto* at = static_cast<const unsigned char*>(address);
  Block block;
  block.bytes = static_cast<std::size_t>(inner) * element_bytes(element);
  block.label = label;
  if (at == nullptr || at < begin || static_cast<std::size_t>(at - begin) > space_bytes ||
      space_bytes - static_cast<std::size_t>(at - begin) < block.bytes) {
    fail("address outside the " + space_name);
  }
  block.offset = static_cast<std::size_t>(at - begin);
  if (block.offset % element_bytes(element) != 0) fail("address not aligned to an element");
  return block;
}

/// Owns one cuDNN tensor descriptor (for the weight-parameter queries).
class TensorDescriptor {
 public:
  TensorDescriptor() { CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_)); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

std::string parameter_name(Parameter parameter) {
  switch (parameter) {
    case Parameter::kWeightIh:
      return "weight_ih";
    case Parameter::kWeightHh:
      return "weight_hh";
    case Parameter::kBiasIh:
      return "bias_ih";
    case Parameter::kBiasHh:
      return "bias_hh";
  }
  throw std::invalid_argument("unknown LSTM parameter");
}

/// The layer's pointer of `parameter` in the per-layer lists (w_ih, w_hh, b_ih, b_hh or their
/// gradients), checked to be there. `what` names the lists in the error ("parameter",
/// "gradient").
template <typename Pointer>
Pointer layer_pointer(const std::vector<Pointer>& w_ih, const std::vector<Pointer>& w_hh,
                      const std::vector<Pointer>& b_ih, const std::vector<Pointer>& b_hh,
                      const ParameterBlock& block, const char* what) {
  const std::vector<Pointer>* list = nullptr;
  switch (block.parameter) {
    case Parameter::kWeightIh:
      list = &w_ih;
      break;
    case Parameter::kWeightHh:
      list = &w_hh;
      break;
    case Parameter::kBiasIh:
      list = &b_ih;
      break;
    case Parameter::kBiasHh:
      list = &b_hh;
      break;
  }
  const auto layer = static_cast<std::size_t>(block.layer);
  if (list == nullptr || layer >= list->size() || (*list)[layer] == nullptr) {
    throw std::invalid_argument("cuDNN baseline: no device " + std::string(what) + " pointer for " +
                                parameter_name(block.parameter) + "_l" +
                                std::to_string(block.layer) + " (the problem holds " +
                                std::to_string(list ? list->size() : 0) + " layers' worth)");
  }
  return (*list)[layer];
}

/// One copy of one parameter block, with the PyTorch tensor it reads or writes.
struct BlockCopy {
  int layer = 0;
  Parameter parameter = Parameter::kWeightIh;
  DeviceCopy copy;
};

/// Sorts `copies` by destination and merges each into the one before it where both belong to the
/// same PyTorch tensor and its source and destination continue the previous copy's (e.g. the four
/// gate blocks of a weight_ih that cuDNN keeps one after another): fewer, larger cudaMemcpyAsync
/// calls, the same bytes. Copies of different tensors are never merged, even where two separate
/// allocations happen to lie back to back: one cudaMemcpyAsync must stay inside one allocation.
std::vector<DeviceCopy> merge_contiguous(std::vector<BlockCopy> copies) {
  std::sort(copies.begin(), copies.end(), [](const BlockCopy& a, const BlockCopy& b) {
    return reinterpret_cast<std::uintptr_t>(a.copy.destination) <
           reinterpret_cast<std::uintptr_t>(b.copy.destination);
  });
  std::vector<DeviceCopy> merged;
  const BlockCopy* previous = nullptr;
  for (const BlockCopy& each : copies) {
    if (previous != nullptr && previous->layer == each.layer &&
        previous->parameter == each.parameter) {
      DeviceCopy& last = merged.back();
      const auto* last_destination_end = static_cast<unsigned char*>(last.destination) +
                                         last.count * element_bytes(last.destination_type);
      const auto* last_source_end = static_cast<const unsigned char*>(last.source) +
                                    last.count * element_bytes(last.source_type);
      if (each.copy.destination == last_destination_end && each.copy.source == last_source_end &&
          each.copy.destination_type == last.destination_type &&
          each.copy.source_type == last.source_type) {
        last.count += each.copy.count;
        previous = &each;
        continue;
      }
    }
    merged.push_back(each.copy);
    previous = &each;
  }
  return merged;
}

}  // namespace

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                    int line) {
  char detail[1024] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  const char* name = cudnnGetErrorString(status);
  const std::string function(call, std::strcspn(call, "("));
  std::ostringstream text;
  if (is_not_supported(status)) {
    const std::size_t version = cudnnGetVersion();  // e.g. 91400 for 9.14.0
    text << "cuDNN " << version / 10000 << "." << version % 10000 / 100 << "." << version % 100
         << " refuses it: " << function << " returned " << (name ? name : "?") << " ("
         << static_cast<int>(status) << ")";
    if (detail[0] != '\0') text << ": " << detail;
    throw UnsupportedError(text.str());
  }
  text << file << ":" << line << ": cuDNN error in " << call << ": " << (name ? name : "?") << " ("
       << static_cast<int>(status) << ")";
  if (detail[0] != '\0') text << ": " << detail;
  throw CudaError(text.str());
}

std::vector<DeviceCopy> copies_into_space(const std::vector<ParameterBlock>& blocks,
                                          const DeviceTensors& t, ElementType space_type) {
  std::vector<BlockCopy> copies;
  for (const ParameterBlock& block : blocks) {
    const float* source = layer_pointer(t.w_ih, t.w_hh, t.b_ih, t.b_hh, block, "parameter");
    copies.push_back(
        {block.layer,
         block.parameter,
         {block.place, space_type, source + block.offset, ElementType::kFloat, block.count}});
  }
  return merge_contiguous(std::move(copies));
}

std::vector<DeviceCopy> copies_out_of_space(const std::vector<ParameterBlock>& blocks,
                                            const DeviceTensors& t, ElementType space_type) {
  std::vector<BlockCopy> copies;
  for (const ParameterBlock& block : blocks) {
    float* destination =
        layer_pointer(t.grad_w_ih, t.grad_w_hh, t.grad_b_ih, t.grad_b_hh, block, "gradient");
    copies.push_back(
        {block.layer,
         block.parameter,
         {destination + block.offset, ElementType::kFloat, block.place, space_type, block.count}});
  }
  return merge_contiguous(std::move(copies));
}

void enqueue_copies(const std::vector<DeviceCopy>& copies, cudaStream_t stream) {
  for (const DeviceCopy& copy : copies) {
    enqueue_conversion(copy.destination, copy.destination_type, copy.source, copy.source_type,
                       copy.count, stream);
  }
}

std::size_t staging_bytes(const ProblemSize& s, Precision precision, bool training) {
  if (precision == Precision::kFp32) return 0;
  const TensorCounts counts = count_tensors(s);
  const std::size_t per_pass = counts.x + counts.y + 4 * counts.state;  // x, y, h0, hy, c0, cy
  return (training ? 2 : 1) * per_pass * element_bytes(element_type(precision));
}

std::size_t parameter_bytes(const ProblemSize& s) {
  return checked_mul(count_tensors(s).parameters, sizeof(float), "the parameters");
}

std::size_t estimated_forward_workspace_bytes(const ProblemSize& s) {
  const std::size_t H = s.hidden, B = s.batch, T = s.seq_len;
  return (T * B * 4 * H + 2 * T * B * H) * sizeof(float);
}

CudnnLstm::CudnnLstm(Algo algo, const ProblemSize& size, Precision precision)
    : size_(size),
      precision_(precision),
      element_(element_type(precision)),
      data_type_(to_cudnn(precision)) {
  try {
    const int H = size.hidden, I = size.input_size, B = size.batch, T = size.seq_len,
              L = size.layers;
    CUDNN_CHECK(cudnnCreate(&handle_));  // its stream: the legacy default stream, until set

    // Dropout 0 (this LSTM never drops out, but the descriptor is required).
    CUDNN_CHECK(cudnnCreateDropoutDescriptor(&dropout_desc_));
    std::size_t states_bytes = 0;
    CUDNN_CHECK(cudnnDropoutGetStatesSize(handle_, &states_bytes));
    dropout_states_.allocate(states_bytes);
    CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout_desc_, handle_, 0.0f, dropout_states_.data(),
                                          states_bytes, kDropoutSeed));

    // The network: PyTorch's nn.LSTM. FP32: FP32 data, FP32 FMA math (no TF32). FP16 or BF16:
    // data of that type on tensor cores, with FP32 math precision (what the GEMMs accumulate
    // in, and the element-wise gate math), as PyTorch asks cuDNN for half-precision LSTMs.
    const bool reduced = precision_ != Precision::kFp32;
    CUDNN_CHECK(cudnnCreateRNNDescriptor(&rnn_desc_));
    CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
        rnn_desc_, to_cudnn(algo), CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL,
        CUDNN_LINEAR_INPUT, data_type_, CUDNN_DATA_FLOAT,
        reduced ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH, I, H,
        /*projSize=*/H, L, dropout_desc_, CUDNN_RNN_PADDED_IO_DISABLED));
    // PERSIST_DYNAMIC: compile the persistent kernel for this exact batch (NVRTC; seconds).
    if (algo == Algo::kPersistDynamic) CUDNN_CHECK(cudnnBuildRNNDynamic(handle_, rnn_desc_, B));

    // x (T, B, I) and y (T, B, H): sequence-major, every sequence T steps long. cuDNN reads the
    // lengths from the host array here and from the device copy in its compute calls.
    const std::vector<int> lengths(static_cast<std::size_t>(B), T);
    seq_lengths_.upload(lengths);
    CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&x_desc_));
    CUDNN_CHECK(cudnnSetRNNDataDescriptor(x_desc_, data_type_,
                                          CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, B, I,
                                          lengths.data(), nullptr));
    CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&y_desc_));
    CUDNN_CHECK(cudnnSetRNNDataDescriptor(y_desc_, data_type_,
                                          CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, B, H,
                                          lengths.data(), nullptr));

    // h0, c0, hy, cy (and their gradients): (L, B, H), fully packed.
    const int state_dims[3] = {L, B, H};
    const int state_strides[3] = {B * H, H, 1};
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&h_desc_));
    CUDNN_CHECK(cudnnSetTensorNdDescriptor(h_desc_, data_type_, 3, state_dims, state_strides));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&c_desc_));
    CUDNN_CHECK(cudnnSetTensorNdDescriptor(c_desc_, data_type_, 3, state_dims, state_strides));

    // The weight space, zeroed (upload_parameters fills it).
    std::size_t weight_bytes = 0;
    CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle_, rnn_desc_, &weight_bytes));
    weight_space_.allocate(weight_bytes);
    if (weight_bytes > 0) CUDA_CHECK(cudaMemset(weight_space_.data(), 0, weight_bytes));

    // FP16 or BF16: the buffers the harness's float32 x, h0, c0 are converted into, and y, hy, cy
    // out of.
    if (reduced) {
      const std::size_t e = element_bytes(element_);
      const TensorCounts counts = count_tensors(size);
      x_.allocate(counts.x * e);
      y_.allocate(counts.y * e);
      h0_.allocate(counts.state * e);
      hy_.allocate(counts.state * e);
      c0_.allocate(counts.state * e);
      cy_.allocate(counts.state * e);
    }

    // The dropout-state initialisation and the memset ran on the legacy default stream, which
    // does not order the harness's non-blocking streams: wait for them here.
    CUDA_CHECK(cudaDeviceSynchronize());
  } catch (...) {
    release();  // a throwing constructor runs no destructor: free the handles made so far
    throw;
  }
}

CudnnLstm::~CudnnLstm() {
  release();
}

void CudnnLstm::release() noexcept {
  // Errors cannot be reported from here (a destructor, or on the way out of a failed
  // constructor); the buffers are freed by their own destructors.
  if (c_desc_) cudnnDestroyTensorDescriptor(c_desc_);
  if (h_desc_) cudnnDestroyTensorDescriptor(h_desc_);
  if (y_desc_) cudnnDestroyRNNDataDescriptor(y_desc_);
  if (x_desc_) cudnnDestroyRNNDataDescriptor(x_desc_);
  if (rnn_desc_) cudnnDestroyRNNDescriptor(rnn_desc_);
  if (dropout_desc_) cudnnDestroyDropoutDescriptor(dropout_desc_);
  if (handle_) cudnnDestroy(handle_);
  c_desc_ = nullptr;
  h_desc_ = nullptr;
  y_desc_ = nullptr;
  x_desc_ = nullptr;
  rnn_desc_ = nullptr;
  dropout_desc_ = nullptr;
  handle_ = nullptr;
}

std::vector<ParameterBlock> CudnnLstm::map_parameters(void* space,
                                                      const std::string& space_name) const {
  const ProblemSize& s = size_;
  const std::size_t H = static_cast<std::size_t>(s.hidden);
  const std::size_t space_bytes = weight_space_.bytes();
  TensorDescriptor matrix_desc, bias_desc;
  std::vector<Block> blocks;
  std::vector<ParameterBlock> map;
  for (int layer = 0; layer < s.layers; ++layer) {
    for (int lin = 0; lin < kLinearLayers; ++lin) {
      const bool recurrent = lin >= kGates;
      const std::size_t gate = static_cast<std::size_t>(lin % kGates);
      const int cols = recurrent ? s.hidden : s.layer_input_size(layer);
      void* matrix = nullptr;
      void* bias = nullptr;
      CUDNN_CHECK(cudnnGetRNNWeightParams(handle_, rnn_desc_, layer, space_bytes, space, lin,
                                          matrix_desc.get(), &matrix, bias_desc.get(), &bias));
      const std::string label =
          "layer " + std::to_string(layer) + " linLayerID " + std::to_string(lin);
      blocks.push_back(check_block(matrix_desc.get(), matrix, space, space_bytes, {s.hidden, cols},
                                   element_, data_type_, space_name, label + " matrix"));
      blocks.push_back(check_block(bias_desc.get(), bias, space, space_bytes, {s.hidden}, element_,
                                   data_type_, space_name, label + " bias"));

      // Gate q's rows of weight_ih / weight_hh, and its slice of bias_ih / bias_hh.
      const std::size_t matrix_count = H * static_cast<std::size_t>(cols);
      map.push_back({layer, recurrent ? Parameter::kWeightHh : Parameter::kWeightIh,
                     gate * matrix_count, matrix_count, matrix});
      map.push_back(
          {layer, recurrent ? Parameter::kBiasHh : Parameter::kBiasIh, gate * H, H, bias});
    }
  }
  // No two blocks may share a byte (each PyTorch element has its own place).
  std::sort(blocks.begin(), blocks.end(),
            [](const Block& a, const Block& b) { return a.offset < b.offset; });
  for (std::size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i].offset < blocks[i - 1].offset + blocks[i - 1].bytes) {
      throw std::runtime_error("cuDNN " + space_name + ": " + blocks[i - 1].label + " and " +
                               blocks[i].label + " overlap");
    }
  }
  return map;
}

void CudnnLstm::upload_parameters(const DeviceTensors& t) {
  // Device to device on the legacy default stream (asynchronous to the host): wait for it, since
  // the harness's non-blocking streams are not ordered after that stream.
  enqueue_copies(
      copies_into_space(map_parameters(weight_space_.data(), "weight space"), t, element_),
      nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
}

void CudnnLstm::allocate_training_staging() {
  if (precision_ == Precision::kFp32) return;
  const std::size_t e = element_bytes(element_);
  const TensorCounts counts = count_tensors(size_);
  dy_.allocate(counts.y * e);
  dx_.allocate(x_.bytes());
  for (DeviceBuffer<unsigned char>* state : {&dhy_, &dcy_, &dh0_, &dc0_})
    state->allocate(counts.state * e);
}

CudnnIo CudnnLstm::io(const DeviceTensors& t) {
  if (precision_ == Precision::kFp32) {
    return {t.x, t.y, t.h0, t.hy, t.c0, t.cy, t.dy, t.dhy, t.dcy, t.dx, t.dh0, t.dc0};
  }
  return {x_.data(),  y_.data(),   h0_.data(),  hy_.data(), c0_.data(),  cy_.data(),
          dy_.data(), dhy_.data(), dcy_.data(), dx_.data(), dh0_.data(), dc0_.data()};
}

void CudnnLstm::stage_inputs(const DeviceTensors& t) {
  if (precision_ == Precision::kFp32) return;
  const ElementType f = ElementType::kFloat;
  const TensorCounts counts = count_tensors(size_);
  const std::size_t state = counts.state;
  enqueue_conversion(x_.data(), element_, t.x, f, counts.x, stream_);
  enqueue_conversion(h0_.data(), element_, t.h0, f, state, stream_);
  enqueue_conversion(c0_.data(), element_, t.c0, f, state, stream_);
}

void CudnnLstm::unstage_outputs(const DeviceTensors& t) {
  if (precision_ == Precision::kFp32) return;
  const ElementType f = ElementType::kFloat;
  const TensorCounts counts = count_tensors(size_);
  enqueue_conversion(t.y, f, y_.data(), element_, counts.y, stream_);
  enqueue_conversion(t.hy, f, hy_.data(), element_, counts.state, stream_);
  enqueue_conversion(t.cy, f, cy_.data(), element_, counts.state, stream_);
}

void CudnnLstm::stage_upstream(const DeviceTensors& t) {
  if (precision_ == Precision::kFp32) return;
  if (dy_.data() == nullptr) {
    throw std::logic_error("cuDNN network: stage_upstream() before allocate_training_staging()");
  }
  const ElementType f = ElementType::kFloat;
  const TensorCounts counts = count_tensors(size_);
  enqueue_conversion(dy_.data(), element_, t.dy, f, counts.y, stream_);
  enqueue_conversion(dhy_.data(), element_, t.dhy, f, counts.state, stream_);
  enqueue_conversion(dcy_.data(), element_, t.dcy, f, counts.state, stream_);
}

void CudnnLstm::unstage_gradients(const DeviceTensors& t) {
  if (precision_ == Precision::kFp32) return;
  const ElementType f = ElementType::kFloat;
  const TensorCounts counts = count_tensors(size_);
  const std::size_t state = counts.state;
  enqueue_conversion(t.dx, f, dx_.data(), element_, counts.x, stream_);
  enqueue_conversion(t.dh0, f, dh0_.data(), element_, state, stream_);
  enqueue_conversion(t.dc0, f, dc0_.data(), element_, state, stream_);
}

void CudnnLstm::temp_space_sizes(cudnnForwardMode_t mode, std::size_t* workspace_bytes,
                                 std::size_t* reserve_bytes) const {
  CUDNN_CHECK(
      cudnnGetRNNTempSpaceSizes(handle_, rnn_desc_, mode, x_desc_, workspace_bytes, reserve_bytes));
}

void CudnnLstm::set_stream(cudaStream_t stream) {
  CUDNN_CHECK(cudnnSetStream(handle_, stream));
  stream_ = stream;
}

void CudnnLstm::forward(cudnnForwardMode_t mode, const DeviceTensors& t,
                        DeviceBuffer<unsigned char>& work, DeviceBuffer<unsigned char>& reserve) {
  stage_inputs(t);
  const CudnnIo d = io(t);
  CUDNN_CHECK(cudnnRNNForward(handle_, rnn_desc_, mode, seq_lengths_.data(), x_desc_, d.x, y_desc_,
                              d.y, h_desc_, d.h0, d.hy, c_desc_, d.c0, d.cy, weight_space_.bytes(),
                              weight_space_.data(), work.bytes(), work.data(), reserve.bytes(),
                              reserve.data()));
  unstage_outputs(t);
}

}  // namespace lstm::baseline_cudnn
