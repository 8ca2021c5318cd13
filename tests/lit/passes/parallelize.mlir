// parallelize: gradient collectives per bucket, ZeRO sharding of state, gradients and parameters.
// RUN: monet-opt %s -p 'insert-optimizer,parallelize{dp=4 bucket=0}' | filecheck %s --check-prefix=DP
// RUN: monet-opt %s -p 'insert-optimizer,parallelize{dp=4}' | filecheck %s --check-prefix=BUCKET
// RUN: monet-opt %s -p 'insert-optimizer,parallelize{dp=4 zero=2 bucket=0 algorithm=tree}' | filecheck %s --check-prefix=ZERO2
// RUN: monet-opt %s -p 'insert-optimizer,parallelize{dp=4 zero=3 bucket=0}' | filecheck %s --check-prefix=ZERO3
// RUN: monet-opt %s -p 'insert-optimizer,parallelize{pp=2}' | filecheck %s --check-prefix=PP
// RUN: not monet-opt %s -p 'insert-optimizer,parallelize{dp=4 zero=5}' 2>&1 | filecheck %s --check-prefix=BADZERO
// RUN: not monet-opt %s -p 'parallelize{dp=4}' 2>&1 | filecheck %s --check-prefix=NOOPT

func.func @step(%x: tensor<2x3xf32> {monet.input = "x"}, %t: tensor<2x4xf32> {monet.input = "t"},
                %w: tensor<4x3xf32> {monet.param = "fc.weight", monet.trainable},
                %b: tensor<4xf32> {monet.param = "fc.bias", monet.trainable})
    -> (tensor<f32> {monet.loss}, tensor<4x3xf32> {monet.grad = "fc.weight"}, tensor<4xf32> {monet.grad = "fc.bias"}) {
  %y = nn.gemm %x, %w, %b {trans_b = true, node = "/fc/Gemm"} : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %loss = nn.mse_loss %y, %t {node = "/loss"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  %one = nn.constant dense<1.000000e+00> : tensor<f32> {node = "/loss", phase = "backward"}
  %dy = grad.mse_loss %one, %y, %t {node = "/loss"} : (tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %dx = grad.matmul_lhs %dy, %w {trans_b = true, node = "/fc/Gemm"} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %dw = grad.matmul_rhs %dy, %x {trans_b = true, node = "/fc/Gemm"} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %db = grad.unbroadcast %dy {node = "/fc/Gemm"} : (tensor<2x4xf32>) -> tensor<4xf32>
  func.return %loss, %dw, %db : tensor<f32>, tensor<4x3xf32>, tensor<4xf32>
}

// DP:      builtin.module attributes {monet.parallel = {dp = 4 : i64, tp = 1 : i64, pp = 1 : i64, zero = 0 : i64}}
// DP:      %0 = collective.all_reduce %dw {group = "dp", size = 4 : i64} : tensor<4x3xf32> -> tensor<4x3xf32>
// DP:      %1 = collective.all_reduce %db {group = "dp", size = 4 : i64} : tensor<4xf32> -> tensor<4xf32>
// DP:      train.adam %w, %0,
// DP:      train.adam %b, %1,

// BUCKET:      %0, %1 = collective.all_reduce %dw, %db {group = "dp", size = 4 : i64} : tensor<4x3xf32>, tensor<4xf32> -> tensor<4x3xf32>, tensor<4xf32>
// BUCKET-NEXT: train.adam %w, %0,

// ZERO2:      %w_exp_avg: tensor<3xf32> {monet.state = "fc.weight.exp_avg"}, %w_exp_avg_sq: tensor<3xf32> {monet.state = "fc.weight.exp_avg_sq"}, %w_step: tensor<f32> {monet.state = "fc.weight.step"}
// ZERO2:      %0 = collective.reduce_scatter %dw {group = "dp", size = 4 : i64, algorithm = "tree"} : tensor<4x3xf32> -> tensor<3xf32>
// ZERO2:      %2 = collective.shard %w {group = "dp", size = 4 : i64, node = "fc.weight"} : tensor<4x3xf32> -> tensor<3xf32>
// ZERO2-NEXT: train.adam %2, %0, %w_exp_avg, %w_exp_avg_sq, %w_step
// ZERO2-NEXT: %3 = collective.all_gather %2 {group = "dp", size = 4 : i64, algorithm = "tree", phase = "optimizer"} : tensor<3xf32> -> tensor<4x3xf32>

// ZERO3:      %w: tensor<3xf32> {monet.param = "fc.weight", monet.trainable}, %b: tensor<1xf32> {monet.param = "fc.bias", monet.trainable}
// ZERO3:      %0 = collective.all_gather %w {group = "dp", size = 4 : i64, node = "/fc/Gemm", phase = "forward"} : tensor<3xf32> -> tensor<4x3xf32>
// ZERO3:      nn.gemm %x, %0, %1
// ZERO3:      %2 = collective.all_gather %w {group = "dp", size = 4 : i64, node = "/fc/Gemm"} : tensor<3xf32> -> tensor<4x3xf32>
// ZERO3-NEXT: grad.matmul_lhs %dy, %2
// ZERO3:      train.adam %w, %3, %w_exp_avg, %w_exp_avg_sq, %w_step
// ZERO3-NOT:  collective.all_gather

// PP:      func.func @step_stage0(%x: tensor<2x3xf32> {monet.input = "x"}, %w: tensor<4x3xf32> {monet.param = "fc.weight", monet.trainable}
// PP:      %y = nn.gemm %x, %w, %b
// PP-NEXT: collective.send %y {group = "pp", size = 2 : i64, peer = 1 : i64, node = "/fc/Gemm", phase = "forward"} : tensor<2x4xf32>
// PP-NEXT: %dy = collective.recv {group = "pp", size = 2 : i64, peer = 1 : i64, node = "/loss"} : tensor<2x4xf32>
// PP:      train.adam %w, %dw
// PP:      func.func @step_stage1(%t: tensor<2x4xf32> {monet.input = "t"}) -> (tensor<f32> {monet.loss}) attributes {monet.stage = 1 : i64}
// PP-NEXT: %y = collective.recv {group = "pp", size = 2 : i64, peer = 0 : i64, node = "/fc/Gemm", phase = "forward"} : tensor<2x4xf32>
// PP-NEXT: %loss = nn.mse_loss %y, %t
// PP:      collective.send %dy {group = "pp", size = 2 : i64, peer = 0 : i64, node = "/loss"} : tensor<2x4xf32>
// PP-NEXT: func.return %loss : tensor<f32>

// BADZERO: parallelize: zero must be 0, 1, 2 or 3, got 5
// NOOPT:   parallelize: the step has no optimizer ops (run autodiff and insert-optimizer first)
