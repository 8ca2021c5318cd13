// RUN: MONET_VERIFY_DIAG

%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%w = "test.op"() : () -> tensor<4x2x3x3xf32>
%y = nn.conv %x, %w : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
// CHECK: nn.conv: input channels 3 != weight channels 2 x group 1

// -----

%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%w = "test.op"() : () -> tensor<4x3x3x3xf32>
%y = nn.conv %x, %w {strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
// CHECK: nn.conv: result has shape [1, 4, 6, 6], expected [1, 4, 3, 3]

// -----

%a = "test.op"() : () -> tensor<4x8xf32>
%b = "test.op"() : () -> tensor<3xf32>
%c = nn.add %a, %b : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
// CHECK: nn.add: shapes [[4, 8], [3]] do not broadcast

// -----

%a = "test.op"() : () -> tensor<4x8xf32>
%b = "test.op"() : () -> tensor<4x8xf16>
%c = nn.mul %a, %b : (tensor<4x8xf32>, tensor<4x8xf16>) -> tensor<4x8xf32>
// CHECK: nn.mul: element types differ

// -----

%a = "test.op"() : () -> tensor<4x8xf32>
%b = "test.op"() : () -> tensor<4x8xf32>
%c = nn.gemm %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: nn.gemm: contraction sizes differ (8 vs 4)

// -----

%a = "test.op"() : () -> tensor<2x3x4xf32>
%b = nn.transpose %a {perm = array<i64: 0, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<2x2x3xf32>
// CHECK: nn.transpose: perm [0, 0, 1] is not a permutation of 3 axes

// -----

%a = "test.op"() : () -> tensor<2x3x4xf32>
%b = nn.reshape %a : (tensor<2x3x4xf32>) -> tensor<5x5xf32>
// CHECK: nn.reshape: cannot reshape [2, 3, 4] (24 elements) to [5, 5] (25 elements)

// -----

%a = "test.op"() : () -> tensor<2x3xi64>
%b = nn.relu %a : tensor<2x3xi64>
// CHECK: nn.relu: operand must have a float element type, got i64

// -----

%a = "test.op"() : () -> tensor<2x3xf32>
%b = nn.softmax %a {axis = 2 : i64} : tensor<2x3xf32>
// CHECK: nn.softmax: axis 2 is out of range for rank 2

// -----

%a = "test.op"() : () -> tensor<1x4x8x8xf32>
%b = nn.max_pool %a {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x3x3xf32>
// CHECK: nn.max_pool: result has shape [1, 4, 3, 3], expected [1, 4, 4, 4]

// -----

%a = "test.op"() : () -> tensor<2x8xf32>
%l = "test.op"() : () -> tensor<3xi64>
%loss = nn.softmax_cross_entropy %a, %l : (tensor<2x8xf32>, tensor<3xi64>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy: labels shape [3] does not match scores [2, 8]

// -----

%a = "test.op"() : () -> tensor<2x8xf32>
%b = nn.relu %a {phase = "sideways"} : tensor<2x8xf32>
// CHECK: nn.relu: phase must be one of forward, backward, optimizer, recompute, got 'sideways'

// -----

%c = nn.constant #nn.data<tensor<2xf32>, "0x0000803F">
// CHECK: nn.constant: value holds 4 bytes, tensor<2xf32> needs 8

// -----

%x = "test.op"() : () -> tensor<8x16xf32>
%a, %b = nn.split %x {axis = 1 : i64} : (tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>)
// CHECK: nn.split: result sizes along axis 1 do not add up to 16

// -----

%r = nn.random {distribution = "poisson"} : tensor<2x16xf32>
// CHECK: nn.random: distribution must be uniform or normal, not 'poisson'

// -----

%r = nn.random {distribution = "uniform", low = 2.0 : f64, high = 1.0 : f64} : tensor<2x16xf32>
// CHECK: nn.random: low must not exceed high

// -----

%x = "test.op"() : () -> tensor<2x16xi64>
%c = nn.cumsum %x {axis = 2 : i64} : (tensor<2x16xi64>) -> tensor<2x16xi64>
// CHECK: nn.cumsum: axis 2 is out of range for rank 2

// -----

%d = "test.op"() : () -> tensor<32xi64>
%i = "test.op"() : () -> tensor<2x16xi64>
%g = nn.gather_elements %d, %i : (tensor<32xi64>, tensor<2x16xi64>) -> tensor<2x16xi64>
// CHECK: nn.gather_elements: data and indices must have the same rank

// -----

%a = "test.op"() : () -> tensor<4xf32>
%b = "test.op"() : () -> tensor<4xf32>
%c = nn.less %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: nn.less: result element type must be i1

// -----

%s = "test.op"() : () -> tensor<2x16x100xf32>
%l = "test.op"() : () -> tensor<2x16xi64>
%loss = nn.softmax_cross_entropy %s, %l {class_axis = 3 : i64} : (tensor<2x16x100xf32>, tensor<2x16xi64>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy: class_axis 3 is not an axis after the batch axis of scores

// -----

%x = "test.op"() : () -> tensor<2x8x4x4xf32>
%u = nn.resize %x {mode = "linear", coordinate_transformation_mode = "tf_crop_and_resize"} : (tensor<2x8x4x4xf32>) -> tensor<2x8x16x16xf32>
// CHECK: nn.resize: coordinate_transformation_mode must be one of half_pixel, pytorch_half_pixel, asymmetric, align_corners, not 'tf_crop_and_resize'

// -----

%x = "test.op"() : () -> tensor<2x8x4x4xf32>
%u = nn.resize %x {mode = "nearest"} : (tensor<2x8x4x4xf32>) -> tensor<2x8x16xf32>
// CHECK: nn.resize: result rank 3 differs from input rank 4

// -----

%t = "test.op"() : () -> tensor<49x4xf32>
%i = "test.op"() : () -> tensor<6x3xi64>
%b = nn.gather_nd %t, %i : (tensor<49x4xf32>, tensor<6x3xi64>) -> tensor<6xf32>
// CHECK: nn.gather_nd: the last axis of indices must index 1..rank(data) axes

// -----

%t = "test.op"() : () -> tensor<49x4xf32>
%i = "test.op"() : () -> tensor<6x1xi64>
%u = "test.op"() : () -> tensor<6x3xf32>
%m = nn.scatter_nd %t, %i, %u : (tensor<49x4xf32>, tensor<6x1xi64>, tensor<6x3xf32>) -> tensor<49x4xf32>
// CHECK: nn.scatter_nd: updates has shape [6, 3], expected [6, 4]

// -----

%p = "test.op"() : () -> tensor<16x8xf32>
%w, %e = nn.topk %p {k = 9 : i64} : (tensor<16x8xf32>) -> (tensor<16x9xf32>, tensor<16x9xi64>)
// CHECK: nn.topk: k = 9 is out of range for an axis of 8

// -----

%e = "test.op"() : () -> tensor<16x2xi64>
%oh = nn.one_hot %e {depth = 8 : i64} : (tensor<16x2xi64>) -> tensor<16x8x2xi64>
// CHECK: nn.one_hot: result has shape [16, 8, 2], expected [16, 2, 8]

// -----

%m = "test.op"() : () -> tensor<2x3xi1>
%nz = nn.nonzero %m : (tensor<2x3xi1>) -> tensor<2x7xi64>
// CHECK: nn.nonzero: the bound 7 exceeds the input's 6 elements

// -----

%d = "test.op"() : () -> tensor<4x3xf32>
%i = "test.op"() : () -> tensor<2x3xi64>
%u = "test.op"() : () -> tensor<2x3xf32>
%s = nn.scatter_elements %d, %i, %u {reduction = "sub"} : (tensor<4x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK: nn.scatter_elements: reduction must be one of none, add, mul, max, min

// -----

%x = "test.op"() : () -> tensor<2x3xf32>
%t = nn.tile %x {repeats = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK: nn.tile: repeats needs 2 entries

// -----

%x = "test.op"() : () -> tensor<2x3xf32>
%i = nn.argmax %x {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x1xi32>
// CHECK: nn.argmax: result must be a tensor of i64

// -----

%x = "test.op"() : () -> tensor<2x3xi64>
%y = nn.floor %x : tensor<2x3xi64>
// CHECK: nn.floor: operand must have a float element type
