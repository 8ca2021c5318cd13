// RUN: MONET_VERIFY_DIAG

%dy = "test.op"() : () -> tensor<4x64x8x8xf32>
%w = "test.op"() : () -> tensor<64x64x3x3xf32>
%dx = grad.conv_input %dy, %w : (tensor<4x64x8x8xf32>, tensor<64x64x3x3xf32>) -> tensor<4x64x8x8xf32>
// CHECK: grad.conv_input: gradient has shape [4, 64, 8, 8], expected [4, 64, 6, 6]

// -----

%dy = "test.op"() : () -> tensor<8xf32>
%x = "test.op"() : () -> tensor<9xf32>
%dx = "grad.relu"(%dy, %x) : (tensor<8xf32>, tensor<9xf32>) -> tensor<8xf32>
// CHECK: attribute tensor<8xf32> expected from variable 'T', but got tensor<9xf32>

// -----

%dy = "test.op"() : () -> tensor<4x10xf32>
%b = "test.op"() : () -> tensor<10x20xf32>
%da = grad.matmul_lhs %dy, %b : (tensor<4x10xf32>, tensor<10x20xf32>) -> tensor<4x10xf32>
// CHECK: grad.matmul_lhs: gradient has shape [4, 10], expected [4, 20]

// -----

%dy = "test.op"() : () -> tensor<4x8xf32>
%r = grad.unbroadcast %dy : (tensor<4x8xf32>) -> tensor<3xf32>
// CHECK: grad.unbroadcast: [3] does not broadcast to [4, 8]

// -----

%dy = "test.op"() : () -> tensor<4x8xf32>
%m = "test.op"() : () -> tensor<4x8xf32>
%dx = grad.dropout %dy, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: grad.dropout: mask must be a tensor of i1

// -----

%dl = "test.op"() : () -> tensor<f32>
%lp = "test.op"() : () -> tensor<2x16x100xf32>
%lab = "test.op"() : () -> tensor<2x16xi64>
%s = grad.softmax_cross_entropy %dl, %lp, %lab {class_axis = 3 : i64} : (tensor<f32>, tensor<2x16x100xf32>, tensor<2x16xi64>) -> tensor<2x16x100xf32>
// CHECK: grad.softmax_cross_entropy: class_axis 3 is not an axis after the batch axis of log_prob

// -----

%dy = "test.op"() : () -> tensor<2x8x16x16xf32>
%dx = grad.resize %dy {mode = "area"} : (tensor<2x8x16x16xf32>) -> tensor<2x8x4x4xf32>
// CHECK: grad.resize: mode must be one of nearest, linear, cubic, not 'area'
