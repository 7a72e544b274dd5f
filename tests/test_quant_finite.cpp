// The loaders' finiteness check on quantized blocks (tensor_checks.h): a
// block whose f16 scale is infinite or NaN is found, at its first weight
// that decodes to a non-finite value, and named in the error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/arch/tensor_checks.h"
#include "model/core/error.h"

namespace kvscope {
namespace {

TEST(QuantFinite, AnInfiniteScaleIsFoundAtItsBlock) {
  // Three Q8_0 blocks of 32 weights (34 bytes: f16 d, 32 int8), d = 1.0.
  std::vector<uint8_t> blocks(3 * 34, 1);
  for (int b = 0; b < 3; ++b) blocks[b * 34] = 0x00, blocks[b * 34 + 1] = 0x3c;
  EXPECT_EQ(first_non_finite(StoredType::kQ8_0, blocks.data(), 96), 96u);
  blocks[2 * 34] = 0x00, blocks[2 * 34 + 1] = 0x7c;  // block 2: d = +inf
  EXPECT_EQ(first_non_finite(StoredType::kQ8_0, blocks.data(), 96), 64u);
  try {
    check_finite(StoredType::kQ8_0, blocks.data(), 96, "m.gguf", "blk.0.attn_q.weight", {3, 32});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("+inf at element 64 (row 2, column 0)"), std::string::npos) << what;
    EXPECT_NE(what.find("blk.0.attn_q.weight"), std::string::npos) << what;
  }
  // Q4_K's dmin is its second scale: a NaN there is a NaN weight.
  std::vector<uint8_t> k(144, 0);
  k[1] = 0x3c;               // d = 1
  k[2] = 0x00, k[3] = 0x7e;  // dmin = NaN
  EXPECT_EQ(first_non_finite(StoredType::kQ4_K, k.data(), 256), 0u);
}

}  // namespace
}  // namespace kvscope
