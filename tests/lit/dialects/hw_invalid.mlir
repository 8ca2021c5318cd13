// RUN: MONET_VERIFY_DIAG

%x = "test.op"() : () -> tensor<4x4xf32>
%y = nn.relu %x {monet.schedule = #hw.sched<core = 0, start = 5.000000e+00, end = 1.000000e+00>} : tensor<4x4xf32>
// CHECK: hw.sched ends before it starts

// -----

%x = "test.op"() : () -> tensor<4x4xf32>
%y = nn.relu %x {monet.tiling = #hw.tiling<stack = 0, tiles = 0, axis = 1>} : tensor<4x4xf32>
// CHECK: hw.tiling needs stack >= 0, tiles >= 1 and axis >= 0

// -----

%x = "test.op"() : () -> tensor<4x4xf32>
%y = nn.relu %x {monet.costs = [#hw.cost<core = 0, latency = -1.000000e+00, energy = 1.000000e+00, mem = 0>]} : tensor<4x4xf32>
// CHECK: hw.cost fields must be non-negative

