#include "specula/kernels/weight_matrix.h"

#include <string>

#include "specula/kernels/quant.h"
#include "specula/kernels/shared_scales.h"
#include "specula/util/error.h"

namespace specula {

namespace {

int64_t dense_element_size(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return 4;
    case WeightFormat::BF16:
    case WeightFormat::F16: return 2;
    case WeightFormat::Affine: break;
  }
  return 0;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Checks that a tensor holds exactly `count` elements of `elem` bytes (the view a kernel will read).
void check_bytes(const TensorView& t, const std::string& module, const char* role, uint64_t expected) {
  if (t.data == nullptr) fail("module '{}': tensor '{}' ({}) has no data", module, t.name, role);
  if (t.nbytes != expected) {
    fail("module '{}': tensor '{}' ({}) holds {} bytes, expected {}", module, t.name, role, t.nbytes, expected);
  }
}

}  // namespace

int64_t WeightMatrix::row_bytes() const {
  if (format == WeightFormat::Affine) return cols * bits / 8;
  return cols * dense_element_size(format);
}

WeightMatrix WeightMatrix::row_slice(int64_t begin, int64_t count) const {
  if (begin < 0 || count < 0 || begin + count > rows) {
    fail("weight row slice [{}, {}) is outside the matrix's {} rows", begin, begin + count, rows);
  }
  WeightMatrix s = *this;
  s.rows = count;
  s.packed = nullptr;
  s.data = static_cast<const uint8_t*>(data) + begin * row_bytes();
  if (format == WeightFormat::Affine) {
    const int64_t offset = begin * groups_per_row() * static_cast<int64_t>(dtype_size(scale_dtype));
    s.scales = static_cast<const uint8_t*>(scales) + offset;
    s.biases = static_cast<const uint8_t*>(biases) + offset;
  }
  return s;
}

uint64_t WeightMatrix::bytes() const {
  uint64_t total = static_cast<uint64_t>(rows) * static_cast<uint64_t>(row_bytes());
  if (format == WeightFormat::Affine) {
    total += 2ull * static_cast<uint64_t>(rows) * static_cast<uint64_t>(groups_per_row()) * dtype_size(scale_dtype);
  }
  return total;
}

WeightMatrix weight_matrix(const ModuleRef& module, int64_t expert) {
  const std::string& name = module.path;
  if (module.weight == nullptr) fail("module '{}' has no weight tensor", name);
  const auto& shape = module.shape;
  int64_t experts = 0;
  if (shape.size() == 3) {
    experts = shape[0];
    if (expert < 0 || expert >= experts) {
      fail("module '{}' {}: expert index {} is outside [0, {})", name, shape_string(shape), expert, experts);
    }
  } else if (shape.size() == 2) {
    if (expert != -1) {
      fail("module '{}' {} is not an expert stack but expert {} was requested", name, shape_string(shape), expert);
    }
  } else {
    fail("module '{}' has shape {}; expected [out, in] or [experts, out, in]", name, shape_string(shape));
  }
  const int64_t rows = shape[shape.size() - 2];
  const int64_t cols = shape[shape.size() - 1];
  if (rows < 0 || cols < 0) fail("module '{}' has negative shape {}", name, shape_string(shape));
  const int64_t stack = experts > 0 ? experts : 1;
  const int64_t index = experts > 0 ? expert : 0;

  WeightMatrix w;
  w.rows = rows;
  w.cols = cols;
  if (!module.quantized) {
    switch (module.weight->dtype) {
      case DType::F32: w.format = WeightFormat::F32; break;
      case DType::BF16: w.format = WeightFormat::BF16; break;
      case DType::F16: w.format = WeightFormat::F16; break;
      default:
        fail("module '{}': tensor '{}' has dtype {}; dense weights must be BF16, F16 or F32", name, module.weight->name,
             dtype_name(module.weight->dtype));
    }
    const uint64_t matrix_bytes = static_cast<uint64_t>(w.bytes());
    check_bytes(*module.weight, name, "weight", matrix_bytes * stack);
    w.data = module.weight->data + matrix_bytes * index;
    return w;
  }

  const QuantSpec& q = module.quant;
  if (q.mode != "affine") fail("module '{}': quantization mode '{}' is not supported (only affine)", name, q.mode);
  if (!is_supported_bits(q.bits)) fail("module '{}': {} quantization bits not supported (2,3,4,5,6,8)", name, q.bits);
  if (!is_supported_group_size(q.group_size)) {
    fail("module '{}': group size {} not supported (16, 32, 64, 128)", name, q.group_size);
  }
  if (cols % q.group_size != 0 || (cols * q.bits) % 32 != 0) {
    fail("module '{}': input width {} is not a multiple of group size {} and of 32/{} words", name, cols, q.group_size,
         q.bits);
  }
  if (module.scales == nullptr || module.biases == nullptr) {
    fail("module '{}' is quantized but lacks scales or biases", name);
  }
  if (module.weight->dtype != DType::U32) {
    fail("module '{}': quantized tensor '{}' has dtype {}, expected U32", name, module.weight->name,
         dtype_name(module.weight->dtype));
  }
  const DType sd = module.scales->dtype;
  if (sd != DType::BF16 && sd != DType::F16 && sd != DType::F32) {
    fail("module '{}': scales '{}' have dtype {}; expected BF16, F16 or F32", name, module.scales->name,
         dtype_name(sd));
  }
  if (module.biases->dtype != sd) {
    fail("module '{}': biases '{}' dtype {} differs from scales dtype {}", name, module.biases->name,
         dtype_name(module.biases->dtype), dtype_name(sd));
  }
  if (q.superblock != 0 && !shared_factor_format(q.bits, q.group_size)) {
    fail("module '{}': superblock {} is for 4- and 5-bit groups of 32 and 8-bit groups of 16, not {}-bit groups of {}",
         name, q.superblock, q.bits, q.group_size);
  }
  if (q.code_bits != 0 && (q.code_bits < 2 || q.code_bits >= q.bits)) {
    fail("module '{}': code_bits {} must be at least 2 and fewer than its {} bits", name, q.code_bits, q.bits);
  }
  if (q.superblock != 0 && (q.superblock % q.group_size != 0 || cols % q.superblock != 0)) {
    fail("module '{}': superblock {} is not a multiple of the group size {} that divides the input width {}", name,
         q.superblock, q.group_size, cols);
  }
  w.format = WeightFormat::Affine;
  w.bits = q.bits;
  w.group_size = q.group_size;
  w.scale_dtype = sd;
  w.superblock = q.superblock;
  w.code_bits = q.code_bits;
  const uint64_t data_bytes = static_cast<uint64_t>(rows) * static_cast<uint64_t>(w.row_bytes());
  const uint64_t sb_bytes = static_cast<uint64_t>(rows) * static_cast<uint64_t>(w.groups_per_row()) * dtype_size(sd);
  check_bytes(*module.weight, name, "weight", data_bytes * stack);
  check_bytes(*module.scales, name, "scales", sb_bytes * stack);
  check_bytes(*module.biases, name, "biases", sb_bytes * stack);
  w.data = module.weight->data + data_bytes * index;
  w.scales = module.scales->data + sb_bytes * index;
  w.biases = module.biases->data + sb_bytes * index;
  return w;
}

}  // namespace specula
