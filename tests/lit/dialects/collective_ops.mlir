// RUN: MONET_ROUNDTRIP
// RUN: MONET_GENERIC_ROUNDTRIP

func.func @step(%w: tensor<8x4xf32> {monet.param = "fc.weight", monet.trainable}, %g: tensor<8x4xf32>, %b: tensor<3xf32>, %x: tensor<2x4xf32>) {
  %gr, %br = collective.all_reduce %g, %b {group = "dp", size = 8 : i64, algorithm = "ring", node = "fc"} : tensor<8x4xf32>, tensor<3xf32> -> tensor<8x4xf32>, tensor<3xf32>
  %gs, %bs = collective.reduce_scatter %g, %b {group = "dp", size = 8 : i64, algorithm = "tree"} : tensor<8x4xf32>, tensor<3xf32> -> tensor<4xf32>, tensor<1xf32>
  %ws = collective.shard %w {group = "dp", size = 8 : i64} : tensor<8x4xf32> -> tensor<4xf32>
  %wf = collective.all_gather %ws {group = "dp", size = 8 : i64, phase = "forward"} : tensor<4xf32> -> tensor<8x4xf32>
  %wt = collective.shard %w {group = "tp", size = 2 : i64, axis = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
  %wg = collective.all_gather %wt {group = "tp", size = 2 : i64, axis = 0 : i64, phase = "forward"} : tensor<4x4xf32> -> tensor<8x4xf32>
  collective.send %x {group = "pp", size = 2 : i64, peer = 1 : i64, phase = "forward"} : tensor<2x4xf32>
  %y = collective.recv {group = "pp", size = 2 : i64, peer = 0 : i64, phase = "forward"} : tensor<2x4xf32>
  func.return
}

// CHECK-LABEL: func.func @step
// CHECK:       %gr, %br = collective.all_reduce %g, %b {group = "dp", size = 8 : i64, algorithm = "ring", node = "fc"} : tensor<8x4xf32>, tensor<3xf32> -> tensor<8x4xf32>, tensor<3xf32>
// CHECK:       %gs, %bs = collective.reduce_scatter %g, %b {group = "dp", size = 8 : i64, algorithm = "tree"} : tensor<8x4xf32>, tensor<3xf32> -> tensor<4xf32>, tensor<1xf32>
// CHECK:       %ws = collective.shard %w {group = "dp", size = 8 : i64} : tensor<8x4xf32> -> tensor<4xf32>
// CHECK:       %wf = collective.all_gather %ws {group = "dp", size = 8 : i64, phase = "forward"} : tensor<4xf32> -> tensor<8x4xf32>
// CHECK:       %wt = collective.shard %w {group = "tp", size = 2 : i64, axis = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK:       %wg = collective.all_gather %wt {group = "tp", size = 2 : i64, axis = 0 : i64, phase = "forward"} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK:       collective.send %x {group = "pp", size = 2 : i64, peer = 1 : i64, phase = "forward"} : tensor<2x4xf32>
// CHECK:       %y = collective.recv {group = "pp", size = 2 : i64, peer = 0 : i64, phase = "forward"} : tensor<2x4xf32>
// CHECK-GENERIC: "collective.all_reduce"(%g, %b) <{group = "dp", size = 8 : i64, algorithm = "ring", node = "fc"}> : (tensor<8x4xf32>, tensor<3xf32>) -> (tensor<8x4xf32>, tensor<3xf32>)
