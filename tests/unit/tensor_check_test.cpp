// The NaN/Inf scan behind `inspect --check` (io/tensor_check.h) for every float dtype, and the
// forward pass's finite-logits guard (model/logits_check.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "special_floats.h"
#include "specula/io/tensor_check.h"
#include "specula/model/logits_check.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {
namespace {

using test::kInf;
using test::kNaN;

// A view over `bytes` holding the values in `dtype`.
TensorView view_of(DType dtype, const std::vector<float>& values, std::vector<std::byte>& bytes) {
  const size_t w = dtype_size(dtype);
  bytes.assign(values.size() * w, std::byte{0});
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::F32) {
      std::memcpy(bytes.data() + i * w, &values[i], 4);
    } else if (dtype == DType::F64) {
      const double d = values[i];
      std::memcpy(bytes.data() + i * w, &d, 8);
    } else {
      const uint16_t h = dtype == DType::BF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
      std::memcpy(bytes.data() + i * w, &h, 2);
    }
  }
  TensorView t;
  t.name = "t";
  t.dtype = dtype;
  t.shape = {static_cast<int64_t>(values.size())};
  t.data = bytes.data();
  t.nbytes = bytes.size();
  return t;
}

TEST(TensorCheck, CountsNanAndInfInEveryFloatDtype) {
  // The largest finite values and subnormals must not count: only the all-ones exponent does.
  const std::vector<float> values = {1.0f, -0.0f, 65504.0f, kNaN, 3.0e-8f, -kInf, kInf, kNaN, 2.0f};
  for (DType d : {DType::BF16, DType::F16, DType::F32, DType::F64}) {
    std::vector<std::byte> bytes;
    const NonFiniteCount c = count_non_finite(view_of(d, values, bytes));
    EXPECT_EQ(c.nan, 2) << dtype_name(d);
    EXPECT_EQ(c.inf, 2) << dtype_name(d);
    EXPECT_EQ(c.first_index, 3) << dtype_name(d);
  }
}

TEST(TensorCheck, FiniteExtremesAreClean) {
  const std::vector<float> f32 = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                                  std::numeric_limits<float>::denorm_min()};
  std::vector<std::byte> bytes;
  EXPECT_FALSE(count_non_finite(view_of(DType::F32, f32, bytes)).any());
  const std::vector<float> f16 = {65504.0f, -65504.0f, 6.0e-8f};  // f16 max and smallest subnormal
  EXPECT_FALSE(count_non_finite(view_of(DType::F16, f16, bytes)).any());
}

TEST(TensorCheck, IntegerAndDatalessTensorsAreSkipped) {
  std::vector<std::byte> bytes(8, std::byte{0xff});  // all-ones bits: NaN as a float, -1 as an int
  TensorView t;
  t.dtype = DType::I32;
  t.shape = {2};
  t.data = bytes.data();
  t.nbytes = 8;
  EXPECT_FALSE(count_non_finite(t).any());
  t.dtype = DType::F32;
  EXPECT_EQ(count_non_finite(t).nan, 2);
  t.data = nullptr;
  EXPECT_FALSE(count_non_finite(t).any());
}

TEST(LogitsCheck, FiniteRowPasses) {
  const std::vector<float> row = {-30.0f, 0.0f, 29.9f, std::numeric_limits<float>::max()};
  EXPECT_NO_THROW(require_finite_logits(row.data(), 4, 0, "m"));
}

TEST(LogitsCheck, NonFiniteRowNamesPositionCountsAndHint) {
  const std::vector<float> row = {1.0f, kInf, kNaN, kNaN};
  try {
    require_finite_logits(row.data(), 4, 17, "/models/x");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("non-finite logits at position 17"), std::string::npos) << m;
    EXPECT_NE(m.find("2 NaN and 1 infinite of 4 values (first: token 1 = inf)"), std::string::npos) << m;
    EXPECT_NE(m.find("specula inspect --check /models/x"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace specula
