/*! \file stage.cu
 *  \brief Multi-GPU stage 00: data-parallel training over the G GPUs of one host, one process
 *         (one thread) driving them all. README.md is the lesson.
 *
 * A wrapper around a training stage of the registry (--inner, training/07_staged_dz unless
 * told): each GPU runs that stage on its share of the batch rows (split.h), and NCCL sums every
 * weight and bias gradient over the GPUs (ncclAllReduce, in place). Per pass:
 *   forward:  scatter x, h0, c0 (each GPU's batch rows) -> the inner forward -> gather y, hy, cy;
 *   backward: scatter dy, dhy, dcy -> the inner backward -> gather dx, dh0, dc0; each layer's
 *             gradients all-reduced on a stream of their own as soon as the inner stage says
 *             they are written (TrainingStage::gradients_ready), beside the backward of the
 *             layers below; a layer it never announces is all-reduced after its backward.
 * The harness's device is GPU 0: its share reads the harness's weights and writes the
 * harness's gradient buffers, which NCCL then sums in place, so no gradient is copied back.
 * --parts-json FILE also times the pieces one by one (scatter, per-GPU pass, all-reduce,
 * gather) in prepare() and appends them as one JSON line.
 */
#include <nccl.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/timing_stats.h"
#include "harness/cuda_utils.h"
#include "harness/stage.h"
#include "harness/stage_registry.h"
#include "split.h"

/// Checks an NCCL call; on failure throws std::runtime_error naming the call and NCCL's reason.
#define NCCL_CHECK(call)                                                                    \
  do {                                                                                      \
    const ncclResult_t lstm_nccl_ = (call);                                                 \
    if (lstm_nccl_ != ncclSuccess) {                                                        \
      throw std::runtime_error(std::string(#call) + ": " + ncclGetErrorString(lstm_nccl_)); \
    }                                                                                       \
  } while (0)

namespace lstm::LSTM_STAGE_NAMESPACE {
namespace {

constexpr const char* kDefaultInner = "training/07_staged_dz";
constexpr int kPartWarmup = 3, kPartRuns = 20;  // --parts-json: runs per piece

/// The registry's entry named `name`, or null.
const StageInfo* find_stage(const std::string& name) {
  for (const StageInfo& info : all_stages()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

/// Why the stage `name` cannot be the one each GPU runs, or "".
std::string inner_refusal(const std::string& name) {
  const StageInfo* info = find_stage(name);
  if (info == nullptr) {
    return "--inner " + name + ": no such stage (name a training stage, e.g. " + kDefaultInner +
           ")";
  }
  if (info->series == "multigpu") return "--inner " + name + ": a multi-GPU stage, not one GPU's";
  const std::unique_ptr<Stage> stage = info->make();
  if (stage->kind() != StageKind::kTraining) return "--inner " + name + ": not a training stage";
  // This stage reports FP32 (its precision, bounds and records): a 16-bit inner stage would get
  // inputs not rounded to its precision and FP32 bounds.
  if (stage->precision() != Precision::kFp32) {
    return "--inner " + name + ": computes in " + precision_name(stage->precision()) +
           "; the data-parallel stage runs FP32 stages";
  }
  return {};
}

/// Device floats of one GPU's share of a problem of size `s` (s.batch: the share's rows), with
/// its own copy of the parameters and their gradients or without.
std::size_t share_floats(const ProblemSize& s, bool own_parameters) {
  const std::size_t rows = s.batch, T = s.seq_len, H = s.hidden;
  std::size_t floats = 2 * T * rows * s.input_size  // x, dx
                       + 2 * T * rows * H           // y, dy
                       + 8 * s.layers * rows * H;   // h0, c0, hy, cy, dhy, dcy, dh0, dc0
  if (own_parameters) floats += 2 * allreduce_bytes(s) / sizeof(float);  // weights, gradients
  return floats;
}

/// Copies, in each of the `outer` slices of two (outer, batch, width) tensors, `rows` batch rows
/// of `width` floats: from the rows [src_begin, ..) of `src` (src_batch rows, on src_device) to
/// the rows [dst_begin, ..) of `dst` (dst_batch rows, on dst_device). One strided copy: the batch
/// is the middle dimension.
void copy_rows(float* dst, int dst_device, int dst_batch, int dst_begin, const float* src,
               int src_device, int src_batch, int src_begin, int outer, int rows, int width,
               cudaStream_t stream) {
  const std::size_t row = static_cast<std::size_t>(width) * sizeof(float);
  const std::size_t bytes = rows * row, dst_pitch = dst_batch * row, src_pitch = src_batch * row;
  float* to = dst + static_cast<std::size_t>(dst_begin) * width;
  const float* from = src + static_cast<std::size_t>(src_begin) * width;
  if (dst_device == src_device) {
    CUDA_CHECK(cudaMemcpy2DAsync(to, dst_pitch, from, src_pitch, bytes, outer,
                                 cudaMemcpyDeviceToDevice, stream));
    return;
  }
  cudaMemcpy3DPeerParms copy{};  // between two GPUs: the pitched peer copy
  copy.srcPtr = make_cudaPitchedPtr(const_cast<float*>(from), src_pitch, bytes, outer);
  copy.srcDevice = src_device;
  copy.dstPtr = make_cudaPitchedPtr(to, dst_pitch, bytes, outer);
  copy.dstDevice = dst_device;
  copy.extent = make_cudaExtent(bytes, outer, 1);
  CUDA_CHECK(cudaMemcpy3DPeerAsync(&copy, stream));
}

/// Keeps the current device and sets it back when it goes out of scope.
class KeepDevice {
 public:
  KeepDevice() { CUDA_CHECK(cudaGetDevice(&device_)); }
  ~KeepDevice() { cudaSetDevice(device_); }  // errors cannot be reported from a destructor
  KeepDevice(const KeepDevice&) = delete;
  KeepDevice& operator=(const KeepDevice&) = delete;
  int device() const { return device_; }

 private:
  int device_ = 0;
};

/// What one GPU holds and runs.
struct Replica {
  int device = 0;
  BatchShare share;
  std::unique_ptr<Stage> stage;  // the inner stage, prepared on this GPU for its share
  TrainingStage* inner = nullptr;
  DeviceTensors tensors;                  // this GPU's share of the problem
  std::vector<DeviceBuffer<float>> held;  // what tensors points to that this GPU allocated
  cudaStream_t stream = nullptr;          // the copies and the inner stage's pass
  cudaStream_t comm = nullptr;            // the all-reduces
  cudaEvent_t done = nullptr;             // the end of this GPU's part of a pass
  cudaEvent_t reduced = nullptr;          // the end of its all-reduces
  std::vector<cudaEvent_t> written;       // per layer: its gradients are written here
  ncclComm_t nccl = nullptr;

  float* allocate(std::size_t count) {
    held.emplace_back(count);
    return held.back().data();
  }
};

// ---------------------------------------------------------------------------------------------
// The stage
// ---------------------------------------------------------------------------------------------

class DataParallel final : public TrainingStage {
 public:
  ~DataParallel() override { release(); }

  void add_flags(CLI::App& app) override {
    app.add_option("--gpus", gpus_,
                   "G: the GPUs that split the batch (the harness's GPU and the next ones "
                   "visible) [default: 1]")
        ->check(CLI::Range(1, 64));
    app.add_option("--inner", inner_name_,
                   std::string("the training stage each GPU runs on its rows [default: ") +
                       kDefaultInner + "]")
        ->check([](const std::string& name) { return inner_refusal(name); })
        ->option_text("STAGE");
    app.add_option("--parts-json", parts_json_,
                   "also time the pieces one by one in prepare (scatter, per-GPU pass, all-reduce "
                   "alone, gather), print them and append them to FILE as one JSON line")
        ->option_text("FILE");
  }

  std::string unsupported_reason(const ProblemSize& s,
                                 const cudaDeviceProp& device) const override {
    int visible = 0;
    if (cudaGetDeviceCount(&visible) != cudaSuccess) visible = 0;
    if (std::string why = split_refusal(s.batch, gpus_, visible); !why.empty()) return why;
    if (std::string why = inner_refusal(inner_name_); !why.empty()) return why;
    const std::unique_ptr<Stage> inner = find_stage(inner_name_)->make();
    for (const BatchShare& share : split_batch(s.batch, gpus_)) {
      ProblemSize rows = s;
      rows.batch = share.rows;
      if (std::string why = inner->unsupported_reason(rows, device); !why.empty()) {
        return inner_name_ + " on " + std::to_string(share.rows) + " batch rows: " + why;
      }
    }
    return {};
  }

  /// On the harness's GPU (the other GPUs are checked in prepare()): its inner stage's
  /// workspace and its share of the tensors (its parameters are the harness's).
  std::size_t workspace_bytes(const ProblemSize& s) const override {
    if (!split_refusal(s.batch, gpus_, gpus_).empty() || find_stage(inner_name_) == nullptr) {
      return 0;  // refused by unsupported_reason()
    }
    ProblemSize rows = s;
    rows.batch = split_batch(s.batch, gpus_)[0].rows;
    return find_stage(inner_name_)->make()->workspace_bytes(rows) +
           share_floats(rows, false) * sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    release();
    const ProblemSize& s = t.size;
    KeepDevice keep;
    home_ = keep.device();
    int visible = 0;
    CUDA_CHECK(cudaGetDeviceCount(&visible));
    if (std::string why = split_refusal(s.batch, gpus_, visible); !why.empty()) {
      throw UnsupportedError(why);
    }
    if (std::string why = inner_refusal(inner_name_); !why.empty()) throw UnsupportedError(why);
    // NVLink multicast (NVLS) stays off unless the user set it: the machines this project runs on
    // must not use it, and NCCL would pick it on an NVSwitch host. Set before any communicator.
    setenv("NCCL_NVLS_ENABLE", "0", 0);

    // The GPUs: the harness's first, then the next ones by number.
    std::vector<int> devices{home_};
    for (int d = 0; static_cast<int>(devices.size()) < gpus_; ++d) {
      if (d != home_) devices.push_back(d);
    }
    const std::vector<BatchShare> shares = split_batch(s.batch, gpus_);
    for (int g = 0; g < gpus_; ++g) {
      replicas_.push_back(std::make_unique<Replica>());
      Replica& r = *replicas_.back();
      r.device = devices[g];
      r.share = shares[g];
      CUDA_CHECK(cudaSetDevice(r.device));
      make_share(t, r, g > 0);
      r.stage = find_stage(inner_name_)->make();
      r.inner = static_cast<TrainingStage*>(r.stage.get());
      cudaDeviceProp prop{};
      CUDA_CHECK(cudaGetDeviceProperties(&prop, r.device));
      const std::string where = inner_name_ + " on GPU " + std::to_string(r.device) + " (" +
                                std::to_string(r.share.rows) + " batch rows): ";
      if (std::string why = r.stage->unsupported_reason(r.tensors.size, prop); !why.empty()) {
        throw UnsupportedError(where + why);
      }
      std::size_t free_bytes = 0, total_bytes = 0;
      CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
      if (r.stage->workspace_bytes(r.tensors.size) > free_bytes) {
        throw UnsupportedError(where + "its workspace does not fit in the free device memory");
      }
      r.stage->prepare(r.tensors);
      CUDA_CHECK(cudaSetDevice(r.device));  // the inner prepare() may have left another current
      CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
      CUDA_CHECK(cudaStreamCreateWithFlags(&r.comm, cudaStreamNonBlocking));
      CUDA_CHECK(cudaEventCreateWithFlags(&r.done, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&r.reduced, cudaEventDisableTiming));
      r.written.assign(s.layers, nullptr);
      for (cudaEvent_t& event : r.written) {
        CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      }
      r.inner->set_gradients_ready_hook(
          [this, g](int layer, cudaStream_t stream) { gradients_written(g, layer, stream); });
    }
    for (int g = 1; g < gpus_; ++g) {  // direct copies between the harness's GPU and the others
      enable_peer_access(home_, devices[g]);
      enable_peer_access(devices[g], home_);
    }
    std::vector<ncclComm_t> comms(gpus_);
    NCCL_CHECK(ncclCommInitAll(comms.data(), gpus_, devices.data()));
    for (int g = 0; g < gpus_; ++g)
      replicas_[g]->nccl = comms[g];
    CUDA_CHECK(cudaSetDevice(home_));
    CUDA_CHECK(cudaEventCreateWithFlags(&inputs_ready_, cudaEventDisableTiming));
    written_.assign(s.layers, 0);
    reduced_.assign(s.layers, false);
    prepared_ = t;
    if (!parts_json_.empty()) time_parts(t);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    refuse_other_weights(t);
    point_home_share_at(t);
    KeepDevice keep;
    CUDA_CHECK(cudaEventRecord(inputs_ready_, stream));
    for (auto& replica : replicas_) {
      Replica& r = *replica;
      CUDA_CHECK(cudaSetDevice(r.device));
      CUDA_CHECK(cudaStreamWaitEvent(r.stream, inputs_ready_, 0));
      CUDA_CHECK(cudaStreamWaitEvent(r.comm, inputs_ready_, 0));  // join() waits on it (capture)
      scatter_forward(t, r);
      r.inner->forward(r.tensors, r.stream);
      CUDA_CHECK(cudaSetDevice(r.device));
      gather(t.y, r.tensors.y, s.seq_len, s.hidden, r, s);
      gather(t.hy, r.tensors.hy, s.layers, s.hidden, r, s);
      gather(t.cy, r.tensors.cy, s.layers, s.hidden, r, s);
    }
    join(stream);
  }

  void backward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    refuse_other_weights(t);
    point_home_share_at(t);
    KeepDevice keep;
    std::fill(written_.begin(), written_.end(), 0);
    std::fill(reduced_.begin(), reduced_.end(), false);
    CUDA_CHECK(cudaEventRecord(inputs_ready_, stream));
    for (auto& replica : replicas_) {
      Replica& r = *replica;
      CUDA_CHECK(cudaSetDevice(r.device));
      CUDA_CHECK(cudaStreamWaitEvent(r.stream, inputs_ready_, 0));
      CUDA_CHECK(cudaStreamWaitEvent(r.comm, inputs_ready_, 0));  // join() waits on it (capture)
      scatter_backward(t, r);
      // Enqueues this GPU's backward; its gradients_ready() calls land in gradients_written(),
      // which starts a layer's all-reduce once every GPU has written that layer.
      r.inner->backward(r.tensors, r.stream);
      CUDA_CHECK(cudaSetDevice(r.device));
      gather(t.dx, r.tensors.dx, s.seq_len, s.input_size, r, s);
      gather(t.dh0, r.tensors.dh0, s.layers, s.hidden, r, s);
      gather(t.dc0, r.tensors.dc0, s.layers, s.hidden, r, s);
    }
    // A layer the inner stage never announced: all-reduced after every GPU's whole backward.
    for (int l = s.layers - 1; l >= 0; --l) {
      if (reduced_[l]) continue;
      for (auto& r : replicas_) {
        CUDA_CHECK(cudaSetDevice(r->device));
        CUDA_CHECK(cudaEventRecord(r->written[l], r->stream));
      }
      all_reduce(l);
    }
    join(stream);
  }

 private:
  /// The other GPUs hold copies of the weights prepare() saw (make_share): a pass with others.
  void refuse_other_weights(const DeviceTensors& t) const {
    if (gpus_ > 1 && (t.w_ih != prepared_.w_ih || t.w_hh != prepared_.w_hh ||
                      t.b_ih != prepared_.b_ih || t.b_hh != prepared_.b_hh)) {
      throw std::runtime_error(
          "multigpu/00_data_parallel: a pass with other weights than prepare() copied to the "
          "other GPUs; call prepare() with them first");
    }
  }
  /// The harness's GPU reads the harness's parameters and writes its gradient buffers in place
  /// (make_share): its share points at those of the pass, which may be other tensors than
  /// prepare() saw (the other GPUs' copies of the weights may not: refuse_other_weights()).
  void point_home_share_at(const DeviceTensors& t) {
    DeviceTensors& d = replicas_.front()->tensors;
    d.w_ih = t.w_ih, d.w_hh = t.w_hh, d.b_ih = t.b_ih, d.b_hh = t.b_hh;
    d.grad_w_ih = t.grad_w_ih, d.grad_w_hh = t.grad_w_hh;
    d.grad_b_ih = t.grad_b_ih, d.grad_b_hh = t.grad_b_hh;
  }

  /// Points `r.tensors` at GPU r.device's share of `t`: its own buffers for the batch rows; the
  /// harness's parameters and gradient buffers on the harness's GPU (`own_parameters` false),
  /// else copies of the parameters and buffers of its own for their gradients.
  void make_share(const DeviceTensors& t, Replica& r, bool own_parameters) {
    ProblemSize s = t.size;
    s.batch = r.share.rows;
    const std::size_t rows = s.batch, T = s.seq_len, H = s.hidden, state = s.layers * rows * H;
    DeviceTensors& d = r.tensors;
    d.size = s;
    d.x = r.allocate(T * rows * s.input_size);
    d.h0 = r.allocate(state);
    d.c0 = r.allocate(state);
    d.y = r.allocate(T * rows * H);
    d.hy = r.allocate(state);
    d.cy = r.allocate(state);
    d.dy = r.allocate(T * rows * H);
    d.dhy = r.allocate(state);
    d.dcy = r.allocate(state);
    d.dx = r.allocate(T * rows * s.input_size);
    d.dh0 = r.allocate(state);
    d.dc0 = r.allocate(state);
    if (!own_parameters) {
      d.w_ih = t.w_ih, d.w_hh = t.w_hh, d.b_ih = t.b_ih, d.b_hh = t.b_hh;
      d.grad_w_ih = t.grad_w_ih, d.grad_w_hh = t.grad_w_hh;
      d.grad_b_ih = t.grad_b_ih, d.grad_b_hh = t.grad_b_hh;
      return;
    }
    auto copy_of = [&](const float* from, std::size_t count) {
      float* to = r.allocate(count);
      CUDA_CHECK(cudaMemcpyPeer(to, r.device, from, home_, count * sizeof(float)));
      return to;
    };
    const std::size_t four_h = 4 * H;
    for (int l = 0; l < s.layers; ++l) {
      const std::size_t in = s.layer_input_size(l);
      d.w_ih.push_back(copy_of(t.w_ih[l], four_h * in));
      d.w_hh.push_back(copy_of(t.w_hh[l], four_h * H));
      d.b_ih.push_back(copy_of(t.b_ih[l], four_h));
      d.b_hh.push_back(copy_of(t.b_hh[l], four_h));
      d.grad_w_ih.push_back(r.allocate(four_h * in));
      d.grad_w_hh.push_back(r.allocate(four_h * H));
      d.grad_b_ih.push_back(r.allocate(four_h));
      d.grad_b_hh.push_back(r.allocate(four_h));
    }
    CUDA_CHECK(cudaDeviceSynchronize());  // the copies are done before the inner prepare()
  }

  static void enable_peer_access(int device, int peer) {
    int possible = 0;
    CUDA_CHECK(cudaDeviceCanAccessPeer(&possible, device, peer));
    if (!possible) return;  // the copies then go through the host: slower, still right
    CUDA_CHECK(cudaSetDevice(device));
    const cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);
    if (status == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();  // clears it: enabled before is what we want
    } else {
      CUDA_CHECK(status);
    }
  }

  /// The tensors (outer, B, width) of the whole problem, split by batch rows: GPU r's rows from
  /// `whole` into its `share`, or back.
  void scatter(const float* whole, float* share, int outer, int width, const Replica& r,
               const ProblemSize& s) {
    copy_rows(share, r.device, r.share.rows, 0, whole, home_, s.batch, r.share.begin, outer,
              r.share.rows, width, r.stream);
  }
  void gather(float* whole, const float* share, int outer, int width, const Replica& r,
              const ProblemSize& s) {
    copy_rows(whole, home_, s.batch, r.share.begin, share, r.device, r.share.rows, 0, outer,
              r.share.rows, width, r.stream);
  }
  void scatter_forward(const DeviceTensors& t, Replica& r) {
    const ProblemSize& s = t.size;
    scatter(t.x, const_cast<float*>(r.tensors.x), s.seq_len, s.input_size, r, s);
    scatter(t.h0, const_cast<float*>(r.tensors.h0), s.layers, s.hidden, r, s);
    scatter(t.c0, const_cast<float*>(r.tensors.c0), s.layers, s.hidden, r, s);
  }
  void scatter_backward(const DeviceTensors& t, Replica& r) {
    const ProblemSize& s = t.size;
    scatter(t.dy, const_cast<float*>(r.tensors.dy), s.seq_len, s.hidden, r, s);
    scatter(t.dhy, const_cast<float*>(r.tensors.dhy), s.layers, s.hidden, r, s);
    scatter(t.dcy, const_cast<float*>(r.tensors.dcy), s.layers, s.hidden, r, s);
  }

  /// The hook of GPU g's inner stage: layer `layer`'s gradients are written once `stream` gets
  /// here. The last GPU to say so for a layer starts its all-reduce.
  void gradients_written(int g, int layer, cudaStream_t stream) {
    if (!overlap_) return;  // --parts-json times the pass without its all-reduces
    CUDA_CHECK(cudaEventRecord(replicas_[g]->written[layer], stream));
    if (++written_[layer] == gpus_) all_reduce(layer);
  }

  /// Enqueues the sum over the GPUs of layer `layer`'s four gradients, in place, each GPU's on
  /// its communication stream after its event `written[layer]`: one NCCL group, as one thread
  /// driving several GPUs must.
  void all_reduce(int layer) {
    KeepDevice keep;  // an inner stage goes on enqueueing on its GPU after its hook returns
    for (auto& r : replicas_) {
      CUDA_CHECK(cudaSetDevice(r->device));
      CUDA_CHECK(cudaStreamWaitEvent(r->comm, r->written[layer], 0));
    }
    NCCL_CHECK(ncclGroupStart());
    for (auto& r : replicas_) {
      const DeviceTensors& d = r->tensors;
      const std::size_t four_h = 4 * static_cast<std::size_t>(d.size.hidden);
      const std::size_t in = d.size.layer_input_size(layer);
      sum(d.grad_w_ih[layer], four_h * in, *r);
      sum(d.grad_w_hh[layer], four_h * d.size.hidden, *r);
      sum(d.grad_b_ih[layer], four_h, *r);
      sum(d.grad_b_hh[layer], four_h, *r);
    }
    NCCL_CHECK(ncclGroupEnd());
    reduced_[layer] = true;
  }
  static void sum(float* gradient, std::size_t count, const Replica& r) {
    NCCL_CHECK(ncclAllReduce(gradient, gradient, count, ncclFloat, ncclSum, r.nccl, r.comm));
  }

  /// Makes `stream` (the harness's) wait for every GPU's part of the pass, all-reduces included.
  void join(cudaStream_t stream) {
    for (auto& r : replicas_)
      finish(*r);
    CUDA_CHECK(cudaSetDevice(home_));
    for (auto& r : replicas_)
      CUDA_CHECK(cudaStreamWaitEvent(stream, r->done, 0));
  }
  static void finish(Replica& r) {
    CUDA_CHECK(cudaSetDevice(r.device));
    CUDA_CHECK(cudaEventRecord(r.reduced, r.comm));
    CUDA_CHECK(cudaStreamWaitEvent(r.stream, r.reduced, 0));
    CUDA_CHECK(cudaEventRecord(r.done, r.stream));
  }

  // -------------------------------------------------------------------------------------------
  // --parts-json: the pieces of a pass, each timed alone
  // -------------------------------------------------------------------------------------------

  /// Median ms of `each` enqueued on every GPU (then `then`, once), from one event on the
  /// harness's GPU to the last GPU's end.
  double time_on_all(const std::function<void(Replica&)>& each, const std::function<void()>& then) {
    cudaStream_t timing;
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaSetDevice(home_));
    CUDA_CHECK(cudaStreamCreateWithFlags(&timing, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<double> ms;
    for (int run = 0; run < kPartWarmup + kPartRuns; ++run) {
      CUDA_CHECK(cudaSetDevice(home_));
      CUDA_CHECK(cudaEventRecord(start, timing));
      for (auto& r : replicas_) {
        CUDA_CHECK(cudaSetDevice(r->device));
        CUDA_CHECK(cudaStreamWaitEvent(r->stream, start, 0));
        each(*r);
      }
      then();
      join(timing);
      CUDA_CHECK(cudaEventRecord(stop, timing));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float elapsed = 0.0f;
      CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
      if (run >= kPartWarmup) ms.push_back(elapsed);
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    CUDA_CHECK(cudaStreamDestroy(timing));
    return summarize_runs(ms).median_ms;
  }

  void time_parts(const DeviceTensors& t) {
    const ProblemSize& s = t.size;
    const auto nothing = [] {};
    const double scatter_ms = time_on_all(
        [&](Replica& r) {
          scatter_forward(t, r);
          scatter_backward(t, r);
        },
        nothing);
    overlap_ = false;  // the pass alone: no all-reduce from the hook
    const double pass_ms = time_on_all(
        [](Replica& r) {
          r.inner->forward(r.tensors, r.stream);
          r.inner->backward(r.tensors, r.stream);
          CUDA_CHECK(cudaSetDevice(r.device));
        },
        nothing);
    overlap_ = true;
    const double all_reduce_ms = time_on_all(
        [&](Replica& r) {
          for (cudaEvent_t event : r.written)
            CUDA_CHECK(cudaEventRecord(event, r.stream));
        },
        [&] {
          for (int l = s.layers - 1; l >= 0; --l)
            all_reduce(l);
        });
    const double gather_ms = time_on_all(
        [&](Replica& r) {
          gather(t.y, r.tensors.y, s.seq_len, s.hidden, r, s);
          gather(t.hy, r.tensors.hy, s.layers, s.hidden, r, s);
          gather(t.cy, r.tensors.cy, s.layers, s.hidden, r, s);
          gather(t.dx, r.tensors.dx, s.seq_len, s.input_size, r, s);
          gather(t.dh0, r.tensors.dh0, s.layers, s.hidden, r, s);
          gather(t.dc0, r.tensors.dc0, s.layers, s.hidden, r, s);
        },
        nothing);
    CUDA_CHECK(cudaSetDevice(home_));
    // NCCL's bus bandwidth of an all-reduce: bytes / time * 2 (G - 1) / G (0 on one GPU).
    const double bytes = static_cast<double>(allreduce_bytes(s));
    const double bus_gb_per_s = bytes / (all_reduce_ms * 1e-3) * 2.0 * (gpus_ - 1) / gpus_ / 1e9;
    std::ostringstream line;
    line << std::fixed << std::setprecision(4) << "{\"stage\": \"multigpu/00_data_parallel\", "
         << "\"inner\": \"" << inner_name_ << "\", \"gpus\": " << gpus_
         << ", \"hidden\": " << s.hidden << ", \"input_size\": " << s.input_size
         << ", \"batch\": " << s.batch << ", \"seq_len\": " << s.seq_len
         << ", \"layers\": " << s.layers << ", \"largest_share\": " << replicas_[0]->share.rows
         << ", \"runs\": " << kPartRuns << ", \"scatter_ms\": " << scatter_ms
         << ", \"pass_ms\": " << pass_ms << ", \"allreduce_ms\": " << all_reduce_ms
         << ", \"allreduce_bytes\": " << allreduce_bytes(s)
         << ", \"allreduce_bus_gb_per_s\": " << bus_gb_per_s << ", \"gather_ms\": " << gather_ms
         << "}";
    std::cout << std::fixed << std::setprecision(3) << "parts (median of " << kPartRuns
              << ", G = " << gpus_ << "): scatter " << scatter_ms << " ms, per-GPU pass " << pass_ms
              << " ms, all-reduce alone " << all_reduce_ms << " ms (" << bytes / 1e6 << " MB, bus "
              << bus_gb_per_s << " GB/s), gather " << gather_ms << " ms\n"
              << std::defaultfloat;
    std::ofstream out(parts_json_, std::ios::app);
    out << line.str() << "\n";
    if (!out) throw std::runtime_error("--parts-json: cannot append to " + parts_json_);
  }

  /// Frees everything prepare() made, each GPU's with that GPU current.
  void release() {
    int current = 0;
    if (replicas_.empty() || cudaGetDevice(&current) != cudaSuccess) return;  // nothing made
    for (auto& r : replicas_) {
      cudaSetDevice(r->device);
      cudaDeviceSynchronize();
      if (r->nccl) ncclCommDestroy(r->nccl);
      for (cudaEvent_t event : r->written) {
        if (event) cudaEventDestroy(event);
      }
      if (r->done) cudaEventDestroy(r->done);
      if (r->reduced) cudaEventDestroy(r->reduced);
      if (r->stream) cudaStreamDestroy(r->stream);
      if (r->comm) cudaStreamDestroy(r->comm);
      r.reset();  // the inner stage and the buffers, on their GPU
    }
    replicas_.clear();
    cudaSetDevice(home_);
    if (inputs_ready_) cudaEventDestroy(inputs_ready_);
    inputs_ready_ = nullptr;
    cudaSetDevice(current);
  }

  int gpus_ = 1;
  std::string inner_name_ = kDefaultInner;
  std::string parts_json_;
  int home_ = 0;  // the harness's GPU: GPU 0 of the split
  std::vector<std::unique_ptr<Replica>> replicas_;
  DeviceTensors prepared_;  // what prepare() saw: the other GPUs hold copies of its weights
  cudaEvent_t inputs_ready_ = nullptr;  // on the harness's stream: a pass's inputs are there
  std::vector<int> written_;            // per layer: how many GPUs have written it
  std::vector<bool> reduced_;           // per layer: its all-reduce is enqueued
  bool overlap_ = true;                 // the hook starts all-reduces
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<DataParallel>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
