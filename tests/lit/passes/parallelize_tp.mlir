// parallelize{tp=2}: Megatron's column/row split of an MLP block (layer norm, fc1 by columns,
// ReLU, fc2 by rows, residual add) and its all-reduces; fc3 feeds the loss, so it stays whole.
// RUN: monet-opt %s -p 'autodiff,insert-optimizer,parallelize{tp=2}' | filecheck %s
// RUN: monet-opt %s -p 'autodiff,insert-optimizer,parallelize{tp=2 dp=2 zero=1}' | filecheck %s --check-prefix=DP
// RUN: not monet-opt %s -p 'autodiff,insert-optimizer,parallelize{tp=3}' 2>&1 | filecheck %s --check-prefix=DIVIDE
// RUN: not monet-opt %s -p 'autodiff,insert-optimizer,parallelize{tp=0}' 2>&1 | filecheck %s --check-prefix=ZERO

func.func @main(%x: tensor<4x6xf32> {monet.input = "x"},
                %g: tensor<6xf32> {monet.param = "ln.weight", monet.trainable},
                %beta: tensor<6xf32> {monet.param = "ln.bias", monet.trainable},
                %w1: tensor<8x6xf32> {monet.param = "fc1.weight", monet.trainable},
                %b1: tensor<8xf32> {monet.param = "fc1.bias", monet.trainable},
                %w2: tensor<6x8xf32> {monet.param = "fc2.weight", monet.trainable},
                %b2: tensor<6xf32> {monet.param = "fc2.bias", monet.trainable},
                %w3: tensor<10x6xf32> {monet.param = "fc3.weight", monet.trainable}) -> tensor<4x10xf32> {
  %n = nn.layer_norm %x, %g, %beta {axis = -1 : i64, node = "/ln"} : (tensor<4x6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %a = nn.gemm %n, %w1, %b1 {trans_b = true, node = "/fc1"} : (tensor<4x6xf32>, tensor<8x6xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = nn.relu %a {node = "/relu"} : tensor<4x8xf32>
  %y = nn.gemm %r, %w2, %b2 {trans_b = true, node = "/fc2"} : (tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %s = nn.add %n, %y {node = "/residual"} : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %z = nn.gemm %s, %w3 {trans_b = true, node = "/fc3"} : (tensor<4x6xf32>, tensor<10x6xf32>) -> tensor<4x10xf32>
  func.return %z : tensor<4x10xf32>
}

// CHECK:      monet.parallel = {dp = 1 : i64, tp = 2 : i64, pp = 1 : i64, zero = 0 : i64}
// CHECK:      %w1: tensor<4x6xf32> {monet.param = "fc1.weight", monet.trainable}, %b1: tensor<4xf32> {monet.param = "fc1.bias", monet.trainable}, %w2: tensor<6x4xf32> {monet.param = "fc2.weight", monet.trainable}, %b2: tensor<6xf32> {monet.param = "fc2.bias", monet.trainable}, %w3: tensor<10x6xf32>
// CHECK:      %a = nn.gemm %n, %w1, %b1 {trans_b = true, node = "/fc1"} : (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %r = nn.relu %a {node = "/relu"} : tensor<4x4xf32>
// CHECK-NEXT: %[[P:.*]] = nn.gemm %r, %w2 {trans_b = true, node = "/fc2"} : (tensor<4x4xf32>, tensor<6x4xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: %[[Y:.*]] = collective.all_reduce %[[P]] {group = "tp", size = 2 : i64, node = "/fc2", phase = "forward"} : tensor<4x6xf32> -> tensor<4x6xf32>
// CHECK-NEXT: %y = nn.add %[[Y]], %b2 {node = "/fc2"}
// CHECK:      %s = nn.add %n, %y
// CHECK:      %z = nn.gemm %s, %w3 {trans_b = true, node = "/fc3"} : (tensor<4x6xf32>, tensor<10x6xf32>) -> tensor<4x10xf32>
// the input gradient of fc1 is a partial sum: all-reduced before it meets the residual's
// CHECK:      %[[DN:.*]] = grad.matmul_lhs %d_a, %w1 {trans_b = true, node = "/fc1"} : (tensor<4x4xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: %{{.*}} = collective.all_reduce %[[DN]] {group = "tp", size = 2 : i64, node = "/fc1"} : tensor<4x6xf32> -> tensor<4x6xf32>
// CHECK-NOT:  collective.
// CHECK:      train.adam %w1, %d_w1, %w1_exp_avg, %w1_exp_avg_sq, %w1_step {{.*}} : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<f32>

// DP:      collective.all_reduce {{.*}} {group = "tp", size = 2 : i64, node = "/fc2", phase = "forward"}
// DP:      collective.reduce_scatter {{.*}} {group = "dp", size = 2 : i64}
// DIVIDE:  parallelize: tp=3 does not divide dimension 0 (8) of tensor<8x6xf32> at /fc1
// ZERO:    parallelize: tp must be at least 1, got 0
