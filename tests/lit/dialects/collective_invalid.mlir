// RUN: MONET_VERIFY_DIAG

%g = "test.op"() : () -> tensor<8x4xf32>
%r = collective.all_reduce %g {group = "dp", size = 8 : i64} : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK: collective.all_reduce: result 0 has type tensor<4x8xf32>, expected tensor<8x4xf32>

// -----

%g = "test.op"() : () -> tensor<8x4xf32>
%r = collective.all_reduce %g {group = "dp", size = 0 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK: collective.all_reduce: size must be at least 1, got 0

// -----

%g = "test.op"() : () -> tensor<8x4xf32>
%r = collective.all_reduce %g {group = "dp", size = 8 : i64, algorithm = "butterfly"} : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK: collective.all_reduce: algorithm must be one of ring, tree, hierarchical, direct, got 'butterfly'

// -----

%g = "test.op"() : () -> tensor<8x4xf32>
%s = collective.reduce_scatter %g {group = "dp", size = 3 : i64} : tensor<8x4xf32> -> tensor<10xf32>
// CHECK: collective.reduce_scatter: result 0 has shape [10], expected [11] (the flat shard of 32 elements over 3 chips)

// -----

%s = "test.op"() : () -> tensor<5xf32>
%w = collective.all_gather %s {group = "dp", size = 8 : i64} : tensor<5xf32> -> tensor<8x4xf32>
// CHECK: collective.all_gather: operand 0 has shape [5], expected [4] (the flat shard of 32 elements over 8 chips)

// -----

%x = "test.op"() : () -> tensor<2x4xf32>
collective.send %x {group = "pp", size = 2 : i64, peer = 2 : i64} : tensor<2x4xf32>
// CHECK: collective.send: peer 2 is not a chip of a group of 2

// -----

%w = "test.op"() : () -> tensor<8x4xf32>
%s = collective.shard %w {group = "dp", size = 8 : i64, phase = "sideways"} : tensor<8x4xf32> -> tensor<4xf32>
// CHECK: collective.shard: phase must be one of forward, backward, optimizer, recompute, got 'sideways'

// -----

%g = "test.op"() : () -> tensor<8x4xf32>
%a, %b = collective.all_reduce %g {group = "dp", size = 2 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>, tensor<8x4xf32>
// CHECK: collective.all_reduce: 1 operands but 2 results

// -----

%s = "test.op"() : () -> tensor<8x4xf32>
%w = collective.all_gather %s {group = "tp", size = 2 : i64, axis = 1 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK: collective.all_gather: operand 0 has shape [8, 4], expected [8, 2] (1/2 of axis 1)

// -----

%s = "test.op"() : () -> tensor<8x3xf32>
%w = collective.shard %s {group = "tp", size = 2 : i64, axis = 1 : i64} : tensor<8x3xf32> -> tensor<8x1xf32>
// CHECK: collective.shard: size 2 does not divide axis 1 of tensor<8x3xf32>
