// insert-optimizer: one in-place train op per monet.grad result, persistent state arguments,
// gradients removed from the results; idempotent; gradients survive dce.
// RUN: monet-opt %s --split-input-file --verify-diagnostics -p 'insert-optimizer{kind=sgd lr=0.1}' | filecheck %s --check-prefixes=CHECK,SGD
// RUN: monet-opt %s --split-input-file --verify-diagnostics -p 'insert-optimizer{kind=momentum lr=0.05 momentum=0.8 nesterov=true weight-decay=0.001}' | filecheck %s --check-prefixes=CHECK,MOM
// RUN: monet-opt %s --split-input-file --verify-diagnostics -p 'insert-optimizer' | filecheck %s --check-prefixes=CHECK,ADAM
// RUN: monet-opt %s --split-input-file --verify-diagnostics -p 'insert-optimizer{kind=adam lr=0.001},insert-optimizer{kind=sgd}' | filecheck %s --check-prefixes=CHECK,ADAM
// RUN: monet-opt %s --split-input-file --verify-diagnostics -p 'insert-optimizer{kind=adamw lr=1 beta1=0.8 beta2=0.99 eps=1.0e-6}' | filecheck %s --check-prefixes=CHECK,ADAMW
// RUN: monet-opt %s --split-input-file --verify-diagnostics -p 'insert-optimizer{kind=adam lr=0.001},dce' | filecheck %s --check-prefixes=CHECK,DCE
// RUN: not monet-opt %s -p 'insert-optimizer{kind=sgd nesterov=true}' 2>&1 | filecheck %s --check-prefix=BADOPT
// RUN: not monet-opt %s -p 'insert-optimizer{weight-decay=-0.5}' 2>&1 | filecheck %s --check-prefix=BADWD

func.func @step(%x: tensor<2x3xf32> {monet.input = "x"}, %t: tensor<2x4xf32> {monet.input = "t"},
                %w: tensor<4x3xf32> {monet.param = "fc.weight", monet.trainable},
                %b: tensor<4xf32> {monet.param = "fc.bias", monet.trainable})
    -> (tensor<f32> {monet.loss}, tensor<4x3xf32> {monet.grad = "fc.weight"}, tensor<4xf32> {monet.grad = "fc.bias"}) {
  %y = nn.gemm %x, %w, %b {trans_b = true, node = "/fc/Gemm"} : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %loss = nn.mse_loss %y, %t {node = "/loss"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  %one = nn.constant dense<1.000000e+00> : tensor<f32> {node = "/loss", phase = "backward"}
  %dy = grad.mse_loss %one, %y, %t {node = "/loss"} : (tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %dw = grad.matmul_rhs %dy, %x {trans_b = true, node = "/fc/Gemm"} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %db = grad.unbroadcast %dy {node = "/fc/Gemm"} : (tensor<2x4xf32>) -> tensor<4xf32>
  func.return %loss, %dw, %db : tensor<f32>, tensor<4x3xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @step
// CHECK-SAME:    %w: tensor<4x3xf32> {monet.param = "fc.weight", monet.trainable},

// SGD-SAME:      %b: tensor<4xf32> {monet.param = "fc.bias", monet.trainable}) -> (tensor<f32> {monet.loss}) {
// SGD:           train.sgd %w, %dw {lr = 1.000000e-01 : f64, node = "fc.weight"} : tensor<4x3xf32>, tensor<4x3xf32>
// SGD-NEXT:      train.sgd %b, %db {lr = 1.000000e-01 : f64, node = "fc.bias"} : tensor<4xf32>, tensor<4xf32>
// SGD-NEXT:      func.return %loss : tensor<f32>

// MOM-SAME:      %w_momentum_buffer: tensor<4x3xf32> {monet.state = "fc.weight.momentum_buffer"}, %b_momentum_buffer: tensor<4xf32> {monet.state = "fc.bias.momentum_buffer"}) -> (tensor<f32> {monet.loss}) {
// MOM:           train.momentum %w, %dw, %w_momentum_buffer {lr = 5.000000e-02 : f64, momentum = 8.000000e-01 : f64, nesterov = true, weight_decay = 1.000000e-03 : f64, node = "fc.weight"} : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
// MOM-NEXT:      train.momentum %b, %db, %b_momentum_buffer {{{.*}} node = "fc.bias"} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
// MOM-NEXT:      func.return %loss : tensor<f32>

// ADAM-SAME:     %w_exp_avg: tensor<4x3xf32> {monet.state = "fc.weight.exp_avg"}, %w_exp_avg_sq: tensor<4x3xf32> {monet.state = "fc.weight.exp_avg_sq"}, %w_step: tensor<f32> {monet.state = "fc.weight.step"},
// ADAM-SAME:     %b_exp_avg: tensor<4xf32> {monet.state = "fc.bias.exp_avg"}, %b_exp_avg_sq: tensor<4xf32> {monet.state = "fc.bias.exp_avg_sq"}, %b_step: tensor<f32> {monet.state = "fc.bias.step"}) -> (tensor<f32> {monet.loss}) {
// ADAM:          train.adam %w, %dw, %w_exp_avg, %w_exp_avg_sq, %w_step {lr = 1.000000e-03 : f64, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, node = "fc.weight"} : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>
// ADAM-NEXT:     train.adam %b, %db, %b_exp_avg, %b_exp_avg_sq, %b_step {{{.*}} node = "fc.bias"} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
// ADAM-NEXT:     func.return %loss : tensor<f32>
// ADAM-NOT:      train.sgd

// AdamW: PyTorch's default weight decay 0.01 is written on the op.
// ADAMW-SAME:    %w_exp_avg: tensor<4x3xf32> {monet.state = "fc.weight.exp_avg"}, %w_exp_avg_sq: tensor<4x3xf32> {monet.state = "fc.weight.exp_avg_sq"}, %w_step: tensor<f32> {monet.state = "fc.weight.step"},
// ADAMW:         train.adamw %w, %dw, %w_exp_avg, %w_exp_avg_sq, %w_step {lr = 1.000000e+00 : f64, beta1 = 8.000000e-01 : f64, beta2 = 9.900000e-01 : f64, eps = 1.000000e-06 : f64, weight_decay = 1.000000e-02 : f64, node = "fc.weight"}
// ADAMW-NEXT:    train.adamw %b, %db, %b_exp_avg, %b_exp_avg_sq, %b_step

// The train ops update in place and have no results: dce keeps every gradient op.
// DCE:           %dy = grad.mse_loss
// DCE-NEXT:      %dw = grad.matmul_rhs
// DCE-NEXT:      %db = grad.unbroadcast
// DCE-NEXT:      train.adam %w, %dw
// DCE-NEXT:      train.adam %b, %db
// DCE-NEXT:      func.return %loss : tensor<f32>

// BADOPT: monet-opt: error: insert-optimizer: nesterov applies to kind=momentum only, not kind=sgd
// BADWD:  monet-opt: error: insert-optimizer: weight-decay must be non-negative (or -1 for the kind's default), got -0.5

// -----

// Some parameters already have an optimizer op, others only a gradient: rejected.
func.func @partial(%w: tensor<4xf32> {monet.param = "w", monet.trainable}, %b: tensor<4xf32> {monet.param = "b", monet.trainable},
                   %gw: tensor<4xf32> {monet.input = "gw"}, %gb: tensor<4xf32> {monet.input = "gb"}) -> (tensor<4xf32> {monet.grad = "b"}) {
  train.sgd %w, %gw {lr = 1.000000e-01 : f64, node = "w"} : tensor<4xf32>, tensor<4xf32>
  func.return %gb : tensor<4xf32>
}

// CHECK: insert-optimizer: the step is partly optimized: 1 parameter(s) already have an optimizer op (e.g. 'w') but the gradients of 1 do not (e.g. 'b')

// -----

// An optimized step (no monet.grad result left) is left unchanged.
func.func @optimized(%w: tensor<4xf32> {monet.param = "w", monet.trainable}, %g: tensor<4xf32> {monet.input = "g"},
                     %m: tensor<4xf32> {monet.state = "w.exp_avg"}, %v: tensor<4xf32> {monet.state = "w.exp_avg_sq"}, %n: tensor<f32> {monet.state = "w.step"}) {
  train.adam %w, %g, %m, %v, %n {lr = 1.000000e-03 : f64, node = "w"} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
  func.return
}

// CHECK-LABEL: func.func @optimized(%w: tensor<4xf32> {monet.param = "w", monet.trainable}, %g: tensor<4xf32> {monet.input = "g"}, %m: tensor<4xf32> {monet.state = "w.exp_avg"}, %v: tensor<4xf32> {monet.state = "w.exp_avg_sq"}, %n: tensor<f32> {monet.state = "w.step"}) {
// CHECK-NEXT:    train.adam %w, %g, %m, %v, %n {lr = 1.000000e-03 : f64, node = "w"}
// CHECK-NEXT:    func.return

// -----

// A gradient must name a trainable monet.param argument.
func.func @unknown(%w: tensor<4xf32> {monet.param = "w", monet.trainable}, %g: tensor<4xf32> {monet.input = "g"}) -> (tensor<4xf32> {monet.grad = "v"}) {
  func.return %g : tensor<4xf32>
}

// CHECK: insert-optimizer: result 0 is the gradient of 'v', but no monet.param argument has that name

// -----

func.func @frozen(%w: tensor<4xf32> {monet.param = "w"}, %g: tensor<4xf32> {monet.input = "g"}) -> (tensor<4xf32> {monet.grad = "w"}) {
  func.return %g : tensor<4xf32>
}

// CHECK: insert-optimizer: result 0 is the gradient of 'w', which is not monet.trainable
