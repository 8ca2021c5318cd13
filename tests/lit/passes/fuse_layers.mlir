// RUN: monet-opt %s -p 'fuse-layers{tiles=4}' | filecheck %s
// RUN: monet-opt %s -p 'fuse-layers{mode=explicit tiles=2 stacks="/relu1:/pool"}' | filecheck %s --check-prefix=EXPLICIT
// RUN: monet-opt %s -p 'fuse-layers{tiles=4},fuse-layers{mode=none}' | filecheck %s --check-prefix=NONE
// RUN: monet-opt %s -p 'fuse-layers{tiles=4},schedule{target=edge_npu}' | filecheck %s --check-prefix=SCHED
// RUN: not monet-opt %s -p 'fuse-layers{mode=explicit stacks="/relu1:/nowhere"}' 2>&1 | filecheck %s --check-prefix=BADSTACK
// RUN: not monet-opt %s -p 'fuse-layers{mode=explicit stacks="/conv1:/flatten"}' 2>&1 | filecheck %s --check-prefix=UNFUSABLE

// conv -> relu -> conv -> relu -> pool fuse into one stack tiled along the rows (axis 2); the
// flatten ends it (it merges the rows), the product after it is a stack of one and stays unfused.
func.func @cnn(%x: tensor<1x3x32x32xf32> {monet.input = "x"}, %w1: tensor<8x3x3x3xf32> {monet.param = "w1", monet.trainable}, %w2: tensor<8x8x3x3xf32> {monet.param = "w2", monet.trainable}, %w3: tensor<10x2048xf32> {monet.param = "w3", monet.trainable}) -> tensor<1x10xf32> {
  %c1 = nn.conv %x, %w1 {pads = array<i64: 1, 1, 1, 1>, node = "/conv1"} : (tensor<1x3x32x32xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x32x32xf32>
  %r1 = nn.relu %c1 {node = "/relu1"} : tensor<1x8x32x32xf32>
  %c2 = nn.conv %r1, %w2 {pads = array<i64: 1, 1, 1, 1>, node = "/conv2"} : (tensor<1x8x32x32xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x32x32xf32>
  %r2 = nn.relu %c2 {node = "/relu2"} : tensor<1x8x32x32xf32>
  %p = nn.max_pool %r2 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, node = "/pool"} : (tensor<1x8x32x32xf32>) -> tensor<1x8x16x16xf32>
  %f = nn.reshape %p {node = "/flatten"} : (tensor<1x8x16x16xf32>) -> tensor<1x2048xf32>
  %y = nn.gemm %f, %w3 {trans_b = true, node = "/fc"} : (tensor<1x2048xf32>, tensor<10x2048xf32>) -> tensor<1x10xf32>
  func.return %y : tensor<1x10xf32>
}

// CHECK:      nn.conv %x, %w1 {monet.tiling = #hw.tiling<stack = 0, tiles = 4, axis = 2>
// CHECK-NEXT: nn.relu %c1 {monet.tiling = #hw.tiling<stack = 0, tiles = 4, axis = 2>
// CHECK-NEXT: nn.conv %r1, %w2 {monet.tiling = #hw.tiling<stack = 0, tiles = 4, axis = 2>
// CHECK-NEXT: nn.relu %c2 {monet.tiling = #hw.tiling<stack = 0, tiles = 4, axis = 2>
// CHECK-NEXT: nn.max_pool %r2 {monet.tiling = #hw.tiling<stack = 0, tiles = 4, axis = 2>
// CHECK-NEXT: nn.reshape %p {node = "/flatten"}
// CHECK-NEXT: nn.gemm %f, %w3 {trans_b = true, node = "/fc"}

// EXPLICIT:      nn.conv %x, %w1 {pads
// EXPLICIT-NEXT: nn.relu %c1 {monet.tiling = #hw.tiling<stack = 0, tiles = 2, axis = 2>
// EXPLICIT-NEXT: nn.conv %r1, %w2 {monet.tiling = #hw.tiling<stack = 0, tiles = 2, axis = 2>
// EXPLICIT-NEXT: nn.relu %c2 {monet.tiling = #hw.tiling<stack = 0, tiles = 2, axis = 2>
// EXPLICIT-NEXT: nn.max_pool %r2 {monet.tiling = #hw.tiling<stack = 0, tiles = 2, axis = 2>
// EXPLICIT-NEXT: nn.reshape

// NONE-NOT: monet.tiling

// SCHED:      nn.conv %x, %w1 {monet.tiling = #hw.tiling<stack = 0, tiles = 4, axis = 2>, monet.schedule = [#hw.sched<core = {{.*}}>, #hw.sched<{{.*}}>, #hw.sched<{{.*}}>, #hw.sched<{{.*}}>]
// SCHED:      nn.gemm %f, %w3 {monet.schedule = #hw.sched<

// BADSTACK: monet-opt: error: fuse-layers: stack '/relu1:/nowhere': expected "first:last" with two forward node names
// UNFUSABLE: monet-opt: error: fuse-layers: stack '/conv1:/flatten': node '/flatten' cannot be tiled along the stack's axis
