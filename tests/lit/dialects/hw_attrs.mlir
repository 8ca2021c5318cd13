// RUN: MONET_ROUNDTRIP
// RUN: MONET_GENERIC_ROUNDTRIP

%x = "test.op"() : () -> tensor<4x4xf32>
%y = nn.relu %x {monet.costs = [#hw.cost<core = 5, latency = 4.000000e+00, energy = 1.200000e+01, mem = 64>, #hw.cost<core = 0, latency = 2.500000e+01, energy = 3.000000e+00, mem = 0>], monet.schedule = #hw.sched<core = 5, start = 1.000000e+01, end = 1.400000e+01>, monet.tiling = #hw.tiling<stack = 2, tiles = 4, axis = 1>} : tensor<4x4xf32>

// CHECK: nn.relu %{{.*}} {monet.costs = [#hw.cost<core = 5, latency = 4.000000e+00, energy = 1.200000e+01, mem = 64>, #hw.cost<core = 0, latency = 2.500000e+01, energy = 3.000000e+00, mem = 0>], monet.schedule = #hw.sched<core = 5, start = 1.000000e+01, end = 1.400000e+01>, monet.tiling = #hw.tiling<stack = 2, tiles = 4, axis = 1>}
// CHECK-GENERIC: "nn.relu"(%{{.*}}) {monet.costs = [#hw.cost<core = 5, latency = 4.000000e+00, energy = 1.200000e+01, mem = 64>, #hw.cost<core = 0, latency = 2.500000e+01, energy = 3.000000e+00, mem = 0>], monet.schedule = #hw.sched<core = 5, start = 1.000000e+01, end = 1.400000e+01>, monet.tiling = #hw.tiling<stack = 2, tiles = 4, axis = 1>}
