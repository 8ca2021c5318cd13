// RUN: monet-opt %s -p 'annotate-cost{target="%S/../../data/stream_hw/tpu_like_quad_core.yaml" precision=int8}' | filecheck %s
// RUN: monet-opt %s -p 'annotate-cost{target=edge_npu}' | filecheck %s --check-prefix=EDGE
// RUN: not monet-opt %s -p 'annotate-cost' 2>&1 | filecheck %s --check-prefix=NOTARGET
// RUN: not monet-opt %s -p 'annotate-cost{target=no_such_target}' 2>&1 | filecheck %s --check-prefix=UNKNOWN

// On Stream's tpu_like_quad_core the product runs on the four 32x32 arrays, the ReLU on the
// SIMD core only; the reshape (a view) is not priced.
func.func @step(%x: tensor<8x64xf32> {monet.input = "x"}, %w: tensor<64x64xf32> {monet.param = "w", monet.trainable}) -> tensor<512xf32> {
  %y = nn.matmul %x, %w {node = "/mm"} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %r = nn.relu %y {node = "/relu"} : tensor<8x64xf32>
  %f = nn.reshape %r {node = "/flatten"} : (tensor<8x64xf32>) -> tensor<512xf32>
  func.return %f : tensor<512xf32>
}

// CHECK:      builtin.module attributes {monet.target = "{{.*}}tpu_like_quad_core.yaml", monet.precision = "int8"}
// CHECK:      nn.matmul %x, %w {monet.costs = [#hw.cost<core = 0, latency = [[L:.*]], energy = [[E:.*]], mem = [[M:.*]]>, #hw.cost<core = 1, latency = [[L]], energy = [[E]], mem = [[M]]>, #hw.cost<core = 2, latency = [[L]], energy = [[E]], mem = [[M]]>, #hw.cost<core = 3, latency = [[L]], energy = [[E]], mem = [[M]]>]
// CHECK-NEXT: nn.relu %y {monet.costs = [#hw.cost<core = 5, latency = {{.*}}>]
// CHECK-NEXT: nn.reshape %r {node = "/flatten"}

// EDGE:       builtin.module attributes {monet.target = "edge_npu"}
// EDGE:       nn.matmul %x, %w {monet.costs = [#hw.cost<core = 0,

// NOTARGET: monet-opt: error: annotate-cost: the target option is required
// UNKNOWN:  monet-opt: error: {{.*}}no_such_target
