// RUN: monet-opt %s -p 'quantize{policy="weights=mxfp8_e4m3,activations=mxfp8_e4m3,gradients=mxfp8_e5m2"}' | filecheck %s --check-prefix=VECTOR
// RUN: monet-opt %s -p 'quantize{policy="mxfp4_e2m1" group="square:8x8"}' | filecheck %s --check-prefix=SQUARE
// RUN: monet-opt %s -p 'quantize{policy="bf16"}' | filecheck %s --check-prefix=PLAIN
// RUN: monet-opt %s -p 'quantize{policy="mxfp4_e2m1"},quantize{policy="mxfp4_e2m1"}' | filecheck %s --check-prefix=TWICE

// A two-layer MLP after autodiff and insert-optimizer (sgd).
builtin.module {
  func.func @main(%x: tensor<8x64xf32> {monet.input = "x"}, %w1: tensor<64x32xf32> {monet.param = "w1", monet.trainable}, %w2: tensor<32x16xf32> {monet.param = "w2", monet.trainable}, %labels: tensor<8x16xf32> {monet.input = "labels"}) -> (tensor<f32> {monet.loss}) {
    %h = nn.matmul %x, %w1 {node = "fc1"} : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
    %a = nn.relu %h {node = "relu"} : tensor<8x32xf32>
    %y = nn.matmul %a, %w2 {node = "fc2"} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
    %loss = nn.mse_loss %y, %labels {reduction = "mean", node = "loss"} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<f32>
    %d_loss = nn.constant dense<1.000000e+00> : tensor<f32> {node = "loss", phase = "backward"}
    %d_y = grad.mse_loss %d_loss, %y, %labels {reduction = "mean", node = "loss"} : (tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %d_a = grad.matmul_lhs %d_y, %w2 {node = "fc2"} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
    %d_w2 = grad.matmul_rhs %d_y, %a {node = "fc2"} : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<32x16xf32>
    %d_h = grad.relu %d_a, %a {node = "relu"} : tensor<8x32xf32>
    %d_w1 = grad.matmul_rhs %d_h, %x {node = "fc1"} : (tensor<8x32xf32>, tensor<8x64xf32>) -> tensor<64x32xf32>
    train.sgd %w1, %d_w1 {lr = 1.000000e-03 : f64, node = "w1"} : tensor<64x32xf32>, tensor<64x32xf32>
    train.sgd %w2, %d_w2 {lr = 1.000000e-03 : f64, node = "w2"} : tensor<32x16xf32>, tensor<32x16xf32>
    func.return %loss : tensor<f32>
  }
}

// Vector groups (1 x 32): every transposed use is re-encoded. dY is cast twice from its fp32
// value (along N for dX, along M for dW); W2^T for dX and X^T, A^T for dW are requantized from
// the forward casts; each weight is re-quantized after its update.
// VECTOR:      %x_mx1 = mx.quantize %x {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>, node = "fc1"} : tensor<8x64xf32>
// VECTOR-NEXT: %w1_mx0 = mx.quantize %w1 {format = "mxfp8_e4m3", axis = 0 : i64, group = array<i64: 1, 32>, node = "fc1"} : tensor<64x32xf32>
// VECTOR-NEXT: %h = nn.matmul %x_mx1, %w1_mx0 {node = "fc1"}
// VECTOR:      %a_mx1 = mx.quantize %a {format = "mxfp8_e4m3", axis = 1 : i64
// VECTOR-NEXT: %w2_mx0 = mx.quantize %w2 {format = "mxfp8_e4m3", axis = 0 : i64
// VECTOR-NEXT: %y = nn.matmul %a_mx1, %w2_mx0
// VECTOR:      %d_y_mx1 = mx.quantize %d_y {format = "mxfp8_e5m2", axis = 1 : i64, group = array<i64: 1, 32>, node = "fc2", phase = "backward"}
// VECTOR-NEXT: %w2_mxt1 = mx.requantize %w2_mx0 {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>, node = "fc2", phase = "backward"} : tensor<32x16xf32>
// VECTOR-NEXT: %d_a = grad.matmul_lhs %d_y_mx1, %w2_mxt1 {node = "fc2"}
// VECTOR-NEXT: %d_y_mx0 = mx.quantize %d_y {format = "mxfp8_e5m2", axis = 0 : i64
// VECTOR-NEXT: %a_mxt0 = mx.requantize %a_mx1 {format = "mxfp8_e4m3", axis = 0 : i64
// VECTOR-NEXT: %d_w2 = grad.matmul_rhs %d_y_mx0, %a_mxt0 {node = "fc2"}
// VECTOR:      %d_h_mx0 = mx.quantize %d_h {format = "mxfp8_e5m2", axis = 0 : i64
// VECTOR-NEXT: %x_mxt0 = mx.requantize %x_mx1 {format = "mxfp8_e4m3", axis = 0 : i64
// VECTOR-NEXT: %d_w1 = grad.matmul_rhs %d_h_mx0, %x_mxt0 {node = "fc1"}
// VECTOR-NEXT: train.sgd %w1, %d_w1
// VECTOR-NEXT: %w1_mx0_next = mx.quantize %w1 {format = "mxfp8_e4m3", axis = 0 : i64, group = array<i64: 1, 32>, node = "w1", phase = "optimizer"}
// VECTOR-NEXT: train.sgd %w2, %d_w2
// VECTOR-NEXT: %w2_mx0_next = mx.quantize %w2

// Square 8 x 8 groups: one encoding serves both axes of its tile, so no requantize; dY is cast once.
// SQUARE-NOT:  mx.requantize
// SQUARE:      %w2_mx0 = mx.quantize %w2 {format = "mxfp4_e2m1", axis = 0 : i64, group = array<i64: 8, 8>, partner = 1 : i64, node = "fc2"}
// SQUARE:      %d_y_mx1 = mx.quantize %d_y {format = "mxfp4_e2m1", axis = 1 : i64, group = array<i64: 8, 8>, partner = 0 : i64, node = "fc2", phase = "backward"}
// SQUARE-NEXT: %d_a = grad.matmul_lhs %d_y_mx1, %w2_mx0 {node = "fc2"}
// SQUARE-NEXT: %d_w2 = grad.matmul_rhs %d_y_mx1, %a_mx1 {node = "fc2"}
// SQUARE:      %d_w1 = grad.matmul_rhs %d_h_mx0, %x_mx1 {node = "fc1"}
// SQUARE-NOT:  mx.requantize

// A policy without MX formats inserts nothing; a second run leaves the casts as they are.
// PLAIN-NOT:   mx.
// TWICE-COUNT-9: mx.quantize
// TWICE-NOT:   mx.quantize
