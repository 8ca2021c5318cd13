// RUN: MONET_VERIFY_DIAG

%w = "test.op"() : () -> tensor<64x32xf32>
%q = mx.quantize %w {format = "mxfp9", axis = 0 : i64, group = array<i64: 1, 32>} : tensor<64x32xf32>
// CHECK: mx.quantize: unknown MX format 'mxfp9' (expected one of mxint8, mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4_e2m1)

// -----

%w = "test.op"() : () -> tensor<64x32xf32>
%q = mx.quantize %w {format = "mxfp4_e2m1", axis = 2 : i64, group = array<i64: 1, 32>} : tensor<64x32xf32>
// CHECK: mx.quantize: axis 2 is out of range for rank 2

// -----

%w = "test.op"() : () -> tensor<64x32xf32>
%q = mx.quantize %w {format = "mxfp4_e2m1", axis = 0 : i64, group = array<i64: 0, 32>} : tensor<64x32xf32>
// CHECK: mx.quantize: group must be two positive sizes [rows, cols], got [0, 32]

// -----

%b = "test.op"() : () -> tensor<64xf32>
%q = mx.quantize %b {format = "mxfp4_e2m1", axis = 0 : i64, group = array<i64: 8, 8>} : tensor<64xf32>
// CHECK: mx.quantize: a square group needs a tensor of rank 2 or more

// -----

%k = "test.op"() : () -> tensor<16x12x3x3xf32>
%q = mx.quantize %k {format = "mxint8", axis = 1 : i64, group = array<i64: 8, 8>, partner = 1 : i64} : tensor<16x12x3x3xf32>
// CHECK: mx.quantize: partner axis 1 must be another axis of the rank-4 tensor

// -----

%i = "test.op"() : () -> tensor<64x32xi64>
%q = mx.quantize %i {format = "mxint8", axis = 0 : i64, group = array<i64: 1, 32>} : tensor<64x32xi64>
// CHECK: mx.quantize: the input must be a float tensor

// -----

%w = "test.op"() : () -> tensor<64x32xf32>
%q = mx.requantize %w {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>} : tensor<64x32xf32>
// CHECK: mx.requantize: the input must be the result of an mx cast

// -----

%w = "test.op"() : () -> tensor<64x32xf32>
%q = mx.quantize %w {format = "mxfp8_e4m3", axis = 0 : i64, group = array<i64: 8, 8>} : tensor<64x32xf32>
%t = mx.requantize %q {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 8, 8>} : tensor<64x32xf32>
// CHECK: mx.requantize: the input's encoding already serves axis 1: nothing to requantize

// -----

%w = "test.op"() : () -> tensor<64x32xf32>
%q = mx.quantize %w {format = "mxfp8_e4m3", axis = 0 : i64, group = array<i64: 1, 32>, partner = 1 : i64} : tensor<64x32xf32>
// CHECK: mx.quantize: a vector group (1 x k) has no partner axis
