// The shared formatters: every count of bytes and FLOPs on screen and in the CLI
// goes through these, so their rounding and unit boundaries are pinned here.
#include <gtest/gtest.h>

#include <cstdint>

#include "model/core/units.h"

namespace kvscope {
namespace {

TEST(Units, SiThreeSignificantDigits) {
  EXPECT_EQ(format_si(0), "0");
  EXPECT_EQ(format_si(999), "999");
  EXPECT_EQ(format_si(1234), "1.23 k");
  EXPECT_EQ(format_si(45600000), "45.6 M");
  EXPECT_EQ(format_si(4.5e9), "4.50 G");
  EXPECT_EQ(format_si(999.7), "1.00 k");  // rounds up across the prefix, never "1000"
}

TEST(Units, Flops) {
  EXPECT_EQ(format_flops(123), "123 FLOP");
  EXPECT_EQ(format_flops(461000), "461 kFLOP");
  EXPECT_EQ(format_flops(4.5e9), "4.50 GFLOP");
  EXPECT_EQ(format_flops(static_cast<double>(uint64_t{345} * 1000000000000ull)), "345 TFLOP");
}

TEST(Units, BytesBinary) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(100), "100 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");  // bytes are exact
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(36864), "36.0 KiB");
  EXPECT_EQ(format_bytes(59392), "58.0 KiB");
  EXPECT_EQ(format_bytes(524288), "512 KiB");
  EXPECT_EQ(format_bytes(1024.0 * 1024 - 1), "1.00 MiB");
  EXPECT_EQ(format_bytes(1.5 * 1024 * 1024), "1.50 MiB");
  EXPECT_EQ(format_bytes(512.0 * 1024 * 1024 * 100), "50.0 GiB");
  EXPECT_EQ(format_bytes(52428800000.0), "48.8 GiB");
}

TEST(Units, BytesDecimal) {
  EXPECT_EQ(format_bytes_decimal(999), "999 B");
  EXPECT_EQ(format_bytes_decimal(524288), "524 kB");
  EXPECT_EQ(format_bytes_decimal(16060522496.0), "16.1 GB");
  EXPECT_EQ(format_bytes_decimal(52428800000.0), "52.4 GB");
}

}  // namespace
}  // namespace kvscope
