// RUN: MONET_VERIFY_DIAG

%w = "test.op"() : () -> tensor<8x4xf32>
%g = "test.op"() : () -> tensor<4x8xf32>
train.sgd %w, %g {lr = 1.000000e-02 : f64} : tensor<8x4xf32>, tensor<4x8xf32>
// CHECK: train.sgd: gradient has shape [4, 8], expected [8, 4]

// -----

%w = "test.op"() : () -> tensor<8xf32>
%g = "test.op"() : () -> tensor<8xf32>
%m = "test.op"() : () -> tensor<8xf32>
%v = "test.op"() : () -> tensor<8xf32>
%t = "test.op"() : () -> tensor<1xf32>
train.adam %w, %g, %m, %v, %t {lr = 1.000000e-03 : f64} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<1xf32>
// CHECK: train.adam: step has shape [1], expected []

// -----

%w = "test.op"() : () -> tensor<8xf32>
%g = "test.op"() : () -> tensor<8xf32>
train.sgd %w, %g {lr = -1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
// CHECK: train.sgd: lr must be non-negative

// -----

%w = "test.op"() : () -> tensor<8xf32>
%g = "test.op"() : () -> tensor<8xf32>
%m = "test.op"() : () -> tensor<8xf32>
%v = "test.op"() : () -> tensor<8xf32>
%t = "test.op"() : () -> tensor<f32>
train.adamw %w, %g, %m, %v, %t {lr = 1.000000e-03 : f64, beta1 = 1.500000e+00 : f64} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>
// CHECK: train.adamw: beta1 must be in [0, 1)
