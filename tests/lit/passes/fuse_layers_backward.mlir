// RUN: monet-opt %s -p 'autodiff{loss=sum},fuse-layers{tiles=4}' | filecheck %s
// RUN: monet-opt %s -p 'autodiff{loss=sum},fuse-layers{tiles=4 backward=false}' | filecheck %s --check-prefix=FORWARD-ONLY
// RUN: monet-opt %s -p 'autodiff{loss=sum},fuse-layers{mode=explicit tiles=2 stacks="backward:/gate:/fc1"}' | filecheck %s --check-prefix=EXPLICIT
// RUN: not monet-opt %s -p 'autodiff{loss=sum},fuse-layers{mode=explicit stacks="backward:/fc1:/gate"}' 2>&1 | filecheck %s --check-prefix=ORDER

// The backward pass fuses too: the gradient of /fc2's input (rows of dy times the whole weight)
// and the element-wise gradients after it form one stack along the rows; the weight gradients
// (grad.matmul_rhs) reduce over the rows, stay whole and are stepped over.
func.func @gated(%x: tensor<1x8x16xf32> {monet.input = "x"}, %w1: tensor<16x32xf32> {monet.param = "w1", monet.trainable}, %w2: tensor<32x16xf32> {monet.param = "w2", monet.trainable}) -> tensor<1x8x16xf32> {
  %h = nn.matmul %x, %w1 {node = "/fc1"} : (tensor<1x8x16xf32>, tensor<16x32xf32>) -> tensor<1x8x32xf32>
  %t = nn.tanh %h {node = "/act"} : tensor<1x8x32xf32>
  %m = nn.mul %t, %h {node = "/gate"} : (tensor<1x8x32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  %y = nn.matmul %m, %w2 {node = "/fc2"} : (tensor<1x8x32xf32>, tensor<32x16xf32>) -> tensor<1x8x16xf32>
  func.return %y : tensor<1x8x16xf32>
}

// CHECK-LABEL: func.func @gated
// CHECK:        nn.matmul %m, %w2 {monet.tiling = #hw.tiling<stack = 0, tiles = 4, axis = 1>
// CHECK:        %d_y = grad.reduce_sum %d_loss {keepdims = false, node = "loss"}
// CHECK-NEXT:   %d_m = grad.matmul_lhs %d_y, %w2 {monet.tiling = #hw.tiling<stack = 1, tiles = 4, axis = 1>
// CHECK-NEXT:   %d_w2 = grad.matmul_rhs %d_y, %m {node = "/fc2"}
// CHECK-NEXT:   %d_t = nn.mul %d_m, %h {monet.tiling = #hw.tiling<stack = 1, tiles = 4, axis = 1>
// CHECK-NEXT:   %d_h = nn.mul %d_m, %t {monet.tiling = #hw.tiling<stack = 1, tiles = 4, axis = 1>
// CHECK-NEXT:   %d_h_1 = grad.tanh %d_t, %t {monet.tiling = #hw.tiling<stack = 1, tiles = 4, axis = 1>
// CHECK-NEXT:   %d_h_2 = nn.sum %d_h, %d_h_1 {monet.tiling = #hw.tiling<stack = 1, tiles = 4, axis = 1>
// CHECK-NEXT:   %d_w1 = grad.matmul_rhs %d_h_2, %x {node = "/fc1"}

// FORWARD-ONLY-LABEL: func.func @gated
// FORWARD-ONLY:       nn.matmul %m, %w2 {monet.tiling = #hw.tiling<stack = 0, tiles = 4, axis = 1>
// FORWARD-ONLY-NOT:   stack = 1

// EXPLICIT-LABEL: func.func @gated
// EXPLICIT:       %d_m = grad.matmul_lhs %d_y, %w2 {node = "/fc2"}
// EXPLICIT:       %d_t = nn.mul %d_m, %h {monet.tiling = #hw.tiling<stack = 0, tiles = 2, axis = 1>
// EXPLICIT-NEXT:  %d_h = nn.mul %d_m, %t {monet.tiling = #hw.tiling<stack = 0, tiles = 2, axis = 1>
// EXPLICIT-NEXT:  %d_h_1 = grad.tanh %d_t, %t {monet.tiling = #hw.tiling<stack = 0, tiles = 2, axis = 1>
// EXPLICIT-NEXT:  %d_h_2 = nn.sum %d_h, %d_h_1 {monet.tiling = #hw.tiling<stack = 0, tiles = 2, axis = 1>
// EXPLICIT-NEXT:  %d_w1 = grad.matmul_rhs %d_h_2, %x {node = "/fc1"}

// ORDER: error: fuse-layers: stack 'backward:/fc1:/gate': expected "backward:first:last" with two backward node names, in program order

