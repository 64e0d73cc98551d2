#!/usr/bin/env python3
"""Proves that the tests can fail.

Breaks the code on purpose, one mutation at a time, rebuilds, and requires the tests of the
named CTest label to FAIL; restores every file afterwards. "gpu" mutations are caught by the GPU
tests and so need a CUDA GPU; "cpu" ones run anywhere.

usage: scripts/mutation_check.py cpu|gpu|all [--build DIR] [--only TEXT] [--test-timeout S]
                                            [--targets T...] [--texts-only]

--texts-only checks, without building or running anything (no GPU needed), that each mutation's
text is found exactly once in its file, as the check requires: a renamed file or an edited line
shows up here.

A test that runs past --test-timeout seconds (default 300) is stopped by CTest and counts as
failed: a mutation that makes a test hang is caught, not a check that never ends.
--targets builds only the named CMake targets after each mutation (and they must hold every
test the selected mutations run), not the whole tree: on a machine of a few cores a whole build
takes an hour, e.g. --only "training 50" --targets training50_plan_tests.

Exit status: 0 every selected mutation caught (--texts-only: every text found once), 1 not so,
2 a usage error: a bad option, an --only that selects nothing, a --build DIR not configured.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stage_tests(file):
    """The CTest -R regex of the stage whose folder holds `file`, or None outside stages/."""
    match = re.match(r"stages/(\w+)/(\d\d_\w+)/", file)
    return f"{match.group(1)}_{match.group(2)}" if match else None


# (kind, what the mutation breaks, file, exact text, replacement, CTest label that must fail
#  [, the names of the tests to run: a CTest -R regex])
# GPU mutations run only the tests of the stage they break: by default the tests named after the
# stage whose folder holds the file (stages/training/07_staged_dz/... -> training_07_staged_dz:
# each stage's GPU tests and its runs in gpu_tests carry that name, tests/CMakeLists.txt); the
# other stages' tests do not exercise it and would only slow the check down. A GPU mutation
# outside a stage's folder names its tests. A CPU mutation runs every test of its label, unless it
# names its tests (a stage's rule, tested by the CPU cases of its GPU test binary).
MUTATIONS = [
    ("gpu", "stage 00 swaps the f and g gates in the cell update", "stages/forward/00_naive/stage.cu",
     "cell_.data(), gates_[0].data(), gates_[1].data(), gates_[2].data()",
     "cell_.data(), gates_[0].data(), gates_[2].data(), gates_[1].data()", "gpu"),
    ("gpu", "stage 00 never writes hy", "stages/forward/00_naive/stage.cu",
     "CUDA_CHECK(cudaMemcpyAsync(t.hy +", "if (false) CUDA_CHECK(cudaMemcpyAsync(t.hy +", "gpu"),
    ("gpu", "stage 00 adds b_ih twice and never b_hh", "stages/forward/00_naive/stage.cu",
     "gate[index] += b_ih[unit] + b_hh[unit];", "gate[index] += b_ih[unit] + b_ih[unit];", "gpu"),
    ("gpu", "stage 00 leaves the last element of each h_t unwritten", "stages/forward/00_naive/stage.cu",
     "  if (index >= count) return;\n  hidden_out[index]",
     "  if (index >= count - 1) return;\n  hidden_out[index]",
     "gpu"),
    ("gpu", "stage 01's input GEMM leaves out the last step's input part",
     "stages/forward/01_combined_gemms/stage.cu", "four_h, s.seq_len * B, input_size,",
     "four_h, (s.seq_len - 1) * B, input_size,", "gpu"),
    ("gpu", "stage 02's input GEMM of a chunk leaves out the chunk's last step",
     "stages/forward/02_streams/stage.cu",
     "steps = std::min(kChunkSteps, s.seq_len - first);\n\n    // Layer l-1's",
     "steps = std::min(kChunkSteps, s.seq_len - first) - 1;\n\n    // Layer l-1's", "gpu"),
    ("gpu", "stage 03's fused kernel swaps the input and forget gates in c",
     "stages/forward/03_fused_pointwise/stage.cu",
     "act[1] * cell[index] + act[0] * act[kGateG]", "act[0] * cell[index] + act[1] * act[kGateG]",
     "gpu"),
    ("gpu", "stage 04 re-lays out W_ih where W_hh belongs", "stages/forward/04_transposed_weights/stage.cu",
     "t.w_hh[l], s.hidden, &zero, t.w_hh[l], s.hidden,", "t.w_ih[l], s.hidden, &zero, t.w_ih[l], s.hidden,",
     "gpu"),
    ("gpu", "stage 05's wavefront never issues its last diagonal (the last layer's last chunk)",
     "stages/forward/05_layer_wavefront/stage.cu", "diagonal < chunks + s.layers - 1;",
     "diagonal < chunks + s.layers - 2;", "gpu"),
    ("gpu", "stage 06 replays the graph it recorded first, whatever tensors a pass brings",
     "stages/forward/06_cuda_graph/stage.cu", "    if (!same_tensors(t, captured_)) {\n      CUDA_CHECK(cudaStreamSynchronize(stream));",
     "    if (!graph_exec_) {\n      CUDA_CHECK(cudaStreamSynchronize(stream));", "gpu"),
    ("gpu", "stage 04 keeps the weights it transposed first, whatever tensors a pass brings",
     "stages/forward/04_transposed_weights/stage.cu", "    if (!same_tensors(t, transposed_)) {",
     "    if (false) {", "gpu"),
    ("gpu", "stage 05 keeps the weights it transposed first, whatever tensors a pass brings",
     "stages/forward/05_layer_wavefront/stage.cu", "    if (!same_tensors(t, transposed_)) {",
     "    if (false) {", "gpu"),
    ("gpu", "stage 20 replays the graph it recorded first, whatever tensors a pass brings",
     "stages/forward/20_tensor_core_gemms/stage.cu",
     "    if (!same_tensors(t, captured_)) {\n      CUDA_CHECK(cudaStreamSynchronize(stream));",
     "    if (!graph_exec_) {\n      CUDA_CHECK(cudaStreamSynchronize(stream));", "gpu"),
    ("gpu", "stage 07 drops the grid barrier: blocks read h_{t-1} before its owners wrote it",
     "stages/forward/07_persistent_barrier/kernel.cuh", "    grid.sync();\n", "", "gpu"),
    ("gpu", "stage 07 launches one block too few: the last block's units have no owner",
     "stages/forward/07_persistent_barrier/stage.cu", "f.blocks = ceil_div(H, J);",
     "f.blocks = ceil_div(H, J) - 1;", "gpu"),
    ("gpu", "stage 07 adds only the first k slice's partial sums",
     "stages/forward/07_persistent_barrier/kernel.cuh",
     "for (int s = 0; s < S; ++s) {  // fixed order", "for (int s = 0; s < 1; ++s) {  // fixed order",
     "gpu"),
    ("gpu", "stage 08 reads h_{t-1} without waiting for it to be published",
     "stages/forward/08_published_h/primitives.cuh", "if (!missing) return;", "return;", "gpu"),
    ("gpu", "stage 08 publishes h_t into the slot of h_{t-1}: readers wait, the kernel traps",
     "stages/forward/08_published_h/kernel.cuh",
     "float* h_next = a.exchange + static_cast<std::size_t>(t + 1) * rows * H;",
     "float* h_next = a.exchange + static_cast<std::size_t>(t) * rows * H;", "gpu"),
    ("gpu", "stage 08 leaves the last block's units unpublished (one block too few)",
     "stages/forward/08_published_h/stage.cu", "f.blocks = ceil_div(H, J);",
     "f.blocks = ceil_div(H, J) - 1;", "gpu"),
    # ---- issue 21: the re-sequenced persistent steps, forward 09_register_tiled and
    # 10_chunked_staging (each mutation breaks the idea its stage adds; the tests that catch
    # it: the stage's runs at the odd shapes, the PyTorch fixture and H = 1300, B = 9).
    ("gpu", "forward 09 stages h_{t-1} with the unpadded row stride: the tiles read shifted rows",
     "stages/forward/09_register_tiled/kernel.cuh", "h_flat[(i % H) * 4 * Bh4 + i / H]",
     "h_flat[(i % H) * Bp + i / H]", "gpu"),
    ("gpu", "forward 09's k slices end one row early: the last row of h_{t-1} is never multiplied",
     "stages/forward/09_register_tiled/kernel.cuh", "k_end = (k_slice + 1) * H / a.k_slices;",
     "k_end = (k_slice + 1) * (H - 1) / a.k_slices;", "gpu"),
    ("gpu", "forward 09 writes a tile's partial sums at its float4 offset, not its column offset",
     "stages/forward/09_register_tiled/kernel.cuh", "batch_tile * kTileBatch);",
     "batch_tile * kTile4);", "gpu"),
    ("gpu", "forward 10's last chunk of h_{t-1} is one row short: staged and multiplied without it",
     "stages/forward/10_chunked_staging/kernel.cuh",
     "const int last_rows = H - (a.chunks - 1) * a.chunk_rows;",
     "const int last_rows = H - (a.chunks - 1) * a.chunk_rows - 1;", "gpu"),
    ("gpu", "forward 10 loads the next chunk from a row offset without the row width",
     "stages/forward/10_chunked_staging/kernel.cuh",
     "const float4* source = h_prev + static_cast<std::size_t>(chunk) * a.chunk_rows * Bp4;",
     "const float4* source = h_prev + static_cast<std::size_t>(chunk) * a.chunk_rows;", "gpu"),
    ("gpu", "forward 10 never publishes the padding columns of h_t: their readers wait, the kernel traps",
     "stages/forward/10_chunked_staging/kernel.cuh", "          store_relaxed(published, 0.0f);",
     "          (void)published;", "gpu"),
    # ---- end of issue 21's block
    # ---- forward stage 13 (tensor cores): tests/test_tensor_cores_gpu.cpp must catch each.
    ("gpu", "stage 13 reads k rows 8-15 of each B fragment from rows 0-7 (a wrong fragment layout)",
     "stages/forward/13_tensor_cores/kernel.cuh", "h_fragment[4 * S + n * kMmaColumns]",
     "h_fragment[n * kMmaColumns]", "gpu"),
    ("gpu", "stage 13 stores W's A fragments with rows and k halves mixed up",
     "stages/forward/13_tensor_cores/kernel.cuh", "fragment_lane / 4 + 8 * (r & 1);",
     "fragment_lane / 4 + 8 * (r >> 1);", "gpu"),
    ("gpu", "stage 13 adds only the first k slice's partial sums",
     "stages/forward/13_tensor_cores/kernel.cuh", "for (int s = 0; s < a.k_slices; ++s) {",
     "for (int s = 0; s < 1; ++s) {", "gpu"),
    # ---- forward stage 14 (the input GEMM in 16 bits): the same test source must catch each.
    ("gpu", "stage 14 rounds only the first layer's input sequence: the layers above read a stale buffer",
     "stages/forward/14_input_gemm_16bit/stage.cu",
     "      round_to_16_bits(input_sequence, input_16_.data(),",
     "      if (layer == 0) round_to_16_bits(input_sequence, input_16_.data(),", "gpu"),
    ("gpu", "stage 14 rounds the first layer's W_ih for every layer",
     "stages/forward/14_input_gemm_16bit/stage.cu", "round_to_16_bits(t.w_ih[layer], w_ih_16_.data(),",
     "round_to_16_bits(t.w_ih[0], w_ih_16_.data(),", "gpu"),
    # ---- forward stage 15 (h published in 16 bits) and 16 (the pass as one CUDA graph).
    ("gpu", "stage 15 stages the low half of each word twice: columns 1 and 3 read columns 0 and 2",
     "stages/forward/15_published_h_16bit/kernel.cuh", "          at[2] = staged[r].x >> 16;",
     "          at[2] = staged[r].x & 0xFFFFu;", "gpu"),
    ("gpu", "stage 15 publishes zeros as h0 (slot 0)",
     "stages/forward/15_published_h_16bit/primitives.cuh",
     "element_bits<Element>((b < group_batch && row < batch_end)",
     "element_bits<Element>((false)", "gpu"),
    ("gpu", "stage 15 resets half the exchange buffer's bytes: later steps read stale values",
     "stages/forward/15_published_h_16bit/stage.cu",
     "s.seq_len * slot * sizeof(std::uint16_t), stream));", "s.seq_len * slot, stream));", "gpu"),
    ("gpu", "stage 16 keeps launching the graph recorded with the first tensors it saw",
     "stages/forward/16_graph_of_a_pass/stage.cu",
     "    if (!same_tensors(t, captured_)) capture(t);",
     "    if (false && !same_tensors(t, captured_)) capture(t);", "gpu"),
    # ---- forward stage 17 (the weights prepared once).
    ("gpu", "stage 17 arranges each word's two k in the wrong order",
     "stages/forward/17_weights_prepared_once/kernel.cuh",
     "fragments[n] = pack_pair<Element>(real && k < H ? w_row[k] : 0.0f,",
     "fragments[n] = pack_pair<Element>(real && k + 1 < H ? w_row[k + 1] : 0.0f,", "gpu"),
    ("gpu", "stage 17's blocks all copy the first unit block's fragments",
     "stages/forward/17_weights_prepared_once/kernel.cuh",
     "a.w_fragments + static_cast<std::size_t>(unit_block) * block_words + i",
     "a.w_fragments + i", "gpu"),
    ("gpu", "stage 17 keeps the weights it prepared first when a pass brings other tensors",
     "stages/forward/17_weights_prepared_once/stage.cu",
     "      prepare_weights(t, stream);       // after the passes already on `stream`\n", "", "gpu"),
    ("gpu", "stage 11 adds only the first k slice's partial sums",
     "stages/forward/11_batch_groups/kernel.cuh", "for (int s = 0; s < a.k_slices; ++s) {",
     "for (int s = 0; s < 1; ++s) {", "gpu"),
    ("gpu", "stage 11 reads h_{t-1} without waiting for it to be published",
     "stages/forward/11_batch_groups/primitives.cuh", "if (!missing) return;", "return;", "gpu"),
    ("gpu", "stage 11 never copies the input parts W_ih x_t into shared memory",
     "stages/forward/11_batch_groups/kernel.cuh",
     "copy_async_4(input_s + pair * kGates + q, in + q * H);", "(void)in;", "gpu"),
    ("gpu", "stage 12 (shared-memory kernel) adds only the first k slice's partial sums",
     "stages/forward/12_small_batch_registers/kernel.cuh", "for (int s = 0; s < a.k_slices; ++s) {",
     "for (int s = 0; s < 1; ++s) {", "gpu"),
    ("gpu", "stage 12 (register kernel) adds only the first k slice's partial sums",
     "stages/forward/12_small_batch_registers/kernel_registers.cuh", "for (int s = 0; s < slices; ++s) {",
     "for (int s = 0; s < 1; ++s) {", "gpu"),
    ("gpu", "stage 12 (both kernels) reads h_{t-1} without waiting for it to be published",
     "stages/forward/12_small_batch_registers/primitives.cuh", "if (!missing) return;", "return;", "gpu"),
    ("gpu", "stage 12 (register kernel) skips the butterfly across lanes",
     "stages/forward/12_small_batch_registers/kernel_registers.cuh", "    sum_over_k_lanes(acc, lane, lanes_k);", "", "gpu"),
    ("gpu", "stage 12 (register kernel) never adds the input parts it computes",
     "stages/forward/12_small_batch_registers/kernel_registers.cuh", "if (own_inputs) add_input_part(t);",
     "if (false) add_input_part(t);", "gpu"),
    # ---- issue 25: forward 18_layers_in_one_launch, the layers of one launch as a wavefront; the
    # hand-up between layers (the tests that catch it: the stage's wave_* cases, several layers
    # per launch).
    ("gpu", "forward 18 hands the next launch the h sequence it is about to write, not the one below's",
     "stages/forward/18_layers_in_one_launch/stage.cu",
     "first == 0 ? t.x : layer_outputs_[(n - 1) % 2].data();",
     "first == 0 ? t.x : layer_outputs_[n % 2].data();", "gpu"),
    ("gpu", "forward 18 starts every layer of a launch from the first layer's h0",
     "stages/forward/18_layers_in_one_launch/stage.cu", "t.h0 + (first + lag) * state,",
     "t.h0 + first * state,", "gpu"),
    ("gpu", "forward 18's upper layers read their own h and the next part, not the layer below's h_t",
     "stages/forward/18_layers_in_one_launch/kernel.cuh",
     "(a.lag - (a.input_rows > 0 ? 1 : 0)) * part_floats;", "a.lag * part_floats;", "gpu"),
    ("gpu", "forward 18's upper layers multiply the layer below's h_t by W_hh instead of W_ih",
     "stages/forward/18_layers_in_one_launch/kernel.cuh",
     "return k < a.input_rows ? a.w_ih + r * a.input_rows + k :",
     "return k < a.input_rows ? a.w_hh + r * H + k :", "gpu"),
    # ---- issue 25: forward 19_tensor_core_layers_in_one_launch, forward 18's wavefront on the
    # tensor-core kernel (the tests that catch it: its wave_* cases and TensorCoresWavefront.*,
    # tests/test_tensor_cores_gpu.cpp).
    ("gpu", "forward 19's upper layers read their own h and the next part, not the layer below's h_t",
     "stages/forward/19_tensor_core_layers_in_one_launch/kernel.cuh",
     "(a.lag - (a.input_rows > 0 ? 1 : 0)) * part_values;", "a.lag * part_values;", "gpu"),
    ("gpu", "forward 19 arranges W_hh where an upper layer's fragments hold W_ih",
     "stages/forward/19_tensor_core_layers_in_one_launch/kernel.cuh",
     ": k < input_rows ? w_ih[w_row * input_rows + k]", ": k < input_rows ? w_hh[w_row * H + k]",
     "gpu"),
    ("gpu", "forward 19 publishes each batch group's h0 one layer's part apart, not all the layers'",
     "stages/forward/19_tensor_core_layers_in_one_launch/stage.cu",
     "plan.padded_batch, begin, end, part * parts);", "plan.padded_batch, begin, end, part);",
     "gpu"),
    ("gpu", "forward 19's planner gives an upper layer of a launch no input rows of its own",
     "stages/forward/19_tensor_core_layers_in_one_launch/plan.cpp",
     "plan.input_rows = i == 0 ? 0 : s.hidden;", "plan.input_rows = 0;", "gpu"),
    # ---- issue 25: forward 21_input_parts_by_gate_row, the input parts stored (4H, T, B)
    # (the tests that catch it: its cases in tests/test_tensor_cores_gpu.cpp).
    ("gpu", "forward 21 reads gate q's input part one unit further on instead of q * H rows on",
     "stages/forward/21_input_parts_by_gate_row/kernel.cuh", "in + q * H * row_stride);",
     "in + q * row_stride);", "gpu"),
    ("gpu", "forward 21 reads the input parts by batch row, stage 19's order, from the new layout",
     "stages/forward/21_input_parts_by_gate_row/kernel.cuh",
     "input_t + (first_unit + pj) * row_stride + first_row + pb;",
     "input_t + (first_row + pb) * row_stride + first_unit + pj;", "gpu"),
    # ---- issue 24: forward 22_recurrence_in_one_cluster, h_t between the blocks of a cluster
    # (the tests that catch it: its cases in tests/test_tensor_cores_gpu.cpp).
    ("gpu", "forward 22 sends h_t into the buffer the step reads, not the next step's",
     "stages/forward/22_recurrence_in_one_cluster/cluster_kernel.cuh",
     "shared_address(h_s + (next * kClusterRows + r) * h_row",
     "shared_address(h_s + (buffer * kClusterRows + r) * h_row", "gpu"),
    ("gpu", "forward 22 adds only the first k slice's partial sums into the gates",
     "stages/forward/22_recurrence_in_one_cluster/cluster_kernel.cuh",
     "for (int s = 0; s < slices; ++s)", "for (int s = 0; s < 1; ++s)", "gpu"),
    # ---- issue 24: forward 23_weights_in_registers, W_hh's fragments held in registers
    # (the tests that catch it: its held_* and chunk cases and TensorCoresHeldWeights.*,
    # tests/test_tensor_cores_gpu.cpp).
    ("gpu", "forward 23 loads every warp the first k slice's tiles instead of its own",
     "stages/forward/23_weights_in_registers/kernel.cuh",
     "((last_first + i) * row_tiles + row_tile) * kWarpSize + lane;",
     "(i * row_tiles + row_tile) * kWarpSize + lane;", "gpu"),
    ("gpu", "forward 23 holds one tile past a warp's share (the next slice's first) instead of zeros",
     "stages/forward/23_weights_in_registers/kernel.cuh",
     "held && computes && i < last_count ?", "held && computes && i <= last_count ?", "gpu"),
    ("gpu", "forward 23's planner holds W where a step stages h in several chunks",
     "stages/forward/23_weights_in_registers/plan.cpp",
     "plan.threads <= kHeldThreads && plan.chunks == 1 &&", "plan.threads <= kHeldThreads &&",
     "gpu"),
    ("gpu", "forward 23's planner rounds a warp's share of 17 to 32 k tiles down to 16",
     "stages/forward/23_weights_in_registers/plan.cpp",
     "share <= 16 ? 16 : kHeldTiles;", "share <= 32 ? 16 : kHeldTiles;", "gpu"),
    ("cpu", "forward 23's planner keeps W's shared memory in a plan that holds W in registers",
     "stages/forward/23_weights_in_registers/plan.cpp",
     "(p.held_tiles > 0 ? 0 : mma_rows", "(p.held_tiles > 0 ? mma_rows : mma_rows", "gpu"),
    # ---- issue 25: forward 24_wavefront_with_weights_in_registers, a wavefront's layers holding
    # W_hh (the tests that catch it: its wave_held_* and wave_* cases and
    # TensorCoresHeldWavefront.*, tests/test_tensor_cores_gpu.cpp).
    ("gpu", "forward 24 multiplies the layer below's h_t by the held W_hh too, not by W_ih",
     "stages/forward/24_wavefront_with_weights_in_registers/kernel.cuh",
     "if (held && (last || !kAfterInput)) {", "if (held) {", "gpu"),
    ("gpu", "forward 24 holds the first chunk's tiles (W_ih's) instead of the last chunk's",
     "stages/forward/24_wavefront_with_weights_in_registers/kernel.cuh",
     "((last_tile + last_first + i) * row_tiles", "((last_first + i) * row_tiles", "gpu"),
    ("gpu", "forward 24 copies none of W_ih's fragments into shared memory where W_hh is held",
     "stages/forward/24_wavefront_with_weights_in_registers/kernel.cuh",
     "const int shared_tiles = held ? last_tile : k_tiles;",
     "const int shared_tiles = held ? 0 : k_tiles;", "gpu"),
    ("cpu", "forward 24's planner counts no shared memory for an upper held layer's W_ih",
     "stages/forward/24_wavefront_with_weights_in_registers/plan.cpp",
     "? mma_rows * (p.chunks - 1) * p.chunk_rows", "? 0 * (p.chunks - 1) * p.chunk_rows", "gpu",
     "forward_24_wavefront_with_weights_in_registers.TensorCoresHeld"),
    ("cpu", "forward 24's planner shares a held wavefront's blocks by k range, not equally",
     "stages/forward/24_wavefront_with_weights_in_registers/plan.cpp",
     "hold ? device.sm_count / g / count",
     "hold ? device.sm_count / g * (s.hidden + plan.input_rows) / total_k", "gpu",
     "forward_24_wavefront_with_weights_in_registers.TensorCoresHeld"),
    # ---- forward 27_two_accumulator_chains, two accumulator sets a warp (its GPU cases, the
    # tensor-core suite's, tests/test_tensor_cores_gpu.cpp, catch them).
    ("gpu", "forward 27 never adds the odd k tiles' accumulators",
     "stages/forward/27_two_accumulator_chains/kernel.cuh",
     "            acc[n][j] += acc_odd[n][j];", "            acc[n][j] += 0.0f * acc_odd[n][j];",
     "gpu"),
    ("gpu", "forward 27 adds the odd k tiles' accumulators twice",
     "stages/forward/27_two_accumulator_chains/kernel.cuh",
     "            acc[n][j] += acc_odd[n][j];", "            acc[n][j] += 2.0f * acc_odd[n][j];",
     "gpu"),
    ("cpu", "forward 23's planner holds W in a launch of several layers",
     "stages/forward/23_weights_in_registers/plan.cpp",
     "              lay_out(plan, s, device, false);", "              lay_out(plan, s, device, true);",
     "gpu"),
    # ---- issue 24: training 41_forward_weights_in_registers, forward 23's held W in training
    # (the tests that catch it: its fwd_held_* and chunk cases and TheForwardTakesFourKSlices...).
    ("gpu", "training 41 loads every warp the first k slice's tiles instead of its own",
     "stages/training/41_forward_weights_in_registers/kernel.cuh",
     "((last_first + i) * row_tiles + row_tile) * kWarpSize + lane;",
     "(i * row_tiles + row_tile) * kWarpSize + lane;", "gpu"),
    ("gpu", "training 41's planner holds W where a step stages h in several chunks",
     "stages/training/41_forward_weights_in_registers/plan.cpp",
     "plan.threads <= kHeldThreads && plan.chunks == 1 &&", "plan.threads <= kHeldThreads &&",
     "gpu"),
    ("cpu", "training 41's planner rounds a warp's share of 17 to 32 k tiles down to 16",
     "stages/training/41_forward_weights_in_registers/plan.cpp",
     "share <= 16 ? 16 : kHeldTiles;", "share <= 32 ? 16 : kHeldTiles;", "gpu"),
    ("cpu", "training 41's planner takes its cheapest held plan over stage 38's plan held",
     "stages/training/41_forward_weights_in_registers/plan.cpp",
     "return kept.held_tiles > 0 ? kept : best;", "return best;", "gpu"),
    ("cpu", "training 41's planner holds W in a launch of several layers",
     "stages/training/41_forward_weights_in_registers/plan.cpp",
     "              lay_out(plan, s, device, false);", "              lay_out(plan, s, device, true);",
     "gpu"),
    ("cpu", "training 41's planner splits the layers by the costs of held plans",
     "stages/training/41_forward_weights_in_registers/plan.cpp",
     "make_forward_plan(s, device, request, false);  // stage 28's",
     "make_forward_plan(s, device, request);  // stage 28's", "gpu"),
    # ---- issue 24: training 43_gradients_trailing_the_recurrence, each chunk's gradients as
    # soon as the recurrence is past it (the tests that catch it: every case of several chunks).
    ("gpu", "training 43 waits for the first chunk only before every chunk's gradients",
     "stages/training/43_gradients_trailing_the_recurrence/stage.cu",
     "wait_for_chunk<<<1, 1, 0, side>>>(chunk_done_.data() + l * chunks + c,",
     "wait_for_chunk<<<1, 1, 0, side>>>(chunk_done_.data() + l * chunks,", "gpu"),
    ("gpu", "training 43 writes the weight gradients of each chunk over the last (beta 0)",
     "stages/training/43_gradients_trailing_the_recurrence/stage.cu",
     "const float beta = c == 0 ? 0.0f : 1.0f;", "const float beta = 0.0f;", "gpu"),
    ("gpu", "training 43's backward_persistent counts a block past H as minus its pairs",
     "stages/training/43_gradients_trailing_the_recurrence/backward_kernel.cuh",
     "count_chunk_done(a, t, max(0, min(J, H - first_unit)) * rows);",
     "count_chunk_done(a, t, min(J, H - first_unit) * rows);", "gpu"),
    ("cpu", "training 43's planner trails the gradients beside a recurrence on 128 of 132 SMs",
     "stages/training/43_gradients_trailing_the_recurrence/plan.cpp",
     "const bool room = backward.blocks() <= sm_count - sm_count / 4;",
     "const bool room = backward.blocks() <= sm_count;", "gpu"),
    ("gpu", "training 43's kernels count a chunk done at its first step instead of its last",
     "stages/training/43_gradients_trailing_the_recurrence/backward_kernel.cuh",
     "(t > 0 && (step + 1) % a.chunk_steps != 0)", "(t > 0 && step % a.chunk_steps != 0)", "gpu"),
    # ---- issue 24: training 45_cell_update_a_thread_a_gate, the forward's cell update a thread a
    # gate at a small batch (the tests that catch it: the by_gate_* cases, B1, the planner's test).
    ("gpu", "training 45's pair lanes all take the input gate's value for every gate",
     "stages/training/45_cell_update_a_thread_a_gate/kernel.cuh",
     "gate[q] = __shfl_sync(kFullMask, activated, q, kGates);",
     "gate[q] = __shfl_sync(kFullMask, activated, 0, kGates);", "gpu"),
    ("gpu", "training 45 keeps the pre-activation sums in the stash instead of the activated gates",
     "stages/training/45_cell_update_a_thread_a_gate/kernel.cuh",
     "          sums_s[(g_pj * kGates + g_q) * Bn + g_pb] = activated;\n", "", "gpu"),
    ("gpu", "training 45 publishes no zeros for the padding columns (the readers wait for them)",
     "stages/training/45_cell_update_a_thread_a_gate/kernel.cuh",
     "i < J * (Bp - rows); i += threads) {  // padding: zeros",
     "i < 0; i += threads) {  // padding: zeros", "gpu"),
    ("cpu", "training 45's planner updates a gate a thread where a block has more gates than threads",
     "stages/training/45_cell_update_a_thread_a_gate/plan.cpp",
     "J * plan.group_batch * kGates <= plan.threads;", "J * plan.group_batch <= plan.threads;",
     "gpu", r"training_45_cell_update_a_thread_a_gate\.TrainingTensorCoresByGate"),
    # ---- issue 24: training 51_two_accumulator_chains, two accumulator sets a warp in the
    # forward where W is held (the tensor-core training suite's held cases catch them).
    ("gpu", "training 51 never adds the odd k tiles' accumulators",
     "stages/training/51_two_accumulator_chains/kernel.cuh",
     "            acc[n][j] += acc_odd[n][j];", "            acc[n][j] += 0.0f * acc_odd[n][j];", "gpu"),
    ("gpu", "training 51 adds the odd k tiles' accumulators twice",
     "stages/training/51_two_accumulator_chains/kernel.cuh",
     "            acc[n][j] += acc_odd[n][j];", "            acc[n][j] += 2.0f * acc_odd[n][j];", "gpu"),
    # ---- issue 24: training 52_large_weight_gradients_in_one_chunk, its rule of chunks (the CPU
    # cases of its GPU test binary catch them; the one_chunk_* cases on the GPU too).
    ("cpu", "training 52's rule takes chunks of exactly 1 024 columns for narrow ones",
     "stages/training/52_large_weight_gradients_in_one_chunk/plan.cpp",
     "steps * s.batch < kNarrowChunkColumns;", "steps * s.batch <= kNarrowChunkColumns;", "gpu",
     r"training_52_large_weight_gradients_in_one_chunk\.TrainingTensorCoresTrailing"),
    ("cpu", "training 52's rule takes a dW of 2 MiB for a large one",
     "stages/training/52_large_weight_gradients_in_one_chunk/plan.cpp",
     "dw_hh_bytes >= kOneChunkWeightBytes &&", "dw_hh_bytes >= kOneChunkWeightBytes / 8 &&",
     "gpu",
     r"training_52_large_weight_gradients_in_one_chunk\.TrainingTensorCoresTrailing"),
    ("cpu", "training 52 trails the gradients in chunks wherever there is room, as stage 51",
     "stages/training/52_large_weight_gradients_in_one_chunk/plan.cpp",
     "  const bool rewrites =\n", "  const bool rewrites = false &&\n", "gpu",
     r"training_52_large_weight_gradients_in_one_chunk\.TrainingTensorCoresTrailing"),
    # ---- issue 23: training 25_graphs_of_a_pass, the pass as two CUDA graphs
    # (the test that catches it: gpu_tests' AllStages/StageReadsTheTensorsOfEachPass).
    ("gpu", "training 25 records its forward graph once, never again for other tensors",
     "stages/training/25_graphs_of_a_pass/stage.cu",
     "    if (!same_tensors(t, forward_graph_.tensors))\n",
     "    if (!forward_graph_.exec)\n", "gpu", "training_25_graphs_of_a_pass"),
    # (same_tensors is the harness's, which every stage with a graph calls: one mutation, the
    # tests of the FP32 and the 16-bit stage that record their pass as graphs)
    ("gpu", "training 25 and 27 take tensors of the same size for the same tensors",
     "common/harness/device_tensors.cpp",
     "  return a.size == b.size && a.x == b.x && a.h0 == b.h0",
     "  if (a.size == b.size) return true;\n  return a.x == b.x && a.h0 == b.h0", "gpu",
     "training_(25_graphs_of_a_pass|27_graphs_of_a_16_bit_pass)"),
    ("gpu", "training stage 00 drops the forget gate from dc_{t-1}",
     "stages/training/00_naive/stage.cu", "  dc_rec[index] = dc[index] * forget_gate[index];",
     "  dc_rec[index] = dc[index];", "gpu", "training_00_naive"),
    ("gpu", "training stage 00 accumulates dW_hh without zeroing it first",
     "stages/training/00_naive/stage.cu",
     "      CUDA_CHECK(cudaMemsetAsync(t.grad_w_hh[layer], 0, four_h * H * sizeof(float), stream));\n",
     "", "gpu", "training_00_naive"),
    ("gpu", "training stage 01 takes dW_hh against h_t instead of h_{t-1}",
     "stages/training/01_combined_gemms/stage.cu",
     "kept.hidden.data(), H, dz_.data(), four_h, &zero,",
     "kept.hidden.data() + state, H, dz_.data(), four_h, &zero,", "gpu", "training_01_combined_gemms"),
    ("gpu", "training stage 01 sums the bias gradient over all steps but the last",
     "stages/training/01_combined_gemms/stage.cu",
     "cublasSgemv(cublas_, CUBLAS_OP_N, four_h, columns, &one,",
     "cublasSgemv(cublas_, CUBLAS_OP_N, four_h, columns - B, &one,", "gpu", "training_01_combined_gemms"),
    ("gpu", "training stage 02 never joins the gradient stream back into the caller's stream",
     "stages/training/02_streams/stage.cu",
     "    CUDA_CHECK(cudaStreamWaitEvent(stream, weights_done_[0], 0));\n", "", "gpu",
     "training_02_streams"),
    ("gpu", "training stage 02 starts the weight gradients before dz is complete",
     "stages/training/02_streams/stage.cu",
     "      CUDA_CHECK(cudaStreamWaitEvent(gradient_stream_, dz_ready_[turn], 0));\n", "", "gpu",
     "training_02_streams"),
    ("gpu", "training stage 03's fused backward drops the gradient from step t+1",
     "stages/training/03_fused_pointwise/stage.cu",
     "const float dh = d_above[index] + dh_rec[index];", "const float dh = d_above[index];", "gpu",
     "training_03_fused_pointwise"),
    ("gpu", "training stage 03's fused forward stashes the gates before their activation",
     "stages/training/03_fused_pointwise/stage.cu",
     "    row[q * hidden] = activated[q];\n", "", "gpu", "training_03_fused_pointwise"),
    ("gpu", "training stage 04's backward replays the forward graph",
     "stages/training/04_cuda_graph/stage.cu",
     "CUDA_CHECK(cudaGraphLaunch(backward_graph_.exec, stream));",
     "CUDA_CHECK(cudaGraphLaunch(forward_graph_.exec, stream));", "gpu", "training_04_cuda_graph"),
    ("gpu", "training stage 05 writes every chunk's input gradient over the first chunk's",
     "stages/training/05_layer_wavefront/stage.cu",
     "&zero, d_input + static_cast<std::size_t>(first) * B * input_size, input_size));",
     "&zero, d_input, input_size));", "gpu", "training_05_layer_wavefront"),
    ("gpu", "training stage 05 never joins the layers' input streams back into the caller's stream",
     "stages/training/05_layer_wavefront/stage.cu",
     "      CUDA_CHECK(cudaStreamWaitEvent(stream, layer.input_finished, 0));\n", "", "gpu",
     "training_05_layer_wavefront"),
    ("gpu", "training stage 06's backward reads dz_{t+1} without waiting for it to be published",
     "stages/training/06_persistent/backward_kernel.cuh",
     "        wait_published(staged, dz_row, count, base, stride);\n", "", "gpu"),
    ("gpu", "training stage 06 launches the backward with one block too few: its units' dz never comes",
     "stages/training/06_persistent/stage.cu",
     "launch_cooperative(kBackwardKernel, &args, plan.blocks(),",
     "launch_cooperative(kBackwardKernel, &args, plan.blocks() - 1,", "gpu"),
    ("gpu", "training stage 06's backward drops the forget gate from dc_{t-1}",
     "stages/training/06_persistent/backward_kernel.cuh", "dc_s[p] = dc * f;", "dc_s[p] = dc;", "gpu"),
    ("gpu", "training stage 06's backward adds only the first k slice's partial sums",
     "stages/training/06_persistent/backward_kernel.cuh", "for (int s = 0; s < S; ++s)\n      sum +=",
     "for (int s = 0; s < 1; ++s)\n      sum +=", "gpu"),
    ("gpu", "training stage 06's forward (both kernels) drops the forget gate from the stash",
     "stages/training/06_persistent/primitives.cuh",
     "gates[0] = i_gate, gates[H] = f_gate, gates[2 * H] = g_gate,",
     "gates[0] = i_gate, gates[2 * H] = g_gate,", "gpu"),
    ("gpu", "training stage 06's forward (both kernels) keeps c_t in the slot of c_{t-1}",
     "stages/training/06_persistent/primitives.cuh", "a.cell[(t + 1) * state + out] = c;",
     "a.cell[t * state + out] = c;", "gpu"),
    ("gpu", "training stage 06's forward (both kernels) keeps h_t in the slot of h_{t-1}",
     "stages/training/06_persistent/primitives.cuh", "a.h_seq[(t + 1) * state + out] = h;",
     "a.h_seq[t * state + out] = h;", "gpu"),
    ("gpu", "training stage 06 fills the forward's exchange buffer with zeros, not the sentinel",
     "stages/training/06_persistent/stage.cu", "cudaMemsetAsync(exchange_.data() + slot, 0xFF,",
     "cudaMemsetAsync(exchange_.data() + slot, 0x00,", "gpu"),
    ("gpu", "training stage 06's forward (register kernel) skips the butterfly across lanes",
     "stages/training/06_persistent/kernel_registers.cuh",
     "    sum_over_k_lanes(acc, lane, lanes_k);\n", "", "gpu"),
    ("gpu", "training stage 06's forward (register kernel) adds only the first k slice's partial sums",
     "stages/training/06_persistent/kernel_registers.cuh", "for (int s = 0; s < slices; ++s) {",
     "for (int s = 0; s < 1; ++s) {", "gpu"),
    ("gpu", "training stage 06's forward (register kernel) never adds the input parts it computes",
     "stages/training/06_persistent/kernel_registers.cuh", "if (own_inputs) add_input_part(t);",
     "if (false) add_input_part(t);", "gpu"),
    ("gpu", "training stage 06's forward (shared-memory kernel) adds only the first k slice's partial sums",
     "stages/training/06_persistent/kernel.cuh", "for (int s = 0; s < a.k_slices; ++s) {",
     "for (int s = 0; s < 1; ++s) {", "gpu"),
    ("gpu", "training stage 06's forward (shared-memory kernel) keeps every batch group's stash in the first group's rows",
     "stages/training/06_persistent/kernel.cuh", "published, a, t, first_row + pb, unit);",
     "published, a, t, a.batch_begin + pb, unit);", "gpu"),
    # ---- training stage 07 (dz staged in shared memory in double-buffered chunks)
    ("gpu", "training stage 07 loads every chunk of dz from the first chunk's gate rows",
     "stages/training/07_staged_dz/backward_kernel.cuh",
     "staged[r] = load_relaxed(dz_row + chunk * C4 + i);",
     "staged[r] = load_relaxed(dz_row + i);", "gpu"),
    ("gpu", "training stage 07 takes the last chunk of dz as long as the others",
     "stages/training/07_staged_dz/backward_kernel.cuh",
     "last4 = H - (a.chunks - 1) * C4;", "last4 = C4;", "gpu"),
    ("cpu", "training stage 07's planner gives a thread more of a chunk of dz than it carries",
     "stages/training/07_staged_dz/plan.cpp",
     "if (quads <= carried && b.shared_bytes <= device.shared_bytes) break;",
     "if (b.shared_bytes <= device.shared_bytes) break;", "cpu"),
    # ---- training stage 10 (the forward on tensor cores, 16-bit GEMM operands)
    ("gpu", "training stage 10's forward keeps h_t in the stash's slot t, not t + 1",
     "stages/training/10_tensor_cores/primitives.cuh",
     "a.h_seq[(t + 1) * state + out] = h;", "a.h_seq[t * state + out] = h;", "gpu"),
    ("gpu", "training stage 10's forward keeps every batch group's stash in the first group's rows",
     "stages/training/10_tensor_cores/kernel.cuh", "published, a, t, first_row + pb, unit);",
     "published, a, t, a.batch_begin + pb, unit);", "gpu"),
    ("gpu", "training stage 10's dW_hh multiplies dz_t with h_t instead of h_{t-1}",
     "stages/training/10_tensor_cores/stage.cu",
     "round_to_16_bits(kept.hidden.data(), operand_16_.data(),",
     "round_to_16_bits(kept.hidden.data() + state, operand_16_.data(),", "gpu"),
    ("gpu", "training stage 10 keeps the weights it prepared first when a pass brings other tensors",
     "stages/training/10_tensor_cores/stage.cu",
     "    if (t.w_ih != prepared_w_ih_ || t.w_hh != prepared_w_hh_) prepare_weights(t, stream);\n",
     "", "gpu"),
    # ---- training stage 08 (the backward's product register-tiled over the batch rows)
    ("gpu", "training stage 08 skips a block's last row tile where it is short",
     "stages/training/08_tiled_backward_product/backward_kernel.cuh",
     "if (warp >= items || tile_row >= rows) continue;",
     "if (warp >= items || tile_row + TR > rows) continue;", "gpu"),
    ("gpu", "training stage 08 multiplies every row of a tile with the dz of the tile's first row",
     "stages/training/08_tiled_backward_product/backward_kernel.cuh",
     "buffer[(tile_row + r) * C4 + i]", "buffer[tile_row * C4 + i]", "gpu"),
    # ---- training stage 12 (the backward's product W_hhᵀ · dz on tensor cores, dz in 16 bits)
    ("gpu", "training stage 12 arranges W_hh's rows, not its columns, as the backward's fragments (no transpose)",
     "stages/training/12_tensor_core_backward/backward_kernel.cuh",
     "real && k < gate_rows ? w_hh[static_cast<std::size_t>(k) * H + unit] : 0.0f,",
     "real && k < gate_rows ? w_hh[static_cast<std::size_t>(unit) * H + k] : 0.0f,", "gpu"),
    ("gpu", "training stage 12 reads gate rows 8-15 of each B fragment of dz from rows 0-7",
     "stages/training/12_tensor_core_backward/backward_kernel.cuh",
     "dz_fragment[0], dz_fragment[4]);", "dz_fragment[0], dz_fragment[0]);", "gpu"),
    ("gpu", "training stage 12 adds only the first k slice's partial sums of W_hhᵀ · dz",
     "stages/training/12_tensor_core_backward/backward_kernel.cuh",
     "for (int s = 0; s < S; ++s)\n      sum += sums_s[", "for (int s = 0; s < 1; ++s)\n      sum += sums_s[",
     "gpu"),
    # ---- training stage 14 (a backward block of two row tiles of W_hhᵀ)
    ("gpu", "training stage 14 multiplies the second row tile's dz with the first tile's fragments",
     "stages/training/14_fewer_dz_readers/backward_kernel.cuh",
     "mma_16x8x16<Element>(acc[1], w_fragment[tile_stride], b0, b1);",
     "mma_16x8x16<Element>(acc[1], w_fragment[0], b0, b1);", "gpu"),
    ("gpu", "training stage 14 arranges both row tiles' fragments from the first tile's units",
     "stages/training/14_fewer_dz_readers/backward_kernel.cuh",
     "const int row = row_tile * kMmaRows + fragment_lane / 4 + 8 * (r & 1);",
     "const int row = fragment_lane / 4 + 8 * (r & 1);", "gpu"),
    ("gpu", "training stage 14 writes the second row tile's partial sums over the first's",
     "stages/training/14_fewer_dz_readers/backward_kernel.cuh",
     "float* out = sums_s + (k_slice * MR + rt * kMmaRows + group_id) * Bn +",
     "float* out = sums_s + (k_slice * MR + group_id) * Bn +", "gpu"),
    # ---- training stage 15 (stage 05's GEMMs with 16-bit operands and FP32 sums)
    ("gpu", "training stage 15 overwrites the input product with the recurrent one (beta = 0)",
     "stages/training/15_tensor_core_gemms/stage.cu",
     "kept.w_hh_16.data(), H, h_prev, H, 1.0f, gates, four_h);",
     "kept.w_hh_16.data(), H, h_prev, H, 0.0f, gates, four_h);", "gpu"),
    ("gpu", "training stage 15 writes only the first gate of dz in 16 bits",
     "stages/training/15_tensor_core_gemms/stage.cu",
     "    dz_16[offset + q * hidden] = to_16_bits<Element>(gate_grad[q]);",
     "    if (q == 0) dz_16[offset + q * hidden] = to_16_bits<Element>(gate_grad[q]);", "gpu"),
    ("gpu", "training stage 15 hands BF16 operands to cuBLAS as FP16",
     "stages/training/15_tensor_core_gemms/stage.cu",
     "return precision() == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;", "return CUDA_R_16F;",
     "gpu"),
    ("gpu", "training stage 15 never rounds h0 into the first 16-bit h slot",
     "stages/training/15_tensor_core_gemms/stage.cu",
     "      round_16(t.h0 + layer_state, kept.hidden_16.data(), state, stream);\n", "", "gpu"),
    # ---- forward stage 20 (stage 06's GEMMs with 16-bit operands and FP32 sums)
    ("gpu", "forward stage 20 overwrites the input product with the recurrent one (beta = 0)",
     "stages/forward/20_tensor_core_gemms/stage.cu", "four_h, h_prev, H, 1.0f,",
     "four_h, h_prev, H, 0.0f,", "gpu"),
    ("gpu", "forward stage 20 never rounds x into its 16-bit copy",
     "stages/forward/20_tensor_core_gemms/stage.cu",
     "    round_16(t.x, x_16_.data(), x_16_.size(), stream);\n", "", "gpu"),
    ("gpu", "forward stage 20 rounds layer 0's h0 into every layer's first 16-bit h slot",
     "stages/forward/20_tensor_core_gemms/stage.cu",
     "round_16(t.h0 + l * state, layers_[l].hidden_16.data(), state, stream);",
     "round_16(t.h0, layers_[l].hidden_16.data(), state, stream);", "gpu"),
    ("gpu", "forward stage 20 hands BF16 operands to cuBLAS as FP16",
     "stages/forward/20_tensor_core_gemms/stage.cu",
     "precision() == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;", "CUDA_R_16F;", "gpu"),
    # ---- training stage 16 (the cell's backward prepared a step ahead)
    ("gpu", "training stage 16 drops tanh'(c) from the factor of dc by dh",
     "stages/training/16_cell_factors_ahead/backward_kernel.cuh",
     "kept[4] = o * (1.0f - tanh_c * tanh_c);", "kept[4] = o;", "gpu"),
    ("gpu", "training stage 16 fetches the stash one step ahead instead of two",
     "stages/training/16_cell_factors_ahead/backward_kernel.cuh",
     "if (t >= 2) fetch_stash(t - 2);", "if (t >= 2) fetch_stash(t - 1);", "gpu"),
    ("gpu", "training stage 16 keeps the stash of both steps in one slot",
     "stages/training/16_cell_factors_ahead/backward_kernel.cuh",
     "return stash_s + ((t & 1) * pairs + p) * kStashFloats;", "return stash_s + p * kStashFloats;",
     "gpu"),
    # ---- training stage 17 (dz read straight from L2 into the lanes that multiply it)
    ("gpu", "training stage 17 gives every k slice the first slice's float4 of dz",
     "stages/training/17_dz_straight_to_the_lanes/backward_kernel.cuh",
     "const int first = lanes_k * k_slice + lane_k;", "const int first = lane_k;", "gpu"),
    ("gpu", "training stage 17 multiplies the direct dz by gate row 0's weights only",
     "stages/training/17_dz_straight_to_the_lanes/backward_kernel.cuh",
     "const float4 w = w_s[(4 * v + e) * H + i];", "const float4 w = w_s[(4 * v) * H + i];", "gpu"),
    ("gpu", "training stage 17 multiplies dz it loaded without waiting for it to be published",
     "stages/training/17_dz_straight_to_the_lanes/backward_kernel.cuh",
     "      wait_published(mine, row, H, first, stride);\n", "", "gpu"),
    # ---- training stage 18 (layer 0's four products after the recurrence side by side)
    ("gpu", "training stage 18 starts the weight gradients without waiting for dz",
     "stages/training/18_tail_side_by_side/stage.cu",
     "      for (cudaStream_t side : weights_streams_)\n        CUDA_CHECK(cudaStreamWaitEvent(side, dz_ready_));\n",
     "", "gpu"),
    ("gpu", "training stage 18 never joins the bias gradient's stream",
     "stages/training/18_tail_side_by_side/stage.cu",
     "for (int i = 1; i < kTailStreams; ++i) {", "for (int i = 1; i < kTailStreams - 1; ++i) {",
     "gpu"),
    # ---- training stage 20 (stage 18's GEMMs with 16-bit operands and FP32 sums)
    ("gpu", "training stage 20 rounds only the first step of dz into its 16-bit copy",
     "stages/training/20_persistent_with_16_bit_gemms/stage.cu",
     "round_16(dz, dz_16, s.seq_len * kGates * state, stream);",
     "round_16(dz, dz_16, kGates * state, stream);", "gpu"),
    ("gpu", "training stage 20 sums dW_hh with h_t instead of h_{t-1}",
     "stages/training/20_persistent_with_16_bit_gemms/stage.cu",
     "kept.hidden_16.data(), H, dz_16, four_h, t.grad_w_hh[l], H);",
     "kept.hidden_16.data() + B * H, H, dz_16, four_h, t.grad_w_hh[l], H);", "gpu"),
    ("gpu", "training stage 20 hands BF16 operands to cuBLAS as FP16",
     "stages/training/20_persistent_with_16_bit_gemms/stage.cu",
     "return precision() == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;", "return CUDA_R_16F;",
     "gpu"),
    # ---- training stage 22 (the forward's k slices: four warps a block, the chain refitted)
    ("cpu", "training stage 22's planner never offers the forward four warps a block",
     "stages/training/22_fewer_forward_k_slices/plan.cpp",
     "threads = {128, 256, 512}", "threads = {256, 512}", "gpu"),
    ("cpu", "training stage 22's forward cost model charges a k tile of the chain 300 clocks again",
     "stages/training/22_fewer_forward_k_slices/plan.cpp",
     "constexpr double kForwardMmaLatency = 150;", "constexpr double kForwardMmaLatency = 300;",
     "gpu"),
    # ---- training stage 23 (the backward's gate rows split over a cluster of two blocks)
    ("gpu", "training stage 23 sends every partial sum to the cluster's first block",
     "stages/training/23_dz_split_over_clusters/backward_kernel.cuh",
     "const int m = i % (C * J), b = i / (C * J), owner = m / J;",
     "const int m = i % (C * J), b = i / (C * J), owner = 0;", "gpu"),
    ("gpu", "training stage 23's second block of a cluster reads the first block's gate rows of dz",
     "stages/training/23_dz_split_over_clusters/backward_kernel.cuh",
     "const int first_k = rank * a.k_rows,", "const int first_k = 0 * a.k_rows,", "gpu"),
    ("gpu", "training stage 23 arranges both blocks' W_hhᵀ for the first block's gate rows",
     "stages/training/23_dz_split_over_clusters/backward_kernel.cuh",
     "const int k = rank * k_rows + k_tile * kMmaK", "const int k = 0 * k_rows + k_tile * kMmaK",
     "gpu"),
    ("cpu", "training stage 23's cost model charges a cluster's exchange nothing",
     "stages/training/23_dz_split_over_clusters/plan.cpp",
     "constexpr double kClusterExchange = 4600;", "constexpr double kClusterExchange = 0;", "gpu"),
    # ---- training stage 24 (the cluster's partial sums by st.async, counted by an mbarrier)
    ("gpu", "training stage 24 stores the partial sums into the buffer its mbarrier does not count",
     "stages/training/24_partial_sums_on_an_mbarrier/backward_kernel.cuh",
     "const unsigned buffer = shared_address(cluster_s + (slot % 2) * C * J * Bn);",
     "const unsigned buffer = shared_address(cluster_s + ((slot + 1) % 2) * C * J * Bn);", "gpu"),
    ("gpu", "training stage 24 waits for the phase of the wrong parity",
     "stages/training/24_partial_sums_on_an_mbarrier/backward_kernel.cuh",
     "mbarrier_wait(bar, ((a.seq_len - 1 - slot) / 2) & 1);",
     "mbarrier_wait(bar, ((a.seq_len - slot) / 2) & 1);", "gpu"),
    ("cpu", "training stage 24's cost model charges the exchange stage 23's cluster barrier",
     "stages/training/24_partial_sums_on_an_mbarrier/plan.cpp",
     "constexpr double kClusterExchange = 3700;", "constexpr double kClusterExchange = 4600;",
     "gpu"),
    # ---- training stage 26 (the forward's input parts stored (4H, T, B), forward 21's lesson)
    ("gpu", "training 26 reads gate q's input part one unit further on instead of q * H rows on",
     "stages/training/26_input_parts_by_gate_row/kernel.cuh", "in + q * H * row_stride);",
     "in + q * row_stride);", "gpu"),
    ("gpu", "training 26 reads the input parts by batch row, stage 24's order, from the new layout",
     "stages/training/26_input_parts_by_gate_row/kernel.cuh",
     "input_t + (first_unit + pj) * row_stride + first_row + pb;",
     "input_t + (first_row + pb) * row_stride + first_unit + pj;", "gpu"),
    # ---- training stage 27 (stage 26's pass as two CUDA graphs; the test that catches it:
    # gpu_tests' AllStages/StageReadsTheTensorsOfEachPass)
    ("gpu", "training 27 records its backward graph once, never again for other tensors",
     "stages/training/27_graphs_of_a_16_bit_pass/stage.cu",
     "    if (!same_tensors(t, backward_graph_.tensors))\n",
     "    if (!backward_graph_.exec)\n", "gpu"),
    # ---- training stage 28 (the forward's stash kept after h_t is published, a unit a thread)
    ("gpu", "training 28 keeps the stash of the block's first batch row only",
     "stages/training/28_stash_after_publishing/kernel.cuh", "for (int i = tid; i < J * rows; i += threads) {",
     "for (int i = tid; i < J; i += threads) {", "gpu"),
    ("gpu", "training 28 keeps h_t in the stash from the input gate instead of the output gate",
     "stages/training/28_stash_after_publishing/primitives.cuh", "  const float h = gate[3] * tanhf(c);",
     "  const float h = gate[0] * tanhf(c);", "gpu"),
    # ---- training stage 29 (the forward's layers in one launch as a wavefront; the tests that
    # catch it: the wave_* cases of TrainingTensorCores)
    ("gpu", "training 29 arranges every layer's fragments without W_ih, as if it had input parts",
     "stages/training/29_layers_in_one_forward_launch/stage.cu",
     "s.hidden, plan.input_rows, plan.units_per_block,", "s.hidden, 0, plan.units_per_block,",
     "gpu"),
    ("gpu", "training 29 copies h0 and c0 into the stash of a launch's first layer only",
     "stages/training/29_layers_in_one_forward_launch/stage.cu",
     "for (int l = first; l < first + parts; ++l) {", "for (int l = first; l < first + 1; ++l) {",
     "gpu"),
    # ---- training stage 30 (256 backward threads at B <= 4; the tests that catch it: the
    # TrainingTensorCores cases of four batch rows or fewer, the first one only where a chunk of
    # dz has more values than 256 threads carry in one register, H520_B1)
    ("gpu", "training 30 strides its staging of dz by 512 threads whatever the launch's count",
     "stages/training/30_fewer_backward_k_slices/backward_kernel.cuh",
     "const int threads = blockDim.x;", "const int threads = kBackwardThreads;", "gpu"),
    ("gpu", "training 30 plans 16 k slices for its 8 warps at small batches",
     "stages/training/30_fewer_backward_k_slices/plan.cpp",
     "b.k_slices = b.threads / kWarpSize / b.batch_tiles;",
     "b.k_slices = kBackwardWarps / b.batch_tiles;", "gpu"),
    # ---- training stage 31 (the backward in one cluster of 16 blocks; the tests that catch it:
    # the TrainingTensorCores cases whose backward runs in one cluster, one_cluster_* among them)
    ("gpu", "training 31 adds the partial sums of half the cluster's blocks, each twice",
     "stages/training/31_backward_in_one_cluster/cluster_backward_kernel.cuh",
     "dh_rec += received[((buffer * kOneCluster + source) * J + j) * Bg + b];",
     "dh_rec += received[((buffer * kOneCluster + source / 2) * J + j) * Bg + b];", "gpu"),
    ("gpu", "training 31 arranges W_hh's rows of the wrong units for a block's gate rows",
     "stages/training/31_backward_in_one_cluster/cluster_backward_kernel.cuh",
     "const int owned = rank * J + kk % J;", "const int owned = rank * J + kk % 4;", "gpu"),
    # ---- training stage 32 (two batch rows' partial sums a store; the same tests as stage 31)
    ("gpu", "training 32 sends the first of a lane's two batch rows twice",
     "stages/training/32_partial_sums_in_pairs/cluster_backward_kernel.cuh",
     "store_async_pair(there, acc[n][2 * half], acc[n][2 * half + 1], bar);",
     "store_async_pair(there, acc[n][2 * half], acc[n][2 * half], bar);", "gpu"),
    ("gpu", "training 32 reads the received sums with the unpadded row count",
     "stages/training/32_partial_sums_in_pairs/cluster_backward_kernel.cuh",
     "dh_rec += received[((buffer * kOneCluster + source) * J + j) * Bp + b];",
     "dh_rec += received[((buffer * kOneCluster + source) * J + j) * Bg + b];", "gpu"),
    # ---- training stage 33 (a batch group's backward over several clusters, sums through L2)
    ("gpu", "training 33 adds its own cluster's sums of a unit but not the other clusters'",
     "stages/training/33_partial_sums_across_clusters/cluster_backward_kernel.cuh",
     "    if (c < span) total += sums[c];", "    if (c == cluster) total += sums[c];", "gpu"),
    ("gpu", "training 33 sends the sums for another cluster's units into its own units' slots",
     "stages/training/33_partial_sums_across_clusters/cluster_backward_kernel.cuh",
     "const int owner_cluster = kSpanned ? owner / kOneCluster : 0;",
     "const int owner_cluster = 0;", "gpu"),
    # ---- training stage 34 (four batch rows' partial sums a store, after a shuffle)
    ("gpu", "training 34 sends its neighbour's two sums in the wrong order",
     "stages/training/34_partial_sums_in_quads/cluster_backward_kernel.cuh",
     "const float v2 = upper ? got0 : acc[n][2], v3 = upper ? got1 : acc[n][3];",
     "const float v2 = upper ? got1 : acc[n][2], v3 = upper ? got0 : acc[n][3];", "gpu"),
    ("gpu", "training 34 lets a lane's last single sum of a short quad land on its first column",
     "stages/training/34_partial_sums_in_quads/cluster_backward_kernel.cuh",
     "store_async(cluster_rank_shared(local + 4u * (count - 1), owner_rank),",
     "store_async(cluster_rank_shared(local, owner_rank),", "gpu"),
    # ---- training stage 35 (up to 16 batch rows a cluster: two mma column tiles)
    ("gpu", "training 35 multiplies the second column tile's A fragments with the first tile's dz",
     "stages/training/35_sixteen_rows_a_cluster/cluster_backward_kernel.cuh",
     "dz_s + (c * kMmaColumns + group_id) * stride + kt * kMmaK / 2 + in_group;",
     "dz_s + group_id * stride + kt * kMmaK / 2 + in_group;", "gpu"),
    ("gpu", "training 35 sends the first column tile's sums for the second tile's rows too",
     "stages/training/35_sixteen_rows_a_cluster/cluster_backward_kernel.cuh",
     "const float* d = acc[n][c];", "const float* d = acc[n][0];", "gpu"),
    # ---- training stage 36 (the backward's mbarrier waits polled by test_wait). Its change is
    # one of speed only, so the mutation breaks the wait itself; a block that runs ahead may
    # leave the mbarrier's phases behind and hang, so only the four same_outputs runs against
    # stage 35 (run it with --test-timeout 60).
    ("gpu", "training 36 waits for the other phase's parity, one that has already completed",
     "stages/training/36_mbarrier_test_wait/primitives.cuh", ': "r"(bar), "r"(parity)',
     ': "r"(bar), "r"(parity ^ 1u)', "gpu", r"same_outputs\.training_36_"),
    # ---- training stage 37 (the bias gradient summed in the backward recurrence): each runs
    # the shapes through the kernel it breaks (planned in clusters of 16, pinned in pairs or
    # alone), the row sum at B = 1, 20 and 4.
    ("gpu", "training 37's cluster kernel keeps only step 0's dz as a pair's bias gradient",
     "stages/training/37_bias_gradient_in_the_recurrence/cluster_backward_kernel.cuh",
     "db[q] += d[q];", "db[q] = d[q];", "gpu",
     r"training_37_[a-z_]+\.Shapes/.*/(span_planned|one_cluster_planned|rows16_planned)"),
    ("gpu", "training 37's backward_persistent keeps only step 0's dz as a pair's bias gradient",
     "stages/training/37_bias_gradient_in_the_recurrence/backward_kernel.cuh",
     "db[n][q] += d[q];", "db[n][q] = d[q];", "gpu",
     r"training_37_[a-z_]+\.Shapes/.*/(bwd_two_row_tiles_planned|bwd_cluster2_B1|fwd_slices_bwd_slices)"),
    ("gpu", "training 37 leaves the last batch row out of the bias gradient",
     "stages/training/37_bias_gradient_in_the_recurrence/stage.cu",
     "for (int b = 0; b < batch; ++b)", "for (int b = 0; b < batch - 1; ++b)", "gpu",
     r"training_37_[a-z_]+\.Shapes/.*/(B1|L4_H_gt_I_B20|span_planned_H1024_B4)_fp16"),
    # ---- training stage 38 (the weight gradients on a second stream, beside the recurrence)
    ("gpu", "training 38 never joins the weight gradients' stream back into the backward's graph",
     "stages/training/38_weight_gradients_beside_the_recurrence/stage.cu",
     "    CUDA_CHECK(cudaStreamWaitEvent(stream, dz_free_[0]));\n  }", "  }", "gpu",
     r"training_38_[a-z_]+\.Shapes/.*/(B1|L4_H_gt_I_B20|wave_L2)_fp16"),
    ("gpu", "training 38's dW_hh reads the other dz buffer (the layer above's, or none)",
     "stages/training/38_weight_gradients_beside_the_recurrence/stage.cu",
     "operand_16_.data(), type_16, H, dz16,", "operand_16_.data(), type_16, H, dz_16_[(l + 1) % 2].data(),",
     "gpu", r"training_38_[a-z_]+\.Shapes/.*/(B1|L4_H_gt_I_B20|wave_L2)_fp16"),
    # ---- training stage 40 (stage 38 or 15, by the shape): its rule (CPU tests in its GPU test
    # binary) and its delegation.
    ("cpu", "training 40's rule sends a step of exactly the threshold's work to stage 38",
     "stages/training/40_algorithm_by_shape/algorithm.h", ">= kGemmsFromMacs ?", "> kGemmsFromMacs ?",
     "gpu", r"training_40_algorithm_by_shape\.AlgorithmByShapeRule"),
    ("cpu", "training 40's rule leaves the layers out of a step's work",
     "stages/training/40_algorithm_by_shape/algorithm.h", "* s.batch * s.layers;", "* s.batch;",
     "gpu", r"training_40_algorithm_by_shape\.AlgorithmByShapeRule"),
    ("gpu", "training 40 makes stage 38 in FP16 for its BF16 stage",
     "stages/training/40_algorithm_by_shape/stage.cu",
     "(bf16 ? persistent::make_bf16() : persistent::make())", "persistent::make()", "gpu",
     r"training_40_algorithm_by_shape\.AlgorithmByShapeDelegation"),
    ("gpu", "training 40 runs stage 38 wherever the shape asks for it, also where it does not fit",
     "stages/training/40_algorithm_by_shape/stage.cu", "    if (by_shape == Algorithm::kPersistent &&",
     "    if (false && by_shape == Algorithm::kPersistent &&", "gpu",
     r"training_40_algorithm_by_shape\.AlgorithmByShapeLimits"),
    # ---- training stage 44 (stage 40 with stage 20's FP32 recurrences for one batch row): its
    # rule (CPU tests in its GPU test binary) and its delegation.
    ("cpu", "training 44's rule sends no batch of one row to stage 20",
     "stages/training/44_fp32_recurrences_at_batch_one/algorithm.h",
     "kFp32RecurrencesUpToRows = 1;", "kFp32RecurrencesUpToRows = 0;",
     "gpu", r"training_44_fp32_recurrences_at_batch_one\.AlgorithmByShapeRule"),
    ("cpu", "training 44's rule sends two batch rows to stage 20 too",
     "stages/training/44_fp32_recurrences_at_batch_one/algorithm.h",
     "kFp32RecurrencesUpToRows = 1;", "kFp32RecurrencesUpToRows = 2;",
     "gpu", r"training_44_fp32_recurrences_at_batch_one\.AlgorithmByShapeRule"),
    ("cpu", "training 44's rule never sends a step to the GEMMs",
     "stages/training/44_fp32_recurrences_at_batch_one/algorithm.h",
     "  if (wavefront_step_macs(s) >= kGemmsFromMacs) return Algorithm::kGemms;\n  const bool",
     "  const bool", "gpu", r"training_44_fp32_recurrences_at_batch_one\.AlgorithmByShapeRule"),
    ("cpu", "training 44's rule sends several layers of one row to stage 20",
     "stages/training/44_fp32_recurrences_at_batch_one/algorithm.h",
     "kFp32RecurrencesUpToLayers = 1;", "kFp32RecurrencesUpToLayers = 4;",
     "gpu", r"training_44_fp32_recurrences_at_batch_one\.AlgorithmByShapeRule"),
    ("cpu", "training 44's rule sends one row of H = 256 to stage 20",
     "stages/training/44_fp32_recurrences_at_batch_one/algorithm.h",
     "kFp32RecurrencesFromHidden = 384;", "kFp32RecurrencesFromHidden = 256;",
     "gpu", r"training_44_fp32_recurrences_at_batch_one\.AlgorithmByShapeRule"),
    ("gpu", "training 44 makes stage 20 in FP16 for its BF16 stage",
     "stages/training/44_fp32_recurrences_at_batch_one/stage.cu",
     "(bf16 ? fp32_recurrences::make_bf16() : fp32_recurrences::make())",
     "fp32_recurrences::make()", "gpu",
     r"training_44_fp32_recurrences_at_batch_one\.AlgorithmByShapeDelegation"),
    ("gpu", "training 44 runs stage 20 wherever the shape asks for it, also where it does not fit",
     "stages/training/44_fp32_recurrences_at_batch_one/stage.cu",
     "    if (chosen == Algorithm::kFp32Recurrences &&",
     "    if (false && chosen == Algorithm::kFp32Recurrences &&", "gpu",
     r"training_44_fp32_recurrences_at_batch_one\.AlgorithmByShapeLimits"),
    # ---- training stage 46 (FP32: stage 25, 13, 05 or 04, by the shape): its rule (CPU tests in
    # its GPU test binary) and its delegation.
    ("cpu", "training 46's rule keeps a layer's step of exactly the GEMMs' threshold persistent",
     "stages/training/46_fp32_algorithm_by_shape/algorithm.h", ">= kGemmsFromMacs)", "> kGemmsFromMacs)",
     "gpu", r"training_46_fp32_algorithm_by_shape\.Fp32AlgorithmByShapeRule"),
    ("cpu", "training 46's rule sends one layer of 64 rows to the wavefront",
     "stages/training/46_fp32_algorithm_by_shape/algorithm.h", "s.layers > 1 &&", "s.layers >= 1 &&",
     "gpu", r"training_46_fp32_algorithm_by_shape\.Fp32AlgorithmByShapeRule"),
    ("cpu", "training 46's rule sends 32 rows over several layers to the wavefront",
     "stages/training/46_fp32_algorithm_by_shape/algorithm.h", "kWavefrontFromRows = 64;", "kWavefrontFromRows = 32;",
     "gpu", r"training_46_fp32_algorithm_by_shape\.Fp32AlgorithmByShapeRule"),
    ("cpu", "training 46's rule sends a step of 1.7e7 multiply-adds to stage 25",
     "stages/training/46_fp32_algorithm_by_shape/algorithm.h", ">= kPartialSumsFromMacs ?", ">= 2 * kPartialSumsFromMacs ?",
     "gpu", r"training_46_fp32_algorithm_by_shape\.Fp32AlgorithmByShapeRule"),
    ("gpu", "training 46 makes stage 25 for stage 13",
     "stages/training/46_fp32_algorithm_by_shape/stage.cu", ": algorithm == Algorithm::kPartialSums ? partial_sums::make()",
     ": algorithm == Algorithm::kPartialSums ? persistent::make()", "gpu",
     r"training_46_fp32_algorithm_by_shape\.Fp32AlgorithmByShapeDelegation"),
    ("gpu", "training 46 runs stage 13 wherever the rule falls back to it, also where it does not fit",
     "stages/training/46_fp32_algorithm_by_shape/stage.cu", "    if (chosen == Algorithm::kPartialSums &&",
     "    if (false && chosen == Algorithm::kPartialSums &&", "gpu",
     r"training_46_fp32_algorithm_by_shape\.Fp32AlgorithmByShapeLimits"),
    # ---- training stage 49 (FP32: the backward's stash work while the loads of dz fly): a pinned
    # plan of each kernel (dz read straight into the lanes at H = 512, B = 1; dz staged) and the
    # same_outputs against stage 25 (T = 2 to 100, one to four layers).
    ("gpu", "training 49 copies the stash of the step after the one it should",
     "stages/training/49_stash_while_dz_arrives/backward_kernel.cuh",
     "    if (u >= 2) fetch_stash(u - 2);", "    if (u >= 2) fetch_stash(u - 1);", "gpu",
     r"same_outputs\.training_49_|training_49_[a-z_]+\.Plans/Pinned\..*/(fwd_auto_h512_b1|chunks_b4_groups2_slices)"),
    ("gpu", "training 49 computes the factors of the step the cell has just used",
     "stages/training/49_stash_while_dz_arrives/backward_kernel.cuh",
     "      prepare_factors(u - 1);", "      prepare_factors(u);", "gpu",
     r"same_outputs\.training_49_|training_49_[a-z_]+\.Plans/Pinned\..*/(fwd_auto_h512_b1|chunks_b4_groups2_slices)"),
    # ---- training stage 09 (the small-batch backward keeps W_hh's columns in registers)
    ("gpu", "training stage 09 loads the four gate rows of a row quad's weights from its first row",
     "stages/training/09_backward_registers/backward_registers.cuh",
     "__ldg(a.w_hh + static_cast<std::size_t>(4 * i + e) * H + unit)",
     "__ldg(a.w_hh + static_cast<std::size_t>(4 * i) * H + unit)", "gpu"),
    ("gpu", "training stage 09 leaves the last warp's sums out of dh_rec",
     "stages/training/09_backward_registers/backward_registers.cuh",
     "for (int s = 0; s < kWarps; ++s)", "for (int s = 0; s < kWarps - 1; ++s)", "gpu"),
    ("gpu", "training stage 09 multiplies every batch row's weights with the first row's dz",
     "stages/training/09_backward_registers/backward_registers.cuh",
     "const float4 value = dz_s[b * H + i];", "const float4 value = dz_s[i];", "gpu"),
    ("cpu", "training stage 09's planner gives the register backward more row quads than it has",
     "stages/training/09_backward_registers/plan.cpp",
     "} else if (b.row_quads > kMaxBackwardRowQuads) {", "} else if (false) {", "cpu"),
    # ---- training stage 11 (the weight gradients on their own stream, beside the next layer)
    ("gpu", "training stage 11 starts a layer's weight gradients without waiting for its dz",
     "stages/training/11_weight_gradients_beside/stage.cu",
     "CUDA_CHECK(cudaStreamWaitEvent(weights_stream_, dz_ready_));", "", "gpu"),
    ("gpu", "training stage 11 gives every layer the same dz buffer",
     "stages/training/11_weight_gradients_beside/stage.cu",
     "float* dz = dz_[l % 2].data();", "float* dz = dz_[0].data();", "gpu"),
    # ---- multi-GPU stage 00 (data-parallel training through NCCL): caught at G = 1 already
    ("gpu", "multi-GPU stage 00's backward never gathers dx from the GPUs",
     "stages/multigpu/00_data_parallel/stage.cu", "\n      gather(t.dx, r.tensors.dx,",
     "\n      if (false) gather(t.dx, r.tensors.dx,", "gpu"),
    ("gpu", "multi-GPU stage 00's forward scatters c0's rows as h0",
     "stages/multigpu/00_data_parallel/stage.cu", "scatter(t.h0, const_cast<float*>(r.tensors.h0)",
     "scatter(t.c0, const_cast<float*>(r.tensors.h0)", "gpu"),
    ("gpu", "multi-GPU stage 00's forward keeps its home share on the weights prepare() saw",
     "stages/multigpu/00_data_parallel/stage.cu",
     "    point_home_share_at(t);\n    KeepDevice keep;\n    CUDA_CHECK(cudaEventRecord(",
     "    KeepDevice keep;\n    CUDA_CHECK(cudaEventRecord(", "gpu"),
    # caught only where the tests run at G > 1 (at G = 1 the sum over the GPUs is the identity)
    ("gpu", "multi-GPU stage 00 leaves W_hh's gradient out of the sum over the GPUs",
     "stages/multigpu/00_data_parallel/stage.cu",
     "      sum(d.grad_w_hh[layer], four_h * d.size.hidden, *r);\n", "", "gpu"),
    ("cpu", "multi-GPU stage 00 gives one row too few of an uneven batch to the GPUs",
     "stages/multigpu/00_data_parallel/split.cpp", "rows + (g < longer ? 1 : 0)",
     "rows + (g < longer - 1 ? 1 : 0)", "cpu"),
    # ---- training stage 13 (partial sums of dh published, tagged with their step)
    ("gpu", "training stage 13 takes a partial sum without checking its step's tag",
     "stages/training/13_published_partial_sums/backward_kernel.cuh",
     "return static_cast<unsigned>(got >> 32) != tag;",
     "return false;", "gpu"),
    ("gpu", "training stage 13 gives every layer the same tags",
     "stages/training/13_published_partial_sums/stage.cu",
     "args.tag_base = static_cast<unsigned>(l * s.seq_len + 1);", "args.tag_base = 1;", "gpu"),
    ("gpu", "training stage 13 adds only one lane's share of a pair's sums",
     "stages/training/13_published_partial_sums/backward_kernel.cuh",
     "sum += __shfl_xor_sync(kFullMask, sum, offset);", "(void)offset;", "gpu"),
    ("cpu", "stage 11's planner leaves out the last, partly filled batch slice",
     "stages/forward/11_batch_groups/plan.cpp", "plan.slices = ceil_div(s.batch, g * rows);",
     "plan.slices = s.batch / (g * rows);", "cpu"),
    ("cpu", "stage 12's planner gives the register kernel more than 8 batch rows",
     "stages/forward/12_small_batch_registers/plan.cpp", "  if (s.batch > kMaxRegisterBatch) {",
     "  if (false) {", "cpu"),
    ("cpu", "forward 18's planner gives an upper layer of a launch no input rows of its own",
     "stages/forward/18_layers_in_one_launch/plan.cpp",
     "plan.input_rows = i == 0 ? 0 : s.hidden;", "plan.input_rows = 0;", "cpu"),
    ("cpu", "training stage 06's planner lets a backward block own more units than its sums hold",
     "stages/training/06_persistent/plan.cpp", "if (J > kMaxUnitsPerBlock) {", "if (false) {", "cpu"),
    ("cpu", "training stage 06's planner gives the forward's register kernel more than 8 batch rows",
     "stages/training/06_persistent/plan.cpp", "  if (s.batch > kMaxRegisterBatch) {",
     "  if (false) {", "cpu"),
    ("cpu", "the reference swaps the f and g gates", "reference/lstm_reference.cpp",
     "sigmoid(gates_b[kForgetGate * H + j])", "sigmoid(gates_b[kCellGate * H + j])", "cpu"),
    ("cpu", "the reference's backward drops the forget gate from dc_{t-1}",
     "reference/lstm_reference_backward.cpp", "dc_rec[bj] = dc * f;", "dc_rec[bj] = dc;", "cpu"),
    ("cpu", "the .npy reader accepts any dtype", "common/core/npy.cpp",
     'if (!is_string || *descr != "<f4") {', "if (!is_string) {", "cpu"),
    ("cpu", "loaded inputs are not checked for NaN and Inf", "common/core/lstm_data.cpp",
     "    if (std::isfinite(array.data[i])) continue;", "    continue;", "cpu"),
    ("cpu", "a size flag accepts trailing letters", "common/core/command_line.cpp",
     "    if (c < '0' || c > '9') return false;", "    if (c < '0' || c > '9') break;", "cpu"),
    ("cpu", "the check ignores NaN", "common/core/check.cpp",
     "if (!std::isfinite(value)) {", "if (false) {", "cpu"),
    ("cpu", "the check lets a tensor the implementation never produced pass",
     "common/core/check.cpp", "      check.missing = true;\n", "", "cpu"),
    ("gpu", "the harness checks every implementation against the FP32 bound, not its own",
     "common/harness/checked_run.cpp", "[&stage](const std::string& name) { return stage.tolerance(name); }",
     "[&stage](const std::string&) { return default_tolerance(Precision::kFp32); }", "gpu",
     "Harness"),
    ("gpu", "the harness never runs a training stage's backward",
     "common/harness/checked_run.cpp",
     "    static_cast<TrainingStage&>(stage).backward(problem.tensors(), stream);\n", "", "gpu",
     "Harness"),
    ("cpu", "the table against cuDNN takes each stage from its earliest file, not its latest",
     "plots/make_plots.py", "source[key] = max(source.get(key, r.source)",
     "source[key] = min(source.get(key, r.source)", "cpu", "plots.make_plots"),
    ("cpu", "the table against cuDNN calls the best configuration the worst", "plots/make_plots.py",
     "return at, max(ratios, key=lambda rx: rx[1]", "return at, min(ratios, key=lambda rx: rx[1]",
     "cpu", "plots.make_plots"),
]


def run(command, log):
    with open(log, "w") as out:
        return subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT).returncode


def selected(args):
    """The mutations of `which` whose label contains --only, not followed by a digit: 'training
    stage 1' selects stage 1's, not those of stages 10-19."""
    only = re.compile(re.escape(args.only) + (r"(?![0-9])" if args.only[-1:].isdigit() else ""))
    return [m for m in MUTATIONS if args.which in ("all", m[0]) and only.search(m[1])]


def check_texts(args):
    """Each selected mutation's text must occur exactly once in its file; nothing is built."""
    labels = [m[1] for m in MUTATIONS]
    problems = [f"label used twice: {label}" for label in sorted(set(labels))
                if labels.count(label) > 1]
    mutations = selected(args)
    for kind, label, file, text, replacement, *rest in mutations:
        path = ROOT / file
        if kind == "gpu" and len(rest) < 2 and stage_tests(file) is None:
            problems.append(f"{label}: a GPU mutation outside stages/ must name its tests")
        if not path.is_file():
            problems.append(f"{label}: no file {file}")
        elif (count := path.read_text().count(text)) != 1:
            problems.append(f"{label}: text found {count} times in {file}, not once")
    for problem in problems:
        print(f"ERROR   {problem}")
    print(f"mutation texts: {len(mutations) - len(problems)} of {len(mutations)} found exactly once"
          if not problems else f"mutation texts: {len(problems)} problem(s)")
    return 1 if problems or not mutations else 0


def seconds(text):
    """--test-timeout's value: a whole number of seconds, 1 or more."""
    if not re.fullmatch(r"[0-9]+", text.strip()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a whole number of seconds, 1 or more: {text!r}")
    return int(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["cpu", "gpu", "all"])
    parser.add_argument("--build", default=os.environ.get("BUILD_DIR", "build"))
    parser.add_argument("--only", default="",
                        help="run only mutations whose label contains TEXT ('stage 1' is not "
                             "'stage 10': a digit may not follow a TEXT that ends in one)")
    parser.add_argument("--test-timeout", type=seconds, default=300,
                        help="seconds before CTest stops one test (it then counts as failed)")
    parser.add_argument("--targets", nargs="+", default=[],
                        help="build only these CMake targets after a mutation (default: all)")
    parser.add_argument("--texts-only", action="store_true",
                        help="only check that each mutation's text is found exactly once")
    args = parser.parse_args()
    mutations = selected(args)
    if not mutations:
        print(f"mutation check: no {args.which} mutation's label contains {args.only!r}")
        return 2
    if args.texts_only:
        return check_texts(args)
    if not (ROOT / args.build / "CMakeCache.txt").is_file():
        print(f"mutation check: {args.build} is not a configured build folder (no CMakeCache.txt);"
              " configure it first or name one with --build", file=sys.stderr)
        return 2
    # Stopped by a time limit (SIGTERM), the mutated file is still restored (the finally below),
    # and its new time stamp makes the next build recompile it.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    jobs = str(os.cpu_count() or 2)
    build = ["cmake", "--build", args.build, "--parallel", jobs]
    if args.targets:
        build += ["--target", *args.targets]
    ok = True
    # Each outcome is printed as soon as it is known, so that a run stopped by a time limit still
    # says what it found before it stopped.
    print(f"mutation check ({args.which}{', only ' + repr(args.only) if args.only else ''}; "
          f"{len(mutations)} selected):", flush=True)

    started = [time.monotonic()]  # when the current mutation was applied

    class Outcomes(list):
        def append(self, line):
            super().append(line)
            print(f"  {line} ({time.monotonic() - started[0]:.0f} s)", flush=True)

    results = Outcomes()
    for kind, label, file, text, replacement, test_label, *tests in mutations:
        started[0] = time.monotonic()
        path = ROOT / file
        original = path.read_text()
        if original.count(text) != 1:
            results.append(f"ERROR   {label}: text not found exactly once in {file}")
            ok = False
            continue
        try:
            path.write_text(original.replace(text, replacement))
            if run(build, "/tmp/mutation_build.log") != 0:
                results.append(f"ERROR   {label}: the mutated code does not build")
                ok = False
                continue
            ctest = ["ctest", "--test-dir", args.build, "-L", test_label, "--parallel", "4",
                     "--timeout", str(args.test_timeout)]
            if kind == "gpu" or tests:
                ctest += ["-R", tests[0] if tests else stage_tests(file)]
            if run(ctest, "/tmp/mutation_test.log") == 0:
                results.append(f"MISSED  {label}: every '{test_label}' test still passes")
                ok = False
                continue
            log = Path("/tmp/mutation_test.log").read_text()
            failed = re.findall(r"^\s*\d+ - (\S+).*\((?:Failed|SEGFAULT|Exception|Timeout|Subprocess aborted)\)", log, re.M)
            if not failed:
                results.append(f"ERROR   {label}: ctest failed, but no test did (see "
                               "/tmp/mutation_test.log)")
                ok = False
                continue
            results.append(f"caught  {label}: {len(failed)} tests failed, e.g. "
                           + ", ".join(failed[:2]))
        finally:
            path.write_text(original)
    run(build, "/tmp/mutation_build.log")  # rebuild the unmutated code
    return 0 if ok and results else 1


if __name__ == "__main__":
    sys.exit(main())
