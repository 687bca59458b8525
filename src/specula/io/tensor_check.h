#pragma once
// Scans tensor values for NaN and infinity (`specula inspect --check`). Loading validates names,
// shapes and dtypes but never reads the values, so a checkpoint corrupted in its data (or a bad
// conversion) only shows as non-finite logits at run time; this scan names the tensors at fault.
// Every float tensor is read: dense weights, norms, and the scales and biases of quantized
// weights. Packed codes (U32) and integer tensors cannot hold non-finite values and are skipped.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "specula/io/safetensors.h"

namespace specula {

struct NonFiniteCount {
  int64_t nan = 0;
  int64_t inf = 0;           // +inf and -inf
  int64_t first_index = -1;  // flat index of the first non-finite element, -1 if none
  bool any() const { return nan > 0 || inf > 0; }
};

// Counts the NaN and infinite elements of one tensor (BF16, F16, F32 or F64; other dtypes and
// data-less views count as clean).
NonFiniteCount count_non_finite(const TensorView& tensor);

struct NonFiniteTensor {
  std::string name;
  std::string file;
  NonFiniteCount count;
};

struct TensorValueCheck {
  size_t tensors_checked = 0;  // float tensors read
  uint64_t bytes_checked = 0;
  std::vector<NonFiniteTensor> non_finite;  // in name order
  bool clean() const { return non_finite.empty(); }
};

// Scans every float tensor of the store in name order. `progress(done, total)` gets the bytes
// read so far (of the float tensors' total) after each tensor.
TensorValueCheck check_tensor_values(const TensorStore& store,
                                     const std::function<void(uint64_t done, uint64_t total)>& progress = {});

// One line per tensor at fault ("<name>: 3 NaN, 0 inf, first at element 17 (<file>)").
std::string format_non_finite(const NonFiniteTensor& t);

}  // namespace specula
