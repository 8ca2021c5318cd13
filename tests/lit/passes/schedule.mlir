// RUN: monet-opt %s -p 'annotate-cost{target="%S/../../data/stream_hw/tpu_like_quad_core.yaml" precision=int8},schedule' | filecheck %s
// RUN: monet-opt %s -p 'schedule{target=edge_npu}' -t monet-report | filecheck %s --check-prefix=REPORT
// RUN: not monet-opt %s -p 'schedule' 2>&1 | filecheck %s --check-prefix=NOTARGET

// The product goes to an array core, the ReLU to the SIMD core after it; the view takes no time.
func.func @step(%x: tensor<8x64xf32> {monet.input = "x"}, %w: tensor<64x64xf32> {monet.param = "w", monet.trainable}) -> tensor<512xf32> {
  %y = nn.matmul %x, %w {node = "/mm"} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %r = nn.relu %y {node = "/relu"} : tensor<8x64xf32>
  %f = nn.reshape %r {node = "/flatten"} : (tensor<8x64xf32>) -> tensor<512xf32>
  func.return %f : tensor<512xf32>
}

// CHECK:      builtin.module attributes {monet.target = "{{.*}}tpu_like_quad_core.yaml", monet.precision = "int8", monet.latency_cycles = {{.*}} : f64, monet.energy_pj = {{.*}} : f64}
// CHECK:      nn.matmul %x, %w {monet.costs = [{{.*}}], monet.schedule = #hw.sched<core = {{[0-3]}}, start = {{.*}}, end = [[END:.*]]>
// CHECK-NEXT: nn.relu %y {monet.costs = [{{.*}}], monet.schedule = #hw.sched<core = 5,
// CHECK-NEXT: nn.reshape %r {monet.schedule = #hw.sched<core = 5,

// REPORT: "energy_breakdown_pj"
// REPORT: "latency_cycles"
// REPORT: "layers"

// NOTARGET: monet-opt: error: schedule: no target
